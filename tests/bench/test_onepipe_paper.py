"""The 1Pipe paper's figure data beside ``netstack bench onepipe``'s rows (netstack/onepipe/paperdata.py,
netstack/bench/onepipe/paper.py): the authors' files load, every figure yields a row per paper point,
a point we did not measure says why, ratios and scale factors are right on hand-made rows, and the
overlay PNG is written when matplotlib is there. No simulation runs here."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.bench.onepipe import paper
from netstack.onepipe import paperdata
from netstack.onepipe.paperdata import PaperDataError


def test_every_figure_file_is_kept_loads_and_is_named_in_source_md() -> None:
    files = {f.file for f in paper.FIGURES}
    kept = {p.name for p in paperdata.DATA_DIR.iterdir() if p.name != "SOURCE.md"}
    assert kept == files
    source = (paperdata.DATA_DIR / "SOURCE.md").read_text()
    assert paperdata.SOURCE_COMMIT in source and paperdata.SOURCE_REPO in source
    for fig in paper.FIGURES:
        table = paperdata.load(fig.file)
        assert f"`{fig.file}`" in source and f"Fig. {fig.id}" in source
        assert table.series and all(len(s.ys) == len(table.xs) for s in table.series.values())
        assert set(fig.series) <= set(table.series)


def test_the_authors_quirks_parse() -> None:
    """Quoted names with spaces, a space-separated header over tab-separated rows, non-breaking
    spaces and trailing blanks in fields, min/max error-bar columns after each series."""
    t = paperdata.parse('"Loss p"   "BE-chip" min max x  min max\n1e-8\t7.37\u00a0\t1 \t9\t2\t1 3\t\n\n'
                        '# c\n1:1\t8 2 9 3 1 7\n')
    assert t.x_name == "Loss p" and t.xs == ("1e-8", "1:1")
    assert list(t.series) == ["BE-chip", "BE-chip min", "BE-chip max", "x", "x min", "x max"]
    assert t["BE-chip"].ys == (7.37, 8.0) and t["x max"].at("1:1") == 7.0 and t["x"].at("2") is None
    assert paperdata.x_value("1e-8") == 1e-8 and paperdata.x_value("1:1") is None
    fr = paperdata.load("failure_recovery")
    assert fr["Core Switch"].at("2") == 0 and fr["ToR Switch min"].at("32") == pytest.approx(406.844118)
    with pytest.raises(PaperDataError, match="no column"):
        fr["Switch"]


@pytest.mark.parametrize(("text", "why"), [
    ("", "no header"), ("a b\n", "no data rows"), ("only\n1\n", "at least one series"),
    ("x y\n1 2 3\n", "3 fields"), ("x y\n1\n", "1 fields"), ("x y\n1 two\n", "not a number"),
    ("x y\n1 nan\n", "not a finite number"), ("x y\n1 2\n1 3\n", "appears twice"), ('x "y\n1 2\n', "quote"),
    ('x ""\n1 2\n', "empty column name"), ("x y y\n1 2 3\n", "more than once"),
])
def test_a_malformed_file_is_a_paper_data_error_naming_the_line(text: str, why: str) -> None:
    with pytest.raises(PaperDataError, match=why):
        paperdata.parse(text, "f")


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab1.e-+ "\t\n\u00a0#:0x')), max_size=80))
def test_arbitrary_text_is_a_table_or_the_projects_error(text: str) -> None:
    try:
        t = paperdata.parse(text)
    except PaperDataError:
        return
    assert t.series and all(math.isfinite(y) for s in t.series.values() for y in s.ys)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=6,
                unique_by=lambda r: r[0]))
def test_a_written_table_reads_back(rows: list[list[float]]) -> None:
    text = '"X axis"\ta\t"b c"\n' + "".join("\t".join(repr(v) for v in r) + "\n" for r in rows)
    t = paperdata.parse(text)
    assert [float(x) for x in t.xs] == [r[0] for r in rows]
    assert list(t["b c"].ys) == [r[2] for r in rows]


def test_every_figure_yields_a_row_per_point_and_says_why_ours_is_missing() -> None:
    sec = paper.compare({})
    for fig in paper.FIGURES:
        table = paperdata.load(fig.file)
        rows = [r for r in sec["rows"] if r["figure"] == fig.id]
        points = sum(len(table[s].xs) for s in fig.series or table.series) + len(fig.derived) * len(table.xs)
        aliases = {name for name, _ in fig.aliases}  # the paper's points again, ours from other runs
        assert len([r for r in rows if r["series"] not in aliases]) == points == sec["summary"][fig.id]["points"]
        assert len(rows) - points == sum(len(table[column].xs) for _, column in fig.aliases)
        for r in rows:
            assert r["ours"] is None or fig.id == "13b"  # 13b is computed from our beacon's size, not run
            assert r["ours"] is not None or r["note"].startswith(("not measured", "not built"))
    fig8 = [r for r in sec["rows"] if r["figure"] == "8a"]
    assert fig8[0]["note"] == "not measured in this run (section fig8 not selected)"


def _figs() -> dict:
    fig8 = [{"system": s, "procs": p, "offered_per_proc": 200_000.0, "delivered_per_proc": d, "mean_us": m}
            for p in (8, 512) for s, d, m in (("1pipe", 200_000.0, 3.0), ("sequencer", 20_000.0, 300.0),
                                                 ("unordered", 200_000.0, 1.0))]
    return {"fig8": {"sim": fig8, "live": []},
            "fig9b": {"sim": [{"procs": 128, "loss": 0.0, "mean_us": 4.0, "unordered_mean_us": 1.0}], "live": []},
            "reliable": {"sim": [{"system": "reliable", "procs": 8, "offered_per_proc": 200_000.0,
                                  "delivered_per_proc": 200_000.0, "mean_us": 4.5},
                                 {"system": "best effort", "procs": 8, "mean_us": 3.0}]}}


def _one(sec: dict, fig: str, series: str, x: str) -> dict:
    (row,) = [r for r in sec["rows"] if (r["figure"], r["series"], r["x"], r["runtime"]) == (fig, series, x, "sim")]
    return row


def test_the_testbed_rows_answer_fig9a_and_fig8bs_onepipe_series() -> None:
    """The fig9a-testbed section (the paper's fat tree, its hops, the host stack) takes over Fig.
    9a and Fig. 8b's 1Pipe series where it has the P; derived series come from one P's rows."""
    tb = [{"procs": 8, "hops": 1, "nic_ns": 834, "system": s, "mean_us": m, "unordered_mean_us": 2.2}
          for s, m in (("BE-chip", 4.0), ("R-chip", 7.0), ("BE-host", 6.0), ("R-host", 9.5),
                       ("R-chip, commit in beacons", 8.5))]
    sec = paper.compare({**_figs(), "fig9a-testbed": {"rows": tb}})
    assert _one(sec, "9a", "BE-chip", "8")["ours"] == 4.0 and _one(sec, "9a", "unorder", "8")["ours"] == 2.2
    assert _one(sec, "9a", "R-host - BE-host", "8")["ours"] == pytest.approx(3.5)
    beacons = _one(sec, "9a", "R-chip (commit in beacons) - BE-chip", "8")
    assert beacons["ours"] == pytest.approx(4.5) and beacons["paper"] == pytest.approx(9.64 - 4.5)
    assert "1 hops" in _one(sec, "9a", "R-chip", "8")["note"]
    assert _one(sec, "8b", "1Pipe/host", "8")["ours"] == 6.0 and _one(sec, "8b", "1Pipe/chip", "8")["ours"] == 4.0
    assert _one(sec, "8b", "1Pipe/chip", "512")["ours"] == 3.0  # no testbed row at 512: fig8's
    assert _one(sec, "9a", "BE-host", "16")["note"].startswith("not measured at procs 16")


def test_ratios_and_scale_factors_on_hand_made_rows() -> None:
    sec = paper.compare(_figs())
    be = _one(sec, "8a", "1Pipe/BE", "8")
    assert be["paper"] == pytest.approx(5.126396938) and be["ours"] == pytest.approx(0.2)
    assert be["ratio"] == pytest.approx(0.2 / 5.126396938)
    assert be["scale_factor"] == pytest.approx(0.2 / 5.126396938) and be["at_scale"] == pytest.approx(1.0)
    assert not be["differs_2x"]
    seq = _one(sec, "8a", "HostSeq", "512")  # saturated: the paper's 0.106 is below what we offer
    assert seq["scale_factor"] == 1.0 and seq["at_scale"] == pytest.approx(0.02 / 0.10599868) and seq["differs_2x"]
    lat = _one(sec, "8b", "1Pipe/chip", "512")
    assert lat["ratio"] == pytest.approx(3.0 / 7.37) and lat["differs_2x"]
    assert _one(sec, "8a", "1Pipe/R", "8")["source"].startswith("reliable")  # no 1pipe_reliable in fig8
    assert _one(sec, "9a", "R-chip - BE-chip", "8")["ours"] == pytest.approx(1.5)
    over = _one(sec, "9a", "BE-chip - unorder", "512")  # the idle fig9b run at 128 for the paper's 512
    assert over["ours"] == pytest.approx(3.0) and over["x_ours"] == "128"
    assert over["paper"] == pytest.approx(7.37 - 5.35)
    assert _one(sec, "9a", "BE-chip", "16")["note"].startswith("not measured at procs 16")
    lossless = _one(sec, "9b", "BE-chip", "1e-8")  # the paper's lossless point matched to our loss 0
    assert lossless["x_ours"] == "0" and lossless["ours"] == 4.0
    assert "not measured at loss 1e-5" in _one(sec, "9b", "BE-chip", "1e-5")["note"]
    assert "not measured at procs 4" in _one(sec, "8a", "1Pipe/BE", "4")["note"]
    assert _one(sec, "8b", "1Pipe/host", "8")["note"] == "not measured in this run (section fig9a-testbed not selected)"
    core = _one(sec, "10", "Core Switch", "2")
    assert core["paper"] == 0 and core["ratio"] is None
    beacon = _one(sec, "13b", "100 Gbps", "1")  # one 90-byte frame a microsecond on 100 Gbit/s
    assert paper.BEACON_WIRE_BYTES == 90 and beacon["ours"] == pytest.approx(0.72)


def test_markdown_has_a_table_per_figure() -> None:
    md = "\n".join(paper.paper_markdown(paper.compare(_figs())))
    for fig in paper.FIGURES:
        assert f"### {fig.title}" in md
    assert "| 1Pipe/BE |" in md.replace("  ", " ") or "1Pipe/BE" in md
    assert "**>2x**" in md


def test_the_overlay_png_is_written_with_matplotlib(tmp_path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(paper, "FIGURES", tuple(f for f in paper.FIGURES if f.number in ("8", "12")))
    written = paper.plot_paper(paper.compare(_figs()), tmp_path, "bench-onepipe")
    assert written == ["bench-onepipe-paper-fig8.png", "bench-onepipe-paper-fig12.png"]
    assert all((tmp_path / w).stat().st_size > 1000 for w in written)


def test_valid_live_rows_and_a_kv_section_answer_their_points(monkeypatch) -> None:
    monkeypatch.setattr(paper, "_built", lambda module: True)  # whether netstack.onepipe.kv is there yet
    figs = _figs()
    figs["fig8"]["live"] = [{"procs": 8, "mean_us": 6.6, "valid": True}, {"procs": 16, "mean_us": 9.0, "valid": False}]
    figs["kv"] = {"rows": [{"mode": "onepipe", "dist": "uniform", "procs": 8, "txn_per_s_per_client": 50_000.0},
                           {"mode": "2pc", "dist": "zipf", "procs": 8, "txn_per_s_per_client": 10_000.0},
                           {"mode": "onepipe", "dist": "zipf", "procs": 16, "writes": 0.001,
                            "latency_by_class_ns": {"RO": {"mean": 20_000.0}, "WO": {"mean": None}}}]}
    sec = paper.compare(figs)
    live = [r for r in sec["rows"] if r["figure"] == "8b" and r["runtime"] == "live"]
    assert [(r["x"], r["ours"]) for r in live] == [("8", 6.6)]  # the invalid run at 16 is not counted
    assert live[0]["scale"].startswith("live, 1000x")
    assert _one(sec, "14a", "1Pipe/Unif", "8")["ours"] == pytest.approx(0.05)
    assert "2PC in FaRM's place" in _one(sec, "14a", "FaRM/YCSB", "8")["note"]
    assert _one(sec, "14a", "NonTX/Unif", "8")["note"].startswith("not built")
    assert "not measured at procs 2" in _one(sec, "14a", "1Pipe/Unif", "2")["note"]
    ro = _one(sec, "14b", "1Pipe-RO", "0.1")  # mix=ycsb's write fraction 0.001 is the paper's 0.1 %
    assert ro["ours"] == pytest.approx(20.0) and "P=16" in ro["note"]
    assert _one(sec, "14b", "1Pipe-WO", "0.1")["note"] == "no WO transaction completed"
    assert _one(sec, "14b", "1Pipe-RO", "50")["note"] == "not measured at 50 % writes (this run: 0.1)"
    assert _one(sec, "14b", "FaRM-RO", "50")["note"].startswith("not measured in this run (no kv rows")
    assert paper.merge([_figs(), figs["kv"]["rows"]])["kv"] == figs["kv"]  # a kv sweep's JSON list


def test_saved_runs_merge_section_by_section(tmp_path, capsys) -> None:
    import json

    a, b = _figs(), {"fig9b": None, "fig10": {"rows": [{"procs": 8, "resume_us": 40.0}]}}
    assert paper.merge([a, b]) == {**a, "fig10": b["fig10"]}  # a section the later run lacks is kept
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert paper.main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    fig10 = capsys.readouterr().out.split("### Fig. 10")[1].split("###")[0]
    assert "| 40 " in fig10 or "|   40 " in fig10 or " 40 |" in fig10


def test_fig13a_is_our_timed_beacon_work_over_the_interval() -> None:
    m = paper.measure_beacon_cpu(ports=4, intervals=5, rounds=1)  # what the bench measures, tiny (never a timing)
    assert m["ports"] == 4 and m["ns_per_interval"] > 0 and m["paper_ns_per_interval"] == m["ns_per_interval"] * \
        m["factor"]
    sec = paper.compare({"beacon_cpu": {"ports": 32, "ns_per_interval": 2e5, "factor": 0.01,
                                        "paper_ns_per_interval": 2000.0}})
    xeon = _one(sec, "13a", "Xeon E5 Server (DPDK)", "10")  # 2 us of a core every 10 us
    assert xeon["ours"] == pytest.approx(0.2) and xeon["ratio"] == pytest.approx(0.4)
    assert _one(sec, "13a", "Arista switch (OS)", "10")["note"].startswith("not built")
    assert sec["beacon_cpu"]["factor"] == 0.01
    assert paper.merge([{"paper": sec}])["beacon_cpu"] == sec["beacon_cpu"]  # kept in a saved run
