"""``netstack fuzz TARGET --attack NAME``: targeted campaigns, one per class of attack a probe found
(issue 34), each with an oracle that failed on the code before the fix.

Random frames find crashes and accounting holes; they rarely find a protocol-level attack, which
needs many frames of one precise shape at the right time. An attack campaign sends exactly that
shape, alongside genuine traffic, and checks what the genuine traffic got:

- ``tcd --attack short-pauses``: while a DCQCN flow crosses sw3's marked port toward r0, r0 sends
  that port a 1-quantum PFC pause every T_on^max/2. Every such pause must be counted as too short
  (``short_pauses``) and none may start an OFF period (finding 4; ``TcdParams.min_off_ns``).
- ``linkguardian --attack hidden-tags``: on a keyed topology, with 2 % corruption on sw1-sw2 and a
  stream crossing it, an on-link party at sw2's end answers each data frame sw1 sends with a
  leading ACK or a loss notification hidden behind a data tag, outside the seal. Every one must be
  refused and counted (``unsealed_control``), no hole may find its Tx-buffer copy gone and the
  stream may lose no more than the holes the receiver gave up (finding 1).
- ``dta --attack flood``: h2, a legitimate reporter, floods sw2's translator with Key-Writes faster
  than the collector drains them while h1 sends genuine ones. Every genuine Key-Write must be
  executed and read back, and the flood's excess counted against h2 (``share_dropped``, finding 5).
- ``onepipe --attack cross-port-replay``: on the keyed onepipe topology, while 1Pipe processes
  scatter, every sealed frame h1's processes send into tor1 is replayed into tor1's port toward h2
  (no BCP 38 there), h2's into h1's port. Every replay must be refused and counted (``replayed``,
  ``edge_drops_spoofed``) and the processes' delivery complete and totally ordered (finding 2).
- ``onepipe --attack forged-controller``: on the same topology, while reliable 1Pipe processes
  scatter, a member on h2 sends every process on another host FAILURE_NOTICEs from the
  controller's address naming a live process, sealed with the controller key (era 2^32-2, then
  1) or signed with a key of its own. Every one must be refused, no genuine controller message
  refused as stale_era, no process told of a failure, delivery complete (finding 3).

:data:`ATTACKS` lists them per target (``netstack fuzz --help`` shows it).
"""

from __future__ import annotations

#: target -> attack name -> what it sends and what it checks
ATTACKS: dict[str, dict[str, str]] = {
    "dta": {"flood": "h2 floods sw2's translator with Key-Writes faster than the collector drains them while h1 "
                     "sends genuine ones: every genuine Key-Write executed and read back, the excess counted against "
                     "h2 (share_dropped; issue 34, finding 5)"},
    "linkguardian": {"hidden-tags": "on a keyed topology, leading ACKs and loss notifications behind a data tag "
                                    "from sw2's end of sw1-sw2 (2 % corruption, a stream across): every one refused "
                                    "(unsealed_control), no Tx-buffer copy missing, no loss beyond the holes given "
                                    "up (issue 34, finding 1)"},
    "onepipe": {"cross-port-replay": "the sealed frames of h1's processes replayed into tor1's port toward h2 (no "
                                     "BCP 38), h2's into h1's, during a 1Pipe run: every replay refused and counted, "
                                     "delivery complete and in total order (issue 34, finding 2)",
                "forged-controller": "a member on h2 sends the other hosts' reliable processes FAILURE_NOTICEs from "
                                     "the controller's address, sealed with the controller key or signed with its own "
                                     "key: every one refused, no era moved, no failure heard, delivery complete "
                                     "(issue 34, finding 3)"},
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
