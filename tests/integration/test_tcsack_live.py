"""T/C-SACK, go-back-N and kernel TCP on the live testbed (T/C-SACK draft): real UDP/TCP between h1
and h2 through both switches, with nft loss on sw1-sw2 in both directions (data and ACKs) and
a delay on the switch-to-switch link."""

from __future__ import annotations

import json

import pytest

from netstack import runtime
from netstack.tcsack.control import live_transfer
from netstack.tcsack.live import PORT
from netstack.topo import impair

from .conftest import in_node, valid_run

pytestmark = pytest.mark.netns

LOSS = 0.02
DELAY_NS = 2_000_000  # each way on sw1-sw2


def _transfer(state, proto: str, nbytes: int, *extra: str) -> tuple[dict, dict]:
    return live_transfer(state, proto, nbytes, *extra, rate=40_000_000, timeout=90)


@pytest.fixture(scope="module")
def lossy(testbed):
    prefix = testbed.prefix
    for sw, port in (("sw1", "p-sw2"), ("sw2", "p-sw1")):
        runtime.control(prefix, sw, "set_port", port=port, delay_ns=DELAY_NS)
        impair.apply_impairment(prefix, testbed.namespaces[sw], port, loss=LOSS, backend="nft")
    try:
        yield testbed
    finally:
        for sw, port in (("sw1", "p-sw2"), ("sw2", "p-sw1")):
            impair.clear_impairment(prefix, testbed.namespaces[sw], port)
            runtime.control(prefix, sw, "set_port", port=port, delay_ns=10_000)


def _data_link_frames(state) -> int:
    """Frames sw1 has put on sw1 -> sw2 so far, the ones nft then dropped included."""
    return int(runtime.control(state.prefix, "sw1", "status")["ports"]["p-sw2"]["tx_frames"])


def _others(state, before: int, send: dict) -> int:
    """Frames on sw1 -> sw2 since ``before`` that were not the transfer's datagrams (an ARP, a
    neighbour solicitation, a switch's own frame): nft drops them as it drops data (CI once saw 21
    drops against 20 resends)."""
    return max(0, _data_link_frames(state) - before - int(send["counters"]["sent"]))


def _dropped(state) -> tuple[int, int]:
    """Frames nft has dropped so far on sw1 -> sw2 (data) and sw2 -> sw1 (ACKs)."""
    return tuple(impair.active_impairment(state.prefix, state.namespaces[sw], port)["dropped"]
                 for sw, port in (("sw1", "p-sw2"), ("sw2", "p-sw1")))


@pytest.mark.parametrize("proto", ["tcsack", "gbn", "tcp"])
def test_transfer_arrives_intact_over_a_lossy_delayed_path(lossy, proto):
    before, frames = _dropped(lossy), _data_link_frames(lossy)
    send, recv = _transfer(lossy, proto, 1_000_000)
    data_drops = _dropped(lossy)[0] - before[0]
    assert send["done"] and recv["complete"]
    assert recv["bytes"] == 1_000_000 and recv["sha256"] == send["sha256"]
    assert data_drops >= 3  # ~2 % of ~830 packets: the loss is real (and dropped exactly once)
    if proto != "tcp":
        c = send["counters"]
        assert c["cum_acked"] == c["packets"] and c["bogus_acks"] == 0
        assert recv["counters"]["delivered"] == c["packets"]
        # every packet nft dropped had to be sent again (the probe resends the last one), but for
        # frames of the link's own it may have dropped too
        assert c["retx_sent"] + c["probes_sent"] >= data_drops - _others(lossy, frames, send)


def test_tcsack_resends_what_was_lost_and_go_back_n_much_more(lossy):
    before, frames = _dropped(lossy), _data_link_frames(lossy)
    t_send, t_recv = _transfer(lossy, "tcsack", 1_000_000)
    data_drops = _dropped(lossy)[0] - before[0]
    others = _others(lossy, frames, t_send)  # frames of the link's own nft may have dropped too
    g_send, _ = _transfer(lossy, "gbn", 1_000_000)
    t, g = t_send["counters"], g_send["counters"]
    # T/C-SACK resends a packet only when a later copy overtook it (sender.py): on this FIFO
    # path, only packets that were really lost (their retransmissions can be lost too)
    assert data_drops - others <= t["retx_sent"] + t["probes_sent"] and t["retx_sent"] <= data_drops
    assert t_recv["counters"]["duplicates"] <= t["probes_sent"]
    # go-back-N resends everything in flight after each loss
    assert g["retx_sent"] > 2 * t["retx_sent"]


def test_wraps_the_32_bit_sequence_space(lossy):
    send, recv = _transfer(lossy, "tcsack", 300_000, "--start-seq", str(2**32 - 100))
    assert recv["sha256"] == send["sha256"] and recv["counters"]["delivered"] == send["counters"]["packets"]


