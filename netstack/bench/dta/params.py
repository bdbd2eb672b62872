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
#: Data longevity (Fig. 8, sans-IO): store sizes (slots) at N = 2, the other N at the middle size;
#: INT 5-hop path tracing's 5 x 32-bit values per slot, as the paper; keys written = AGES x slots;
#: SAMPLE of them queried, in BINS age bins.
LONGEVITY_SLOTS = (1 << 12, 1 << 14, 1 << 16)
LONGEVITY_REDUNDANCY = (1, 2, 4)
LONGEVITY_DATA_WORDS = 5
LONGEVITY_AGES = 2.0
LONGEVITY_BINS = 8
LONGEVITY_SAMPLE = 6000
#: reports/s at which the longevity tables give ages in seconds when the run has no live Key-Write N=2 rate
LONGEVITY_RATE = 50_000.0
#: Query rate: a Key-Write store of QUERY_SLOTS slots (N = 2, load factor 1, file-backed as the
#: collector's), queried by each number of processes in QUERY_PROCESSES for QUERY_S seconds.
QUERY_SLOTS = 1 << 16
QUERY_PROCESSES = (1, 2, 4)
QUERY_S = 1.0
#: a query process that ran less than this share of the time it had a CPU to itself was starved
QUERY_CPU_SHARE = 0.8
