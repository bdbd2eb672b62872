"""``netstack fuzz TARGET --attack NAME``: targeted campaigns, one per class of attack a probe found
(issue 34), each with an oracle that failed on the code before the fix.

Random frames find crashes and accounting holes; they rarely find a protocol-level attack, which
needs many frames of one precise shape at the right time. An attack campaign sends exactly that
shape, alongside genuine traffic, and checks what the genuine traffic got:

- ``tcd --attack short-pauses``: while a DCQCN flow crosses sw3's marked port toward r0, r0 sends
  that port a 1-quantum PFC pause every T_on^max/2. Every such pause must be counted as too short
  (``short_pauses``) and none may start an OFF period (finding 4; ``TcdParams.min_off_ns``).

:data:`ATTACKS` lists them per target (``netstack fuzz --help`` shows it).
"""

from __future__ import annotations

#: target -> attack name -> what it sends and what it checks
ATTACKS: dict[str, dict[str, str]] = {
    "tcd": {"short-pauses": "r0 pauses sw3's marked port for 1 quantum every T_on^max/2 during a DCQCN flow: every "
                            "pause counted short, none an OFF period (issue 34, finding 4)"},
}


def check_attack(target: str, attack: str | None) -> None:
    """FuzzError unless ``attack`` (None: the random campaign) is one of ``target``'s."""
    from .errors import FuzzError

    if attack is None:
        return
    offered = ATTACKS.get(target, {})
    if attack not in offered:
        raise FuzzError(f"target {target} has no attack {attack!r}"
                        + (f" (its attacks: {', '.join(offered)})" if offered else " (it has none)")
                        + f"; attacks: {describe()}")


def describe() -> str:
    """``target: name, ...`` for every target with attacks (the CLI's help)."""
    return "; ".join(f"{t} --attack {', '.join(a)}" for t, a in ATTACKS.items())


__all__ = ["ATTACKS", "check_attack", "describe"]
