"""``[links.impairment]``: loss and corruption, direction and backend, the Gilbert-Elliott model
and netem's shaping (delay, jitter, duplication, reordering); and, for the switch backend, a
switch at every end that sends."""

from __future__ import annotations

from typing import Any

from ..classes import Backend, Direction, Impairment, NodeKind
from ..values import NFT_RESOLUTION, parse_delay, parse_probability, show
from .fields import Errors, as_table, int_field, parsed, unknown_keys
from .nodes import NodeTable

_IMPAIRMENT_KEYS = {"corrupt", "loss", "direction", "backend", "p_good_to_bad", "p_bad_to_good", "loss_bad",
                    "corrupt_bad", "seed", "delay", "jitter", "duplicate", "reorder"}
_GILBERT_KEYS = ("p_good_to_bad", "p_bad_to_good", "loss_bad", "corrupt_bad")


def link_impairment(
    errors: Errors, path: str, t: dict[str, Any], nodes: NodeTable, ends: dict[str, str]
) -> tuple[Impairment | None, bool]:
    """The link's impairment (None: none), and whether it is valid, which for the switch
    backend includes a switch at every sending end."""
    if "impairment" not in t:
        return None, True
    impairment = parse_impairment(errors, f"{path}.impairment", t["impairment"])
    if impairment is None:
        return None, False
    ok = True
    if impairment.backend is Backend.SWITCH and len(ends) == 2:
        sides = {Direction.A_TO_B: ("a",), Direction.B_TO_A: ("b",), Direction.BOTH: ("a", "b")}
        for side in sides[impairment.direction]:
            if nodes.nodes[ends[side]].kind is not NodeKind.SWITCH:
                errors.add(f"{path}.impairment.backend",
                           f"the switch backend runs in the sending switch; {ends[side]} ({side} end, "
                           f"direction {impairment.direction.value}) is a {nodes.nodes[ends[side]].kind.value} "
                           "(use nft or netem there)")
                ok = False
    return impairment, ok


def parse_impairment(errors: Errors, path: str, raw: Any) -> Impairment | None:
    t = as_table(errors, path, raw)
    if t is None:
        return None
    before = len(errors.items)
    unknown_keys(errors, path, t, _IMPAIRMENT_KEYS)
    corrupt = loss = 0.0
    if "corrupt" in t:
        corrupt = parsed(errors, f"{path}.corrupt", t["corrupt"], parse_probability) or 0.0
    if "loss" in t:
        loss = parsed(errors, f"{path}.loss", t["loss"], parse_probability) or 0.0
    direction = Direction.A_TO_B
    if "direction" in t:
        try:
            direction = Direction(t["direction"])
        except ValueError:
            errors.add(f"{path}.direction", f"{show(t['direction'])} is not a direction (one of: a>b, b>a, both)")
    backend = Backend.AUTO
    if "backend" in t:
        try:
            backend = Backend(t["backend"])
        except ValueError:
            errors.add(f"{path}.backend",
                       f"{show(t['backend'])} is not a backend (one of: auto, netem, nft, switch)")
    gilbert = {"p_good_to_bad": 0.0, "p_bad_to_good": 1.0, "loss_bad": 0.0, "corrupt_bad": 0.0}
    for key in _GILBERT_KEYS:
        if key in t:
            v = parsed(errors, f"{path}.{key}", t[key], parse_probability)
            if v is not None:
                gilbert[key] = v
                if backend is not Backend.SWITCH:
                    errors.add(f"{path}.{key}", "the Gilbert-Elliott model needs backend = \"switch\" "
                                                "(netem and nft draw every frame independently)")
    if gilbert["p_good_to_bad"] > 0 and gilbert["p_bad_to_good"] == 0:
        errors.add(f"{path}.p_bad_to_good", "must be > 0 when the bad state is reachable (p_good_to_bad > 0)")
    for good, bad in (("loss", "corrupt"), ("loss_bad", "corrupt_bad")):
        total = (loss if good == "loss" else gilbert[good]) + (corrupt if bad == "corrupt" else gilbert[bad])
        if total > 1.0:
            errors.add(f"{path}.{bad}", f"{good} + {bad} must not exceed 1")
    seed = 1
    if "seed" in t:
        seed = int_field(errors, f"{path}.seed", t["seed"], 0, 2**63 - 1)
    if backend in (Backend.NFT, Backend.AUTO):
        # auto may fall back to nft, whose resolution is 1e-6: refuse what it cannot express.
        for key, p in (("corrupt", corrupt), ("loss", loss)):
            if p > 0 and round(p / NFT_RESOLUTION) == 0:
                errors.add(
                    f"{path}.{key}",
                    f"{p:g} is below the nft backend's resolution of {NFT_RESOLUTION:g} "
                    f"(use backend = \"netem\" on a kernel that has it, or the switch's own loss model)",
                )
    shaping = _parse_shaping(errors, path, t, backend)
    if len(errors.items) != before:
        return None
    assert seed is not None
    return Impairment(corrupt, loss, direction, backend, **gilbert, seed=seed, **shaping)


def _parse_shaping(errors: Errors, path: str, t: dict[str, Any], backend: Backend) -> dict[str, Any]:
    """``delay``, ``jitter``, ``duplicate``, ``reorder`` of an impairment table (as netem's)."""
    out: dict[str, Any] = {"delay_ns": 0, "jitter_ns": 0, "duplicate": 0.0, "reorder": 0.0}
    for key, field_name, parse in (("delay", "delay_ns", parse_delay), ("jitter", "jitter_ns", parse_delay),
                                   ("duplicate", "duplicate", parse_probability),
                                   ("reorder", "reorder", parse_probability)):
        if key in t:
            v = parsed(errors, f"{path}.{key}", t[key], parse)
            if v is not None:
                out[field_name] = v
    if out["reorder"] and not out["delay_ns"]:
        errors.add(f"{path}.reorder", "needs a delay to reorder against (as netem: the reordered frames go at "
                                      "once, the others wait the delay)")
    if backend is Backend.NFT and any(out.values()):
        shaped = next(k for k, f in (("delay", "delay_ns"), ("jitter", "jitter_ns"), ("duplicate", "duplicate"),
                                     ("reorder", "reorder")) if out[f])
        errors.add(f"{path}.{shaped}", "nft cannot delay, jitter, duplicate or reorder frames: use backend "
                                       "\"netem\", \"switch\" or \"auto\" (netem where the kernel has it, else "
                                       "the sending switch's own model)")
    return out
