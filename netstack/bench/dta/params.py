"""The numbers of ``netstack bench dta``: the live topology's links, the sampling of the
counters, the cases, the rate search's thresholds, and the Fig. 7 / Fig. 9 experiments'
parameters."""

from __future__ import annotations

DEFAULT_DURATION_S = 2.0
LINK_RATE = "1Gbit"
LINK_BUFFER = "4MB"
WARMUP_S = 0.5
SAMPLE_S = 0.25
DRAIN_S = 0.6
DISTINCT_REPORTS = 4096
KEYWRITE_N = (1, 2, 4)
APPEND_B = (1, 2, 4, 8, 16)
INCREMENT_N = 2
NAIVE_KINDS = ("keywrite", "append", "increment")
#: Fig. 7 / Fig. 9 parameters (sans-IO, exact experiments on the data structure).
FIG7_SLOTS = 1 << 12
FIG7_LOAD_FACTORS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
FIG7_REDUNDANCY = (1, 2, 3, 4)
#: Fig. 7 rows also measured with the public, pure-CRC32 slot hash.
PUBLIC_HASH_N = (2, 4)
FIG9_SLOTS = 1 << 14
FIG9_WIDTHS = (8, 10, 12, 14, 16, 20, 24, 32)
FIG9_REDUNDANCY = 2
SEEDS = 3
#: A paced run "keeps up" when it loses less than this; at most SEARCH_STEPS paced runs per case.
LOSS_FREE = 0.01
#: ... and ingests at least this fraction of the offered rate during the run.
KEEP_UP = 0.95
#: A paced run whose reporter delivered less than this fraction of the asked rate is reporter-bound.
REPORTER_SHORT = 0.9
SEARCH_STEPS = 6
SO_RXQ_OVFL = 40
SUBNET = "10.0.0"
#: Comma-separated output windows of the translator (``dta_enable``'s ``window``; 0 = none) to run
#: every DTA case with, in that order, e.g. "0,256,0,256" for an interleaved before/after; unset:
#: one run per case with the default window.
WINDOWS_ENV = "NETSTACK_BENCH_DTA_WINDOWS"
