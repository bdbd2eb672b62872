"""``netstack reproduce tcsack`` (netstack/tcsack/reproduce.py): the draft's claims file, the
figures on missing and odd result documents, and on a real (small) run of the bench's sim section."""

from __future__ import annotations

import argparse
import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netstack.bench import tcsack as bench
from netstack.reproduce import paperdata
from netstack.reproduce.claims import NOT_ATTEMPTED, NOT_REPRODUCED, REPRODUCED, VERDICTS
from netstack.tcsack import reproduce
from netstack.tcsack.reproduce import LIVE, SIM, figures

SOURCE = Path(reproduce.__file__).read_text()
MEASURED = ("sim", "live")  # the runtimes of the rows a bench document decides


def _rows(results) -> list[dict]:
    return [r for f in figures(results) for r in f.to_dict()["claims"]]


# ------------------------------------------------------------------------------- the claims file
def test_the_claims_file_loads_and_every_id_the_module_names_is_in_it():
    pc = paperdata.load("tcsack")
    used = set(re.findall(r'pc\["([a-z0-9-]+)"\]', SOURCE)) | set(re.findall(r'Comparison\("([a-z0-9-]+)"', SOURCE)) \
        | set(re.findall(r'(?:absent|stated)\("([a-z0-9-]+)"', SOURCE)) | set(reproduce._CIDS.values())
    assert len(used) >= 10 and used <= set(pc.claims)
    # and every claim of the draft has a row
    texts = {r["claim"].split(" [")[0] for r in _rows({})}
    assert {c.text for c in pc.claims.values()} <= texts


def test_the_experiments_are_the_two_sections_each_with_its_own_key():
    sim, live = reproduce.PAPER.experiments
    assert (sim.id, live.id) == (SIM, LIVE) and sim.bench == live.bench == "tcsack"
    assert "sim" in sim.quick and not sim.needs_root and sim.workers
    assert "live" in live.quick and live.needs_root
    assert sim.quick_minutes + live.quick_minutes <= 2.0


# ---------------------------------------------------------------------- missing and odd documents
def test_no_results_give_not_attempted_rows_that_say_why():
    rows = _rows({})
    measured = [r for r in rows if r["runtime"] in MEASURED]
    assert measured and all(r["verdict"] == NOT_ATTEMPTED for r in measured)
    assert all("wrote no result" in r["note"] for r in measured)
    assert any("needs root" in r["note"] for r in measured if r["runtime"] == "live")
    json.dumps([f.to_dict() for f in figures({})])  # the report writes them as JSON


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=20)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(sim=JSON, live=JSON)
def test_arbitrary_documents_never_raise_and_measure_nothing(sim, live):
    rows = _rows({SIM: sim, LIVE: live})
    assert all(r["verdict"] in VERDICTS for r in rows)
    assert all(r["verdict"] == NOT_ATTEMPTED for r in rows if r["runtime"] in MEASURED)


# ------------------------------------------------------------------------- a real sim document
@pytest.fixture(scope="module")
def sim_doc(tmp_path_factory) -> dict:
    """``netstack bench tcsack --mode sim --workers 1`` in this process, its transfers smaller (400 KB,
    three loss rates) so that it takes about a second; every other setting is the bench's."""
    out = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "SIM_BYTES", 400_000)
        mp.setattr(bench, "SIM_LOSSES", (0.0, 1e-2, 5e-2))
        assert bench.main(argparse.Namespace(runtime="sim", workers=1, results_dir=str(out), only=None,
                                             rounds=None)) == 0
    return json.loads((out / "bench-tcsack-latest.json").read_text())


def test_a_sim_run_gives_every_sim_claim_a_number_and_a_verdict(sim_doc):
    figs = figures({SIM: sim_doc, LIVE: None})
    rows = [r for f in figs for r in f.to_dict()["claims"]]
    sim = [r for r in rows if r["runtime"] == "sim"]
    # the §2 mechanism (5 claims) and, per RTT (4 and 40 ms), go-back-N (3) and the TCP model (1)
    assert len(sim) == 5 + 2 * 4
    assert all(r["verdict"] != NOT_ATTEMPTED and (r["ours"] is not None or r["check"] is not None) for r in sim), \
        [r for r in sim if r["verdict"] == NOT_ATTEMPTED]
    assert all(r["validity"]["valid"] is True for r in sim if r["claim"].startswith("the sender keeps"))
    live = [r for r in rows if r["runtime"] == "live"]
    assert live and all(r["verdict"] == NOT_ATTEMPTED and "needs root" in r["note"] for r in live)
    gbn = next(f for f in figs if f.id == "throughput-gbn")
    assert gbn.shape is not None and gbn.shape.holds is not None and "RTT 40" in gbn.shape.measured
    assert gbn.images == (f"{SIM}/{reproduce.PLOT}",)


