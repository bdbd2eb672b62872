"""Long-running commands show progress on stderr and end with one summary line (stderr), while
stdout keeps its exact format (tables, or pure JSON with --json). Cheap runs only: virtual time,
tiny benchmarks, and the live commands' summary builders on canned results."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from netstack import cli, progress
from netstack.bench import summary as bench_summary


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


# ----------------------------------------------------------------------------- the helper


def test_took_reads_well_at_every_scale():
    assert progress.took(0.4213) == "0.42 s"
    assert progress.took(12.34) == "12.3 s"
    assert progress.took(245) == "4 min 05 s"


def test_reporter_prefixes_progress_and_ends_with_the_summary(capsys):
    rep = progress.Reporter("thing")
    rep("step 1/2")
    print("| table |")
    rep.summary(f"2 steps in {rep.took()}")
    out, err = capsys.readouterr()
    assert out == "| table |\n"
    lines = _lines(err)
    assert len(lines) == 2 and lines[0] == "[thing] step 1/2"
    assert lines[1].startswith("netstack thing: 2 steps in ") and lines[1].endswith(" s")


def test_quiet_drops_progress_but_keeps_the_summary(capsys):
    rep = progress.Reporter("thing", quiet=True)
    rep("step")
    with rep.heartbeat("waiting", every_s=0.01):
        time.sleep(0.05)
    rep.summary("done")
    assert _lines(capsys.readouterr().err) == ["netstack thing: done"]


def test_heartbeat_beats_during_a_long_wait_and_stops_after(capsys):
    rep = progress.Reporter("thing")
    count = [0]
    with rep.heartbeat(lambda: f"{count[0]} done", expect_s=9, every_s=0.02):
        time.sleep(0.15)
        count[0] = 3
        time.sleep(0.1)
    beats = _lines(capsys.readouterr().err)
    assert len(beats) >= 3 and all(b.startswith("[thing] ") and "of ~9 s elapsed" in b for b in beats)
    assert beats[-1].startswith("[thing] 3 done: ")
    time.sleep(0.1)
    assert capsys.readouterr().err == ""  # the thread stopped with the block


def test_a_short_wait_prints_no_heartbeat(capsys):
    with progress.Reporter("thing").heartbeat("waiting"):
        pass
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- netstack sim


def _sim(tmp_path, *extra: str) -> int:
    return cli.main(["sim", "lg-testbed", "--scenario", "lg-stream", "--param", "count=300",
                     "--results-dir", str(tmp_path), *extra])


def test_sim_json_stays_pure_and_the_summary_ends_stderr(tmp_path, capsys):
    assert _sim(tmp_path, "--json") == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)  # nothing but the JSON on stdout
    assert doc["command"] == "netstack sim" and len(doc["runs"]) == 1
    lines = _lines(err)
    assert any("[1/1] seed 1" in ln for ln in lines)  # progress
    last = lines[-1]
    assert last.startswith("netstack sim: lg-stream on lg-testbed (sim), 1 run(s) in ")
    assert "1 ok, 0 failed" in last and "events/s" in last
    written = last.rsplit("JSON in ", 1)[1]
    assert json.loads(Path(written).read_text())["runs"][0]["seed"] == 1


def test_sim_sweep_reports_each_run_then_the_summary(tmp_path, capsys):
    assert _sim(tmp_path, "--seeds", "1-2", "--workers", "1") == 0
    out, err = capsys.readouterr()
    assert out.rstrip().splitlines()[-1].startswith("results: ")  # the table's format is unchanged
    lines = _lines(err)
    assert any("[1/2]" in ln for ln in lines) and any("[2/2]" in ln for ln in lines)
    assert lines[-1].startswith("netstack sim: ") and "2 run(s)" in lines[-1] and "2 ok, 0 failed" in lines[-1]


def test_sim_summary_counts_failed_runs():
    runs = [{"engine": {"events_per_s": 100}}, {"error": "boom"}]
    line = __import__("netstack.commands.sim", fromlist=["x"]).summary_line(
        {"scenario": "s", "topology": "t", "runtime": "sim"}, runs, "r.json", "1.0 s")
    assert line == "s on t (sim), 2 run(s) in 1.0 s: 1 ok, 1 failed, 100 events/s per run; JSON in r.json"


# ----------------------------------------------------------------------------- netstack bench


def test_bench_ends_with_its_summary_and_the_json_it_wrote(tmp_path, capsys):
    assert cli.main(["bench", "headers", "--min-time", "0.005", "--only", "pfc", "--results-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.rstrip().splitlines()[-1].startswith("wrote ")  # unchanged stdout
    lines = _lines(err)
    assert lines[0].startswith("[1/") and "pfc.PFCFrame" in lines[0]
    last = lines[-1]
    assert last.startswith("netstack bench: headers in ") and ", exit 0: " in last and "x Scapy" in last
    path = last.rsplit("JSON in ", 1)[1]
    assert json.loads(Path(path).read_text())["benchmark"] == "bench-headers"
    assert path.endswith(".json") and not path.endswith("-latest.json")


def test_bench_refusing_its_arguments_prints_no_summary(tmp_path, capsys):
    assert cli.main(["bench", "headers", "--only", "nothing-matches", "--results-dir", str(tmp_path)]) == 2
    assert "netstack bench:" not in capsys.readouterr().err


def test_bench_summary_without_a_result_file_and_with_errors(tmp_path):
    assert bench_summary.result_of(tmp_path, "tcd", time.time()) == (None, None)
    assert bench_summary.summary_line("tcd", 1, "3.0 s", None, None) == "tcd in 3.0 s, exit 1; no result file written"
    line = bench_summary.summary_line("tcd", 1, "3.0 s", tmp_path / "x.json",
                                      {"sections": ["scenarios", "live"], "errors": {"live": "no root"}})
    assert line == f"tcd in 3.0 s, exit 1: sections scenarios, live; errors in live; JSON in {tmp_path / 'x.json'}"


# ----------------------------------------------------------------------------- netstack tcd


def test_tcd_run_sim_json_then_summary(capsys):
    assert cli.main(["tcd", "run", "single", "--runtime", "sim", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out.strip().splitlines()[-1])
    assert set(doc["ports"]) == {"P0", "P1", "P2", "P3"}
    lines = _lines(err)
    assert any(ln.startswith("sim single/tcd: ") for ln in lines)  # the scenario's own progress
    last = lines[-1]
    assert last.startswith("netstack tcd run: single congestion point, marker tcd (sim) in ")
    ce = sum(f["ce"] for f in doc["flows"].values())
    assert f"{len(doc['flows'])} flows" in last and f"{ce} CE" in last


def test_tcd_send_and_recv_summaries():
    from netstack.commands.tcd import end_summary

    send = {"tool": "tcd-send", "mode": "tcd", "flow": 3, "dst": "10.0.0.2", "done": True, "seconds": 1.5,
            "bytes": 1_000_000, "rate_bps_avg": 5.3e6, "counters": {"cnps_ce": 2, "cnps_ue": 7}}
    assert end_summary(send) == ("flow 3 (tcd) to 10.0.0.2: 1,000,000 B in 1.500 s, 5.300 Mbit/s on average, "
                                 "CNPs 2 CE / 7 UE received, done")
    recv = {"tool": "tcd-recv", "seconds": 2.04, "flows": {"0": {"complete": True}, "1": {"complete": False}},
            "counters": {"datagrams": 900, "cnps_ce": 1, "cnps_ue": 0}}
    assert end_summary(recv) == "2 flow(s) (1 complete), 900 packets in 2.0 s, CNPs 1 CE / 0 UE sent"


# ----------------------------------------------------------------------------- live commands, canned results


def test_onepipe_run_summary():
    from netstack.commands.onepipe import run_summary

    args = argparse.Namespace(procs=4, reliable=True, seconds=2.0)
    out = {"messages_sent": 800, "delivered": 790, "send_failed": 5, "send_unknown": 3, "in_flight_at_end": 2,
           "unaccounted": 0, "killed": ["p2"], "out": "/tmp/op"}
    assert run_summary(out, args, "4.2 s") == (
        "4 reliable processes scattered for 2 s, 4.2 s in all: 800 messages sent = 790 delivered + 5 send-failed + "
        "3 send-unknown + 2 in flight at the end (0 unaccounted), 1 killed; logs in /tmp/op")


def test_fuzz_summary_says_the_verdict():
    from netstack.commands.fuzz import summary_line

    checks = [{"where": "sw1", "check": "alive", "ok": True}, {"where": "sw1/p-h1", "check": "accounting", "ok": False}]
    res = SimpleNamespace(target="switch", sent=1000, duration_s=0.4, seed=3, prefix="fz1", checks=checks, ok=False)
    assert summary_line(res, "9.0 s") == ("switch: 1000 frames injected (0.4 s), 9.0 s in all, seed 3, prefix fz1: "
                                          "FAIL (1 of 2 checks: sw1/p-h1 accounting)")
    res.checks, res.ok = checks[:1], True
    assert summary_line(res, "9.0 s").endswith(": PASS (1 checks)")


def test_demo_summary_lists_every_phase():
    from netstack.commands.demo import summary_line

    phases = [{"phase": "off", "udp": {"loss": 0.0101}, "tcp": {"mbps": 80.0}},
              {"phase": "LG", "udp": {"loss": 0.0}, "tcp": {"mbps": 61.25}}]
    assert summary_line({"phases": phases, "path": "results/demo.json"}, 0.01, "55.0 s") == (
        "2 phases over 0.01 corruption in 55.0 s: off 1.0e-02 loss / 80.0 Mbit/s, LG 0.0e+00 loss / 61.2 Mbit/s; "
        "JSON in results/demo.json")


def test_corruptd_says_what_it_protected_when_interrupted(monkeypatch, capsys):
    """Ctrl-C is how corruptd usually stops: the links it protected are still reported."""
    import netstack.linkguardian.control as lgc
    import netstack.linkguardian.corruptd as lgd

    enabled = []
    monkeypatch.setattr(lgc, "enable_link", lambda prefix, link, **kw: enabled.append((link, kw)) or {})

    def fake(prefix, monitor, *, say, enable, **kw):
        say("corruptd: watching 2 link directions every 1 s")
        enable(prefix, "sw1-sw2", mode="blocking", copies=2, actual=0.01, target=1e-8, direction="sw1:sw2")
        raise KeyboardInterrupt

    monkeypatch.setattr(lgd, "run_corruptd", fake)
    assert cli.main(["corruptd", "--prefix", "nothere"]) == 130
    out, err = capsys.readouterr()
    assert out == "corruptd: protected 1 link direction(s)\n"  # the line it always printed
    assert enabled == [("sw1-sw2", {"mode": "blocking", "copies": 2, "actual": 0.01, "target": 1e-8,
                                    "direction": "sw1:sw2"})]
    last = _lines(err)[-1]
    assert last.startswith("netstack corruptd: watched for ") and last.endswith(
        "(interrupted): protected 1 link direction(s): sw1-sw2 sw1:sw2")


@pytest.mark.parametrize("pcap", [False, True])
def test_dissect_summarises_a_capture_only(tmp_path, capsys, pcap):
    frame = bytes.fromhex("0180c2000001" "020000000001" "8808" "0101" "00ff" + "0000" * 8 + "00" * 26)
    argv = ["dissect", "--no-scapy"]
    if pcap:
        from scapy.utils import wrpcap

        path = tmp_path / "x.pcap"
        wrpcap(str(path), [__import__("scapy.layers.l2", fromlist=["Ether"]).Ether(frame)] * 2)
        argv += ["--pcap", str(path)]
    else:
        argv.append(frame.hex())
    cli.main(argv)
    out, err = capsys.readouterr()
    assert out.startswith("frame 0: ")
    if pcap:
        assert _lines(err)[-1].startswith(f"netstack dissect: 2 frame(s) of {path} in ")
    else:
        assert err == ""


def test_sim_says_a_key_file_is_not_used_in_virtual_time(tmp_path, capsys):
    from netstack.topo.model import load_topology_spec

    text = Path(load_topology_spec("lg-testbed").source).read_text()
    topo = tmp_path / "keyed.toml"
    topo.write_text(text.replace("[topology]\n", '[topology]\nkeys = "lab.keys"\n', 1))
    assert cli.main(["sim", str(topo), "--scenario", "lg-stream", "--param", "count=100",
                     "--results-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "names a key file; virtual time runs without it" in err
