"""The numbers of ``netstack bench linkguardian``: the paper's link and targets, the scale, the
live testbed's names, each figure's settings (and why they differ from the paper's), and how
much work each section does (:class:`Sizes`, from the command line)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from ..common import parse_frame_sizes

SECTIONS = ("fig8", "live-check", "fig9", "fig10")
LIVE_SECTIONS = ("live-check", "fig9", "fig10")

#: The paper's link (§4: the 100G settings of LGParams.paper(100)) and the default scale:
#: the default topology runs its links at 100 Mbit/s, i.e. 100G / 1000.
PAPER_RATE_BPS = 100_000_000_000
DEFAULT_SCALE = 1000.0
#: §4: LinkGuardian's target effective loss rate.
TARGET_LOSS = 1e-8
#: Paper-time (100G) one-way link delay of the virtual-time runs. §4 "Parameters": the
#: maximum t_flight_resume is 1.6 us at 100G; a resume crosses the link back and the
#: resumed data forward, so 0.8 us each way. Scaled like every time.
PAPER_ONE_WAY_DELAY_NS = 800
#: Sensitivity run: a longer delay (2 us paper time), with which the retransmission delay
#: (about 3 one-way delays + 3 frame times) reaches the paper's measured maximum (5.5-6 us)
#: and every loss fills the reordering buffer past pauseThreshold, as at 100G in the paper.
PAPER_LONG_DELAY_NS = 2_000
#: Effective-loss points (actual loss, explicit N = 1) and effective-link-speed points.
LOSS_RATES = (1e-2, 5e-2)
SPEED_RATES = (0.0, 1e-3, 1e-2, 5e-2)
SENSITIVITY_RATE = 1e-3
LOSS_COPIES = 1
#: Closed-loop offering (the sending switch's packet generator): frames kept queued at the protected egress.
BACKLOG = 8
DEFAULT_FRAME_SIZE = 1500
MIN_FRAME_SIZE = 64
MAX_FRAME_SIZE = 1500
#: Targets of the issue (§4.1, Fig. 8: paper 92.25 % / 98.74 % at 1e-3 on 100G).
TARGET_SPEED = {"blocking": 0.90, "nb": 0.97}
PAPER_SPEED = {"blocking": 0.9225, "nb": 0.9874}
#: Fig. 10: LG's 99.9th-percentile FCT within this factor of lossless.
TARGET_FCT_RATIO = 1.5

#: Live sections. The corrupting link of the default topology and its two ends.
LINK = "sw1-sw2"
SENDER = ("sw1", "p-sw2")
RECEIVER = ("sw2", "p-sw1")
H2_IP = "10.0.0.2"
#: Live cross-check: nominal corruption (nft), copies, sequenced UDP datagrams.
LIVE_CORRUPT = 1e-2
LIVE_COPIES = 1
LIVE_UDP_RATE = 5000
LIVE_UDP_SIZE = 400
#: the cross-check's topology file (LinkGuardian on sw1-sw2, 1e-2 nft corruption, N = 1) and seed
LIVE_TOPOLOGY = "lg-testbed"
LIVE_SEED = 7
#: Figs. 9 and 10: corruption rate (see FIG9_WHY / FIG10_WHY) and the timeline of Fig. 9.
FIG9_CORRUPT = 1e-2
FIG10_CORRUPT = 1e-2
FIG9_INTERVAL_S = 0.5
FIG9_CORRUPT_AT = 0.15
FIG9_LG_AT = 0.45
FIG10_SIZE = 143
#: Fig. 9 runs: (backpressure, recirculation port rate as a multiple of the link's). The
#: scaled setting everywhere is the paper's 100G one (recirculation as fast as the link);
#: the last run is the paper's Fig. 9 testbed ratio (25G links, 100G recirculation).
FIG9_RUNS = ((True, 1), (False, 1), (False, 4))
#: Kernel TCP congestion control set in the host namespaces for the live sections.
LIVE_TCP_CC = "reno"

FIG9_WHY = (
    "Corruption rate 1e-2 (paper: 1e-3 at 25G). At this scale a 0.5 s sample holds ~4,100 MTU frames, so "
    "1e-3 puts ~4 corruption losses in a sample and Reno's dip (measured here: 58-93 Mbit/s samples around a "
    "94 Mbit/s lossless rate) is lost in the sample noise; at 1e-2 there are ~40 losses per sample and "
    "throughput falls about 3x, unmistakably. The mechanism is the paper's: loss-based TCP halves its window "
    "for losses that are not congestion. The price is that at 1e-2 LinkGuardian's own cost is ten times the "
    "paper's too: with the reordering buffer cycling through a recirculation port as fast as the link (the "
    "100G setting used throughout) every loss pauses the sender for a while (Fig. 8 in virtual time: ~78 % "
    "effective link speed at 1e-2, ~96 % at 1e-3). The third run gives the port four times the link's rate, "
    "the ratio of the paper's Fig. 9 testbed (25G links, 100G recirculation)."
)
FIG9_CC_WHY = (
    "TCP congestion control is Reno in the host namespaces. This VM's default is BBR, which treats random "
    "loss as noise (measured: 85 Mbit/s at 10 % corruption), and a network namespace may only select "
    "'allowed' algorithms (here reno and bbr; CUBIC is refused with EPERM). Reno's reaction to a loss - "
    "halve the window - is also DCTCP's (the paper's Fig. 9) when no ECN marks arrive, as on this "
    "testbed's drop-tail switches."
)
FIG10_WHY = (
    "Corruption rate 1e-2 (paper: ~1e-3 with 300K trials). With 10,000 flows, 1e-3 corrupts ~10 requests, "
    "so the unprotected 99.9th percentile would be decided by whether the 10th-worst flow happened to lose "
    "its request; at 1e-2 ~100 flows lose it and the unprotected tail is resolved at p99 and p99.9. "
    "It is also the harder test for LG: 1 % of its flows wait for a link-local retransmission."
)
#: Fig. 10's phases: (name, corruption rate, LinkGuardian mode or None).
FIG10_PHASES = (("lossless", 0.0, None), ("corrupting, no LG", FIG10_CORRUPT, None),
                ("LG", FIG10_CORRUPT, "blocking"), ("LG_NB", FIG10_CORRUPT, "nb"))


def label(mode: str | None) -> str:
    """The paper's name of a LinkGuardian mode: off, LG (blocking), LG_NB (non-blocking)."""
    return {None: "off", "off": "off", "blocking": "LG", "nb": "LG_NB"}[mode]