def test_our_numbers_are_the_bench_rows(sim_doc):
    """The module reads the same transfers the bench's table shows: goodput, T/C-SACK over
    go-back-N, each over its own lossless, the wire rate over the preset."""
    pts = {(p.t_ms, p.loss, p.proto): p for p in reproduce.points(sim_doc)}
    rows = sim_doc["rows"]
    assert len(pts) == len(rows) == 2 * 3 * 3
    for row in rows:
        p = pts[(row["t_ms"], row["loss"], row["proto"])]
        assert p.rtt_ms == row["rtt_ms"] and p.goodput() == pytest.approx(row["goodput_mbps"])
        if row.get("vs_gbn") is not None:
            gbn = pts[(row["t_ms"], row["loss"], "gbn")]
            assert reproduce._goodput_ratio(p, gbn)[0] == pytest.approx(row["vs_gbn"])
        if row["loss"] > 0:
            base = pts[(row["t_ms"], 0.0, row["proto"])]
            assert reproduce._of_lossless(p, base) == pytest.approx(row["of_lossless"])
    rate = next(r for r in _rows({SIM: sim_doc}) if r["claim"].startswith("the sender keeps") and r["runtime"] == "sim")
    wire = [r["wire_of_preset"] for r in rows if r["proto"] == "tcsack"]
    assert rate["ours"] == pytest.approx(max(wire, key=lambda w: abs(w - 1)))


def test_a_statement_the_numbers_contradict_is_not_reproduced(sim_doc):
    """Go-back-N made to move more than T/C-SACK on one lossy path: the throughput claim fails there."""
    doc = copy.deepcopy(sim_doc)
    for r in doc["runs"]:
        if r["params"]["proto"] == "gbn" and r["loss"] == 1e-2 and r["params"]["t_ms"] == 2.0:
            r["result"]["goodput_bps"] = 1e9
    rows = [r for r in _rows({SIM: doc}) if r["runtime"] == "sim" and "over RDMA's go-back-N" in r["claim"]]
    by_rtt = {("RTT 4 ms" in r["claim"]): r for r in rows}
    assert by_rtt[True]["check"] is False and by_rtt[True]["verdict"] == NOT_REPRODUCED
    assert by_rtt[False]["verdict"] == REPRODUCED


def test_invalid_transfers_count_only_when_nothing_valid_is_left(sim_doc):
    doc = copy.deepcopy(sim_doc)
    starved = {"name": "scheduling delay", "expected": "p99 <= 5 ms", "measured": 40.0, "ok": False}
    for r in doc["runs"]:
        r["valid"], r["checks"] = False, [*r["checks"], starved]
    rows = [r for r in _rows({SIM: doc}) if r["runtime"] == "sim" and r["claim"].startswith("the sender keeps")]
    assert rows[0]["verdict"] == NOT_REPRODUCED and "scheduling delay" in rows[0]["why"]
    # one path with a valid transfer left: the starved ones are left out and named
    for r in doc["runs"]:
        if r["params"]["proto"] == "tcsack" and r["loss"] == 0.0:
            r["valid"] = True
    rows = [r for r in _rows({SIM: doc}) if r["runtime"] == "sim" and r["claim"].startswith("the sender keeps")]
    assert rows[0]["validity"]["valid"] is True and "left out (no valid transfer)" in rows[0]["note"]


PATHS = st.lists(st.tuples(st.integers(0, 400), st.sampled_from(["params", "result", "checks", "valid", "loss",
                                                                   "impair", "runtime", "sender", "receiver"])),
                 min_size=1, max_size=6)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(cuts=PATHS, junk=JSON)
def test_a_mangled_real_document_never_raises(sim_doc, cuts, junk):
    doc = copy.deepcopy(sim_doc)
    for i, key in cuts:
        run = doc["runs"][i % len(doc["runs"])]
        target = run["result"] if key in ("sender", "receiver") else run
        target[key] = junk
    doc["rows"] = junk if cuts[0][0] % 2 else doc["rows"]
    rows = _rows({SIM: doc, LIVE: junk})
    assert all(r["verdict"] in VERDICTS for r in rows)
    json.dumps(rows, allow_nan=True)


def test_the_in_process_cases_decide_their_rows():
    """§1's example and §2 item 6 on the engines, independent of any bench document."""
    rows = {r["claim"]: r for r in _rows({}) if r["runtime"] == "in process"}
    one = next(r for c, r in rows.items() if "through one retransmission" in c)
    assert one["ours"] == 1 and one["verdict"] == REPRODUCED and "3 copies resent" in one["note"]
    probes = [r for c, r in rows.items() if c.startswith("with no ACK for 2T")]
    assert len(probes) == len(bench.SIM_RTTS_MS) and all(1.9 <= r["ours"] <= 2.2 for r in probes)
    assert all(r["check"] for c, r in rows.items() if c.startswith("the resend after 2T is the last packet"))
