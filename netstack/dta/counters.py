"""The DTA translator's counters: one dataclass that the report side (:mod:`.translator`) and
the RoCEv2 requester (:mod:`.requester`) both count into, so that ``dta_status`` and
``netstack dta status`` show one flat set, in one order, whichever part counted."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TranslatorCounters:
    # reports in (netstack.dta.translator)
    reports: int = 0
    malformed: int = 0
    not_for_collector: int = 0
    keywrite: int = 0
    keyincrement: int = 0
    append: int = 0
    sketch: int = 0
    unsupported: int = 0
    no_store: int = 0
    unknown_list: int = 0
    unknown_sketch: int = 0
    bad_data_size: int = 0
    redundancy_capped: int = 0
    seq_nacks: int = 0
    grace_dropped: int = 0
    grace_periods: int = 0
    sketch_nacks: int = 0
    sketch_nacks_held: int = 0
    sketch_duplicates: int = 0
    sketch_bad_shape: int = 0
    sketch_unknown_reporter: int = 0
    sketch_columns_completed: int = 0
    sketch_columns_abandoned: int = 0
    # RoCEv2 requests out (netstack.dta.requester) and what made them
    roce_frames: int = 0
    writes: int = 0
    fetch_adds: int = 0
    append_batches: int = 0
    append_flushes: int = 0
    sketch_writes: int = 0
    # Postcarding (issue 33): postcards taken, refused hop numbers, WRITEs (a whole path, a flush
    # after postcard_flush_ns, an eviction), a hop reported twice before a WRITE, lines taken by
    # another flow, and evicted postcards lost because the window had no room
    postcards: int = 0
    postcard_bad_hop: int = 0
    postcard_writes: int = 0
    postcard_complete: int = 0
    postcard_flushes: int = 0
    postcard_replaced: int = 0
    postcard_evictions: int = 0
    postcard_evicted_unwritten: int = 0
    # responses from the collector (netstack.dta.requester)
    responses: int = 0
    response_malformed: int = 0
    response_icrc_errors: int = 0
    responses_rejected_source: int = 0
    responses_rejected_dest: int = 0
    response_unexpected: int = 0
    response_unknown_qp: int = 0
    naks_rejected_window: int = 0
    acks_rejected_window: int = 0
    acks: int = 0
    rnr_naks: int = 0
    resyncs: int = 0
    naks_access: int = 0
    naks_invalid: int = 0
    naks_other: int = 0
    internal_errors: int = 0
    # the output window (netstack.dta.requester; window_dropped and window_held are the translator's)
    window_dropped: int = 0
    share_dropped: int = 0  # reports over their reporter's share of the window (netstack/dta/fairshare.py)
    window_timeouts: int = 0
    window_rewound: int = 0
    window_held: int = 0


__all__ = ["TranslatorCounters"]