#: the checks only a starved machine fails: scheduling delay, a sender behind its preset rate
MACHINE_CHECKS = ("scheduling delay", "sending rate")


def _starved(out: dict) -> bool:
    """Whether the transfer failed a check only a starved machine fails (MACHINE_CHECKS)."""
    return any(not c["ok"] and c["name"] in MACHINE_CHECKS for c in out["checks"])


def test_netstack_tcsack_transfer_command(lossy, capsys):
    """``netstack tcsack transfer`` on the running testbed: both ends started for the user, the
    received bytes checked against the sent ones, one line of result (or the JSON). A run the
    machine starved says so and exits 3 (netstack.validity)."""
    from netstack.cli import main

    rc = main(["tcsack", "transfer", "--prefix", lossy.prefix, "--bytes", "200KB", "--rate", "40Mbit"])
    said = capsys.readouterr()
    assert rc == 0 or (rc == 3 and ("scheduling delay" in said.err or "sending rate" in said.err)), said.err
    line, verdict = said.out.strip().splitlines()
    assert line.startswith("tcsack h1 -> h2: 200,000 B in") and line.endswith("intact")
    assert verdict.startswith("VALID (" if rc == 0 else "INVALID: ")  # the run's verdict, its own line
    rc = main(["tcsack", "transfer", "--prefix", lossy.prefix, "--proto", "gbn", "--bytes", "100000",
               "--rate", "40Mbit", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["proto"] == "gbn" and out["receiver"]["bytes"] == 100_000
    assert rc == (0 if out["valid"] else 3) and (out["valid"] or _starved(out))
    assert main(["tcsack", "transfer", "--prefix", lossy.prefix, "--src", "sw1"]) == 2
    assert "not a host" in capsys.readouterr().err


def test_netstack_tcsack_send_and_recv_run_one_end_each(lossy):
    """``netstack tcsack recv|send --host H``: each end in its host's namespace, progress on
    stderr, a one-line summary each; the module's JSON (``--json``) has the same SHA-256."""
    import subprocess
    import sys

    base = [sys.executable, "-m", "netstack.cli", "tcsack"]
    recv = subprocess.Popen([*base, "recv", "--host", "h2", "--prefix", lossy.prefix, "--json", "--wait", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert recv.stderr is not None and recv.stderr.readline().strip() == "ready"
        send = subprocess.run([*base, "send", "--host", "h1", "--prefix", lossy.prefix, "--dst", "10.0.0.2",
                               "--bytes", "300KB", "--rate", "40Mbit"], capture_output=True, text=True, timeout=60)
        out, _ = recv.communicate(timeout=60)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    assert send.returncode == 0 and recv.returncode == 0, (send.stderr, out)
    line = send.stdout.strip()
    assert line.startswith("tcsack send: 300,000 B in") and " done, sha256 " in line, line
    assert send.stderr.startswith("tcsack send: 300,000 B to 10.0.0.2:40200 at 40 Mbit/s from h1")  # progress
    got = json.loads(out.strip().splitlines()[-1])
    assert got["complete"] and got["bytes"] == 300_000 and line.split("sha256 ")[1].rstrip(".") in got["sha256"]


def test_netstack_tcsack_send_refuses_bad_input_clearly(lossy):
    import subprocess
    import sys

    base = [sys.executable, "-m", "netstack.cli", "tcsack", "send", "--prefix", lossy.prefix, "--dst", "10.0.0.2"]
    for extra, said in ((["--host", "sw1"], "not a host"), (["--host", "h1", "--flow", "70000"], "--flow 16 bits"),
                        (["--host", "h1", "--port", "0"], "--port must be")):
        r = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)


#: runs in h2's namespace: sniffs eth0 for the sender's first data packet, then, from a UDP socket
#: of its own, sends the receiver replays of it, a forged LAST, forged data of the flow, another
#: flow's packet and junk, every 5 ms for a second, and counts what comes back to it
ATTACKER = """
import json, socket, struct, sys, time
port = int(sys.argv[1])
sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
sniff.bind(("eth0", 0))
sniff.settimeout(30)
print("ready", file=sys.stderr, flush=True)
while True:
    f = sniff.recv(65535)
    if f[12:14] == b"\\x08\\x00" and f[23] == 17 and struct.unpack_from("!H", f, 36)[0] == port:
        length = struct.unpack_from("!H", f, 38)[0] - 8
        if length >= 12 and f[42] == 1:
            first = f[42:42 + length]
            break
_, _, flow, seq, _ = struct.unpack_from("!BBHII", first)
def data(flow, s, flags, body=b"x" * 1200):
    return struct.pack("!BBHII", 1, flags, flow, s & 0xFFFFFFFF, 0) + body
forged = [first, data(flow, seq + 3, 0x02), data(flow, seq + 5, 0), data(flow ^ 1, seq, 0), b"junk"]
time.sleep(0.05)  # the receiver has the packet too: it is bound
out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
out.setblocking(False)
sent = acks = 0
end = time.monotonic() + 1.0
while time.monotonic() < end:
    for d in forged:
        try:
            out.sendto(d, ("10.0.0.2", port))
            sent += 1
        except OSError:
            pass
    time.sleep(0.005)
    try:
        while True:
            out.recvfrom(65536)
            acks += 1
    except OSError:
        pass
print(json.dumps({"sent": sent, "acks": acks}))
"""


def test_the_receiver_acks_only_its_sender_while_another_source_forges(lossy):
    """docs/security.md#tc-sack: a process on the receiving host that sees the flow replays its
    packets and forges data, LAST, another flow's packets and junk from its own address during a
    transfer over the lossy path: the bytes arrive intact, the forgeries are counted, and no ACK
    goes to it."""
    attacker = in_node(lossy, "h2", ATTACKER, str(PORT), background=True)
    try:
        assert attacker.stderr is not None and attacker.stderr.readline().strip() == "ready"
        send, recv = _transfer(lossy, "tcsack", 1_000_000)
        out, _ = attacker.communicate(timeout=30)
    finally:
        if attacker.poll() is None:
            attacker.kill()
    a = json.loads(out.strip().splitlines()[-1])
    assert send["done"] and recv["complete"] and recv["sha256"] == send["sha256"]
    assert a["sent"] > 0 and a["acks"] == 0, a
    assert recv["checks"]["not_peer"] > 0 and recv["peer"][0] == lossy.host_ip("h1")
    assert send["counters"]["bogus_acks"] == 0 and recv["counters"]["delivered"] == send["counters"]["packets"]


def test_a_normal_transfer_is_valid_with_its_checks(lossy):
    """netstack.validity on a transfer over the lossy, delayed path: loss is what is measured, not
    a reason to doubt the run; completed, intact, paced at the preset rate, nobody starved. A run
    the machine starved is run again (at most 3 times), skipped if starved every time."""
    from netstack.tcsack.control import transfer

    out = valid_run(lambda: transfer(lossy, "tcsack", 500_000, rate_bps=40_000_000, t_ms=2.0, n=16, payload=1200),
                    machine=MACHINE_CHECKS)
    assert out["valid"] is True, [c for c in out["checks"] if not c["ok"]]
    assert [c["name"] for c in out["checks"]] == ["transfer completed", "bytes delivered intact", "sending rate",
                                                  "scheduling delay"]
    assert {"sw1", "sw2", "sender h1", "receiver h2"} <= set(out["sched"])
    # the 2T probe follows the sender's measured scheduling delay and ACK jitter (docs/tcsack.md)
    c = out["sender"]["counters"]
    assert c["timeout_ns"] == 2 * 2_000_000 + max(c["timer_slack_ns"], c["ack_jitter_ns"])
    assert out["sender"]["sched"]["samples"] > 0


def test_tcsack_holds_its_preset_rate_at_2_percent_corruption_both_ways(lossy):
    """Issue 33: with 2 % of the frames corrupted on sw1 = sw2 in both directions (data and ACKs),
    a valid transfer is one whose sender paced at its preset rate within 5 % (the verdict's
    ``sending rate``), and it completes intact. A run the machine starved is run again, skipped if
    starved every time (tests assert behaviour: the rate is the verdict's, not a number here)."""
    from netstack.tcsack.control import transfer

    prefix = lossy.prefix
    ports = (("sw1", "p-sw2"), ("sw2", "p-sw1"))
    for sw, port in ports:
        impair.apply_impairment(prefix, lossy.namespaces[sw], port, corrupt=0.02, backend="nft")
    try:
        out = valid_run(lambda: transfer(lossy, "tcsack", 1_000_000, rate_bps=80_000_000, t_ms=2.0, n=16,
                                         payload=1200), machine=MACHINE_CHECKS)
    finally:
        for sw, port in ports:  # back to the module's loss
            impair.apply_impairment(prefix, lossy.namespaces[sw], port, loss=LOSS, backend="nft")
    assert out["valid"] is True, [c for c in out["checks"] if not c["ok"]]
    c = out["sender"]["counters"]
    assert c["retx_sent"] > 0 and c["cum_acked"] == c["packets"]  # the corruption was real, and repaired
    assert c["pacer_dropped_ns"] == 0 or c["pacer_late_max_ns"] > 10_000_000  # only a stall beyond the cap drops
