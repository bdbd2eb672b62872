"""The setting every TCD topology shares, from "Congestion Detection in Lossless Networks" §3.1:
the link rate and delay, the PFC thresholds, the CEE switches' ECN threshold, and the
``[defaults]`` and lossless-port tables the topology generators write (``netstack.tcd.scenarios``
for §3.1's chain, ``netstack.tcd.fabric`` for the leaf-spine fabric).

A topology at rate C runs the paper's time x 40 Gbit/s / C (docs/architecture.md "Time and
scale"); bytes (PFC thresholds, ECN's K, bursts) are unchanged.
"""

from __future__ import annotations

from typing import Any

#: the paper's link rate; a topology's time scale is this over its switch links' rate
PAPER_RATE_BPS = 40_000_000_000
PAPER_DELAY_NS = 4_000
#: TCD §3.1: "For CEE, the PFC threshold is 320KB"; XON is not given: 10 % below (our choice,
#: the ratio of the ns-3 port's 200/180 packets)
XOFF_BYTES = 320_000
XON_BYTES = 288_000
#: TCD §3.1: CEE switches mark "if the current egress queue length exceeds ... K_max (200KB)"
ECN_K_BYTES = 200_000


def unit(value: int, units: tuple[tuple[int, str], ...]) -> str:
    """``value`` in the largest of ``units`` ((factor, suffix), largest first) that divides it."""
    for factor, name in units:
        if value % factor == 0:
            return f"{value // factor}{name}"
    return f"{value}{units[-1][1]}"


def scaled_delay_ns(rate_bps: int) -> int:
    """The paper's 4 us at a topology of ``rate_bps``: times stretch as rates shrink."""
    return int(PAPER_DELAY_NS * PAPER_RATE_BPS / rate_bps)


def defaults_table(rate_bps: int, delay_ns: int, buffer: str) -> dict[str, Any]:
    """A topology's ``[defaults]``: every link ``rate_bps`` with ``delay_ns``, MTU 1500, ``buffer``."""
    return {"rate": unit(rate_bps, ((10**9, "Gbit"), (10**6, "Mbit"), (1, "bit"))),
            "delay": unit(delay_ns, ((10**6, "ms"), (10**3, "us"), (1, "ns"))), "mtu": 1500, "buffer": buffer}


def lossless_port() -> dict[str, Any]:
    """A switch end's ``switch`` table: lossless with the paper's XOFF and our XON."""
    return {"lossless": True, "xoff": f"{XOFF_BYTES}B", "xon": f"{XON_BYTES}B"}


__all__ = ["ECN_K_BYTES", "PAPER_DELAY_NS", "PAPER_RATE_BPS", "XOFF_BYTES", "XON_BYTES", "defaults_table",
           "lossless_port", "scaled_delay_ns", "unit"]
