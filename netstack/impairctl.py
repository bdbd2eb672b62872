"""Impair a link of a running testbed: which end sends, which backend, and who applies it.

``netstack impair`` is this module plus argument parsing and printing. One link's sending ends
(``direction``) each get the impairment from one backend (:func:`netstack.topo.impair.choose_backend`:
netem where the kernel has it, nft for loss and corruption, the sending switch's own model for
shaping without netem or for Gilbert-Elliott loss); whatever another backend held on that end
goes first, so an end carries one impairment at a time. docs/testbed.md "Impairment".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import runtime
from .runtime import RunPort
from .topo.impair import ImpairmentError, Shaping, apply_impairment, choose_backend, clear_impairment


@dataclass(frozen=True)
class Impair:
    """What to do to each sending end (the options of ``netstack impair``)."""

    corrupt: float = 0.0
    loss: float = 0.0
    shaping: Shaping | None = None
    backend: str = "auto"
    seed: int | None = None
    #: (p_good_to_bad, p_bad_to_good) for Gilbert-Elliott loss (the switch backend only)
    gilbert: tuple[float, float] | None = None
    bad_corrupt: float = 0.0
    bad_loss: float = 0.0
    clear: bool = False


def senders(direction: str | None, a: RunPort, b: RunPort) -> list[RunPort]:
    """The link ends that send in ``direction`` (``a>b`` default, ``b>a``, ``both``, or node
    names ``'sw1>sw2'`` / ``sw1:sw2``)."""
    if direction is None or direction.lower() == "a>b":
        return [a]
    if direction.lower() == "b>a":
        return [b]
    if direction.lower() == "both":
        return [a, b]
    src, sep, dst = direction.replace(":", ">").partition(">")
    for end, other in ((a, b), (b, a)):
        if sep and end.node == src and other.node == dst:
            return [end]
    raise ImpairmentError(f"--direction {direction!r}: use '{a.node}>{b.node}', '{b.node}>{a.node}' "
                          f"(quoted: the shell takes > as a redirect), {a.node}:{b.node} or both")


def impair_link(prefix: str, link: str, direction: str | None, what: Impair) -> list[dict[str, Any]]:
    """Impair (or clear) ``link``'s sending ends on the testbed under ``prefix``; one record per
    end: ``{"direction", "cleared"}`` plus, when impaired, the values and the backend used."""
    if what.gilbert and what.backend != "switch":
        raise ImpairmentError("--gilbert needs --backend switch (netem/nft draw independent losses)")
    state = runtime.load_state(prefix)
    ends = state.ends_of(link)
    if len(ends) != 2:
        links = sorted({p.link for p in state.ports})
        raise ImpairmentError(f"no link {link!r}; links: {', '.join(links)}")
    switches = state.nodes_running("switch")
    done: list[dict[str, Any]] = []
    for end in senders(direction, *ends):
        where = f"{end.node}>{end.peer}"
        try:
            if what.clear:
                _clear_end(prefix, end, end.node in switches)
                done.append({"direction": where, "cleared": True})
                continue
            used = _impair_end(prefix, end, what, end.node in switches)
        except ValueError as exc:  # a backend's plain ValueError (a bad Gilbert-Elliott pair, ...)
            raise ImpairmentError(str(exc)) from None
        done.append({"direction": where, "cleared": False, "corrupt": what.corrupt, "loss": what.loss,
                     "shaping": what.shaping.model() if what.shaping else {}, "backend": used})
    return done


def _clear_end(prefix: str, end: RunPort, is_switch: bool) -> None:
    clear_impairment(prefix, end.netns, end.ifname)
    if is_switch:
        runtime.control(prefix, end.node, "set_impairment", port=end.ifname, impairment=None)


def _impair_end(prefix: str, end: RunPort, what: Impair, is_switch: bool) -> str:
    """Impair one sending end with the backend ``what.backend`` names or 'auto' picks; the one used."""
    shaping = what.shaping
    backend = choose_backend(what.backend, shapes=bool(shaping), sender_is_switch=is_switch)
    if backend.value != "switch":
        if is_switch:  # one impairment per end: whatever the switch model held goes
            runtime.control(prefix, end.node, "set_impairment", port=end.ifname, impairment=None)
        used = apply_impairment(prefix, end.netns, end.ifname, corrupt=what.corrupt, loss=what.loss,
                                backend=backend, shaping=shaping)
        return used.value if used is not None else "cleared"
    clear_impairment(prefix, end.netns, end.ifname)
    model = {"corrupt": what.corrupt, "loss": what.loss, "seed": what.seed,
             **(shaping.model() if shaping is not None else {})}
    if what.gilbert:
        model.update(p_good_to_bad=what.gilbert[0], p_bad_to_good=what.gilbert[1], corrupt_bad=what.bad_corrupt,
                     loss_bad=what.bad_loss)
    runtime.control(prefix, end.node, "set_impairment", port=end.ifname, impairment=model)
    return "switch" + (" gilbert-elliott" if what.gilbert else "") + (
        " (no netem here)" if what.backend == "auto" else "")


__all__ = ["Impair", "impair_link", "senders"]