# =========================================================================== sizes


@dataclass(frozen=True)
class Sizes:
    """How much work each section does (defaults meet the issue's sizes)."""

    loss_frames: int = 1_000_000     # per Fig. 8 effective-loss point (>= 1e6)
    speed_frames: int = 100_000      # per Fig. 8 effective-link-speed point
    udp_count: int = 60_000          # live cross-check datagrams
    fig9_seconds: float = 20.0       # length of each Fig. 9 run
    flows: int = 10_000              # Fig. 10 flows per phase (>= 10,000)


QUICK = Sizes(loss_frames=50_000, speed_frames=10_000, udp_count=5_000, fig9_seconds=8.0, flows=1_000)


def sizes_from_args(args: argparse.Namespace) -> Sizes:
    """Defaults, or ``quick`` ones, with any explicit override (``loss_frames``, ``speed_frames``,
    ``udp_count``, ``flows``; ``duration`` is Fig. 9's length)."""
    base = QUICK if getattr(args, "quick", False) else Sizes()
    changes: dict[str, Any] = {}
    for name in ("loss_frames", "speed_frames", "udp_count", "flows"):
        v = getattr(args, name, None)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
            changes[name] = v
    d = getattr(args, "duration", None)
    if d is not None:
        if not d >= 2:
            raise ValueError(f"--duration {d!r}: Fig. 9 needs at least 2 seconds")
        changes["fig9_seconds"] = float(d)
    return replace(base, **changes)


def parse_sizes(raw: Any) -> list[int]:
    """``--sizes``: frame sizes (bytes) of the Fig. 8 runs; the first is used for the loss points."""
    return parse_frame_sizes(raw, [DEFAULT_FRAME_SIZE], MIN_FRAME_SIZE, MAX_FRAME_SIZE, "1500")


# =========================================================================== wall time


def estimate_seconds(sizes: Sizes, sections: list[str], frame_sizes: list[int]) -> dict[str, float]:
    """Wall-clock estimate per section on this 2-core VM (measured per-frame costs)."""
    est: dict[str, float] = {}
    if "fig8" in sections:
        ep = sizes.loss_frames * len(LOSS_RATES) * 2 * 15e-6
        off = sizes.loss_frames * len(LOSS_RATES) * 32e-6
        speed_runs = len(SPEED_RATES) * 2 + 3  # LG and LG_NB per rate, + the sensitivity trio
        b2b = len(frame_sizes) * (sizes.speed_frames * speed_runs * 47e-6 + sizes.speed_frames * 3 * 30e-6)
        est["fig8"] = ep + off + b2b
    if "live-check" in sections:
        est["live-check"] = 5 + sizes.udp_count / LIVE_UDP_RATE
    if "fig9" in sections:
        est["fig9"] = len(FIG9_RUNS) * (sizes.fig9_seconds + 6)
    if "fig10" in sections:
        # ~5.5 ms per flow, ~1 % of the unprotected ones wait ~0.2 s for TCP's RTO
        est["fig10"] = 8 + 4 * sizes.flows * 5.5e-3 + sizes.flows * FIG10_CORRUPT * 0.22
    return est

