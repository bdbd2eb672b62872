"""DTA, after the paper "Direct Telemetry Access" (docs/dta.md describes what is built here), as
sans-IO engines that keep the :mod:`netstack.engine` contract.

- :mod:`.reporter` — build reports (Key-Write, Append, Key-Increment, Sketch-Merge) and
  stream sketches column by column with NACK-driven retransmission.
- :mod:`.translator` — the collector's ToR: reports -> RoCEv2 WRITE / FETCH_ADD, Append
  batching, Sketch-Merge aggregation, NACKs, the grace period after a resynchronisation;
  :class:`TranslatorFeature` plugs it into the software switch.
- :mod:`.requester` — the translator's RoCEv2 requester: QPs, PSNs, the output window and its
  time-out, the requests' wire format, which collector responses are believed (§5.3).
- :mod:`.collector` — the collector's RDMA NIC in software: a RoCEv2 RC responder
  executing requests on registered memory, with proper ACK/NAKs, each QP bound to its peer.
- :mod:`.memory` — registered regions as shared-memory files plus a JSON manifest.
- :mod:`.query` — the collector CPU's side: Key-Write lookups, Append reads, count-min
  counters, sketch point queries.
- :mod:`.keywrite` — slot / checksum / sketch-index math shared by writer and readers.
- :mod:`.reportauth` — authenticated reports (with a key file): one replay-windowed opener per
  reporter at the translator, refusals counted per reason.

Around them: :mod:`.control` (the switch daemon's commands, the orchestration the CLI calls),
:mod:`.topology` (a translator declared in a topology file), :mod:`.layout` and :mod:`.persist`
(the collector daemon's memory layout and saved state), :mod:`.simhosts` and :mod:`.scenarios`
(virtual time, ``netstack sim --scenario dta-keywrite``).

Typical wiring (one process, e.g. a test)::

    mem = CollectorMemory("c1", directory=None)
    mem.add_keywrite(slots=1 << 16)
    mem.add_append_list(1, entries=4096, batch=4)
    nic = RoceResponder(mem, mac=..., ip=...)
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), mac=..., ip=...), now_ns=now)
    nic.bind(tr.config.mac, tr.config.ip)  # connect the QPs to their peer: nobody else is served
    for f in tr.on_report(report_frame, now):
        for resp in nic.receive(f, now):
            tr.on_roce_response(resp, now)
    nacks = [a.data for a in tr.actions.take_all()]  # Transmit actions, back to the reporter
    CollectorQuery(mem).keywrite_get(key)
"""

from __future__ import annotations

from .collector import BufferedResponder, QueuePair, RoceResponder, is_roce_frame
from .feature import HopReporterFeature, TranslatorFeature
from .keywrite import KeyWriteLayout, expected_success, key_checksum, sketch_index, slot_index
from .memory import CollectorMemory, MemoryAccessError, MemoryRegion, default_directory, open_region
from .query import CollectorQuery, QueryError, open_collector
from .reportauth import ReportAuth
from .reporter import CountMinSketch, Reporter, SketchReporter
from .translator import DTATranslator, TranslatorConfig

__all__ = [
    "BufferedResponder",
    "CollectorMemory",
    "CollectorQuery",
    "CountMinSketch",
    "DTATranslator",
    "HopReporterFeature",
    "KeyWriteLayout",
    "MemoryAccessError",
    "MemoryRegion",
    "QueryError",
    "QueuePair",
    "ReportAuth",
    "Reporter",
    "RoceResponder",
    "SketchReporter",
    "TranslatorConfig",
    "TranslatorFeature",
    "default_directory",
    "expected_success",
    "is_roce_frame",
    "key_checksum",
    "open_collector",
    "open_region",
    "sketch_index",
    "slot_index",
]
