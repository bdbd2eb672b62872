"""Reliable 1Pipe's failure cases, one test per row of design topic §12 item 7 (docs/papers.md;
the table is in docs/onepipe-reliable.md "Failure cases"; rows 9 and on are ours: a process
declared failed while alive), in memory with the real engines (tests/onepipe/rfabric.py). Every
test also runs the invariants of :meth:`RFabric.check` and the atomicity check of item 8.
"""

from __future__ import annotations

import itertools

from headers.onepipe import OnePipeOpcode, ts_from_ns
from netstack.engine import SendTo
from netstack.onepipe.ctlwire import Notice, failure_notice
from netstack.onepipe.params import RELAY_BACKOFF_MAX, OnePipeParams

from .rfabric import CTL, STALL, P, RFabric, idx

US = 1_000
WARM = 150 * US  # registration and the first barriers
SETTLE = 1_500 * US  # detection (10 T_beacon), the record, notices, callbacks, release


def _up(n: int = 3, cls: type[RFabric] = RFabric, **kw) -> RFabric:
    fab = cls(n, **kw)
    fab.run_for(WARM)
    assert all(ep.registered for ep in fab.eps.values()), "every process registered"
    assert all(ep.commit_barrier is not None for ep in fab.eps.values()), "every process has a commit barrier"
    return fab


def _delivered(fab: RFabric, receiver: int) -> set[tuple[int, int]]:
    return {(d.src, d.seq) for d in fab.deliveries if d.receiver == receiver}


def _first_prepare_lost():
    gone = []

    def lose(frm, to, data: bytes) -> bool:
        if not gone and frm == 1 and data[22] == OnePipeOpcode.PREPARE:
            gone.append(data)
            return True
        return False

    return lose, gone


def test_fair_loss_drop_is_delivered():
    """Row 1: a lost PREPARE is resent (design topic §7.1) and delivered everywhere."""
    lose, gone = _first_prepare_lost()
    fab = _up(lose=lose)
    fab.send(1, [2, 3])
    fab.run_for(300 * US)
    assert gone, "the test dropped a PREPARE"
    assert (1, 0) in _delivered(fab, 2) and (1, 0) in _delivered(fab, 3)
    assert fab.eps[1].c.retransmits >= 1
    assert not fab.failures and not fab.records
    fab.check()
    fab.atomic({1, 2, 3})


def test_receiver_fails_before_ack_is_recalled():
    """Row 2: the receiver crashes before it ACKs: its message is dropped, the scattering is
    recalled from the other receivers, the sender is told both failed (§8 step 5)."""
    fab = _up()
    fab.send(1, [2, 3])
    fab.kill(3)  # the PREPARE is on the wire: it never gets ACKed
    fab.run_for(SETTLE)
    assert (1, 0) not in _delivered(fab, 2)
    assert sorted((f[2], f[3]) for f in fab.failures if f[0] == 1) == [(2, 0), (3, 0)]
    assert [r.proc for r in fab.records] == [P(3)]
    assert P(3) in fab.releases
    assert {(p, f) for p, f, _t, _a in fab.proc_fails} == {(1, 3), (2, 3)}
    fab.check()
    fab.atomic({1, 2})
    # and the survivors go on
    fab.send(1, [2])
    fab.run_for(200 * US)
    assert (1, 1) in _delivered(fab, 2)


def test_receiver_fails_after_ack_delivers_once_it_recovers():
    """Row 3: the receiver ACKed, then was cut off and declared failed; it recovers (fetches the
    notices and recalls it missed, re-joins as a new incarnation) and delivers the message."""
    fab = _up()
    fab.send(1, [2, 3])
    fab.run_for(5 * US)  # P3 has the PREPARE and its ACK is on the wire
    fab.cut_data.add(3)
    fab.run_for(SETTLE)
    assert (1, 0) in _delivered(fab, 2)
    assert [r.proc for r in fab.records] == [P(3)]
    assert fab.eps[3].c.recoveries == 1
    fab.cut_data.discard(3)  # the path comes back: the new incarnation gets barriers again
    fab.run_for(SETTLE)
    assert fab.eps[3].registered and fab.eps[3].incarnation == 2
    assert (1, 0) in _delivered(fab, 3), "delivered once it recovered"
    assert not [f for f in fab.failures if f[2] == 3]
    fab.check()
    fab.atomic({1, 2, 3})


def test_sender_fails_delivers_up_to_t_f_everywhere_and_nothing_after():
    """Row 4: the sender crashes mid-stream: its messages with ts <= T_f are delivered at every
    receiver, none above T_f anywhere (§8 "failure timestamp")."""
    fab = _up()
    for k in range(40):
        fab.at(fab.now + k * 2 * US, fab.send, 1, [2, 3])
    fab.at(fab.now + 50 * US, fab.kill, 1)
    fab.run_for(SETTLE)
    t_f = fab.t_f(1)
    assert t_f is not None and t_f > 0
    at2, at3 = _delivered(fab, 2), _delivered(fab, 3)
    assert at2 == at3, "both receivers agree"
    below = {d.seq for d in fab.deliveries if d.receiver == 2}
    assert below, "something was committed before the crash"
    assert len(below) < fab.next_seq[1], "something was in flight above T_f"
    assert all(d.ts <= t_f for d in fab.deliveries if d.src == 1)
    fab.check()
    fab.atomic({2, 3})


def test_co_receiver_fails_before_ack_recalls_it_here():
    """Row 5: a co-receiver crashes before it ACKs: this receiver had the message and ACKed it;
    the sender's RECALL drops it here and it is never delivered."""
    fab = _up()
    fab.send(1, [2, 3])
    fab.kill(3)
    fab.run_for(SETTLE)
    ep2 = fab.eps[2]
    assert ep2.c.recalls_received >= 1 and ep2.c.messages_recalled == 1
    assert (1, 0) not in _delivered(fab, 2)
    fab.check()
    fab.atomic({1, 2})


def test_co_receiver_fails_after_ack_is_delivered():
    """Row 6: a co-receiver crashes after it ACKed: the scattering is committed and delivered at
    the correct receivers; nothing is recalled or failed."""
    fab = _up()
    fab.send(1, [2, 3])
    fab.run_for(9 * US)  # both ACKs are back at the sender
    assert fab.eps[1].c.messages_acked == 2
    fab.kill(3)
    fab.run_for(SETTLE)
    assert (1, 0) in _delivered(fab, 2)
    assert not fab.failures
    assert fab.eps[1].c.recalls_sent == 0
    fab.check()
    fab.atomic({1, 2})


def test_path_down_with_both_ends_reaching_the_controller_is_relayed():
    """Row 7: the data path between sender and receiver is down, both reach the controller:
    the PREPAREs and their ACKs go through it (§8 "controller forwarding")."""
    fab = _up(n=3, tors=2)
    fab.cut_paths.add(frozenset((1, 2)))
    fab.send(1, [2])
    fab.run_for(400 * US)
    assert (1, 0) in _delivered(fab, 2)
    assert fab.eps[1].c.relayed_out >= 1 and fab.eps[2].c.relayed_in >= 1
    assert not fab.records and not fab.failures
    fab.check()


def test_process_that_cannot_reach_the_controller_is_declared_failed():
    """Row 8: a process cut off from the controller does not answer the notice of another
    failure in time, so it is declared failed too, and the first failure still completes."""
    fab = _up(n=4)
    fab.cut_ctl.add(4)
    for k in range(100):  # P4 keeps sending: once it is failed nobody ACKs it and its commit sticks
        fab.at(fab.now + k * 10 * US, fab.send, 4, [1])
    fab.kill(2)
    fab.run_for(3 * SETTLE)
    failed = [idx(r.proc) for r in fab.records]
    assert failed[:2] == [2, 4]
    assert P(2) in fab.releases and P(4) in fab.releases
    # the survivors go on: P4, alive but never told, is banned from the commit minimum
    fab.send(1, [3])
    fab.run_for(300 * US)
    assert (1, 0) in _delivered(fab, 3)
    assert fab.cm["tor0"].held(P(4))
    fab.check()
    fab.atomic({1, 3})


def test_a_receiver_stalled_past_the_failure_timeout_delivers_nothing_recalled_and_recovers():
    """Row 9: a live receiver is declared failed (stopped longer than the failure timeout: SIGSTOP,
    a loaded machine), and its own notice is lost (its socket buffer overflowed meanwhile). The
    sender recalls what it never ACKed; the stalled receiver, going on, has that PREPARE in its
    socket and ACKs it, but must not deliver it (the paper's §5: restricted failure atomicity;
    fail-stop): its ToR holds the commit barrier it gives it from the hold on. The first datagram
    it sends the controller gets its notice again; it recovers as a new incarnation."""
    fab = _up()
    fab.freeze(3, overflow=True)
    seq = fab.send(1, [2, 3])  # its PREPARE to P3 waits in P3's socket
    fab.run_for(SETTLE)
    assert [r.proc for r in fab.records] == [P(3)] and P(3) in fab.releases
    assert sorted((f[2], f[3]) for f in fab.failures if f[0] == 1) == [(2, seq), (3, seq)]  # recalled
    fab.thaw(3)
    fab.run_for(300 * US)
    assert fab.eps[3].c.packets_received >= 1, "P3 took the recalled PREPARE"
    assert (1, seq) not in _delivered(fab, 3), "a process declared failed delivered a recalled message"
    fab.send(3, [1])  # unanswered (P1 knows P3 failed), then relayed: the controller tells P3
    fab.run_for(SETTLE)
    assert fab.eps[3].c.recoveries == 1 and fab.eps[3].incarnation == 2
    assert fab.ctl.counters()["notices_to_failed"] >= 1
    later = fab.send(1, [2, 3])
    fab.run_for(300 * US)
    assert (1, later) in _delivered(fab, 2) and (1, later) in _delivered(fab, 3)
    assert (1, seq) not in _delivered(fab, 2) | _delivered(fab, 3)
    fab.check()
    fab.atomic({1, 2, 3})


def test_a_recall_after_a_recovery_drops_the_old_message_not_the_new_one_at_its_psn():
    """Row 10: P3 ACKed P1's message m of a scattering still waiting on P4, then was declared
    failed (stalled) and recovered, its connections retired. P4 then fails: P1 recalls m's
    scattering at P3, by m's PSN. P3 must drop m (kept on its retired connection until the commit
    barrier passes it), and not remember the PSN for the connection P1 opens to it next, which
    restarts at the same base: there it is a new message's. The RECALL's ts tells them apart."""
    fab = _up(n=4)
    fab.cut_paths.add(frozenset((1, 4)))  # P1 -> P4 is down ...
    fab.cut_ctl.add(4)  # ... and P4 cannot answer relays: declared failed late
    old = fab.send(1, [3, 4])
    fab.run_for(10 * US)
    assert fab.eps[1].c.messages_acked == 1, "P3 ACKed m"
    fab.freeze(3)
    fab.run_for(STALL)
    fab.thaw(3)
    while P(3) in fab.eps[1].recovery.failed or not fab.eps[3].registered:
        fab.run_for(US)
    assert fab.eps[3].incarnation == 2
    new = fab.send(1, [3, 2])  # the first message of P1's new connection to P3: m's PSN
    fab.run_for(SETTLE)
    assert [idx(r.proc) for r in fab.records] == [3, 4]
    assert (1, old) not in _delivered(fab, 3), "the recalled message was delivered"
    assert (1, new) in _delivered(fab, 3) and (1, new) in _delivered(fab, 2), "the new message was dropped"
    fab.check()
    fab.atomic({1, 2, 3})


def test_a_replay_of_its_own_earlier_failure_does_not_fail_a_recovered_process_again():
    """Not a row: a recovering process repeats its RECOVER request; the controller, which has
    admitted it meanwhile, answers a repeat with the same batch, whose REPLAY notices include the
    failure it recovered from. That failure is of its previous incarnation: taken as its own, it
    started a recovery again, which the controller answered with the same batch, and so on."""
    fab = _up()
    fab.freeze(3)
    fab.run_for(SETTLE)
    fab.thaw(3)
    fab.run_for(SETTLE)
    ep = fab.eps[3]
    assert ep.incarnation == 2 and ep.c.recoveries == 1
    (rec,) = fab.records
    fid = fab.fids[(rec.proc, rec.incarnation)]
    replay = failure_notice(Notice(P(3), 1, ts_from_ns(rec.t_f), fid, True))
    for _ in range(3):
        fab.link("ctl", 3, CTL, P(3), replay)
    fab.run_for(SETTLE)
    assert ep.incarnation == 2 and ep.c.recoveries == 1 and ep.c.stale_notices == 3
    seq = fab.send(1, [2, 3])
    fab.run_for(300 * US)
    assert (1, seq) in _delivered(fab, 3)
    fab.check()
    fab.atomic({1, 2, 3})


def test_a_process_that_joined_after_a_failure_learns_of_it_when_it_joins():
    """Not a row of the table, a case hypothesis found: P2 restarts after P3 failed, so P3's
    notice predates it. The controller tells a newcomer of every process still failed (a replayed
    notice before its reply): P2's message to P3 fails at once, the rest of the scattering goes.
    (Told of nobody, it sent to P3, unanswered, then through the controller, which told it then:
    ``notices_to_strays``; and a stalled P3 that did not know it failed yet could have scattered
    to it above its T_f.)"""
    fab = _up()
    fab.kill(3)
    fab.run_for(SETTLE)
    fab.kill(2)
    fab.start(2)  # a new process: registers after P3's failure (and P2's own old one) is settled
    fab.run_for(SETTLE)
    assert fab.eps[2].registered
    assert fab.ctl.counters()["notices_to_newcomers"] >= 1
    seq = fab.send(2, [1, 3])
    fab.run_for(SETTLE)
    assert [(f[1], f[2], f[3]) for f in fab.failures if f[0] == 2] == [(0, 3, seq)]  # never left
    assert (2, seq) in _delivered(fab, 1)
    fab.send(2, [1])
    fab.run_for(300 * US)
    assert (2, seq + 1) in _delivered(fab, 1)
    fab.check()
    fab.atomic({1, 2})


def test_a_run_restarted_on_the_addresses_of_one_that_ended_without_leaving_delivers():
    """Not a row: a live KV run found it (docs/onepipe-kv.md). Every process of a run ends without
    leaving, and a new run's processes start on the same addresses, 30 µs apart, while the
    controller is still declaring the old ones failed. It sends its notices to the addresses it
    thinks live, so a new process, not registered yet, received the notice of a peer's old
    incarnation, marked that address failed, and never heard that a new process lived there:
    its messages to that peer failed at once or stayed unacknowledged."""
    fab = _up(n=4)
    for i in (1, 2, 3, 4):
        fab.kill(i)
    for k, i in enumerate((1, 2, 3, 4)):
        fab.at(fab.now + k * 30 * US, fab.start, i)
    fab.run_for(3 * SETTLE)
    assert all(ep.incarnation == 2 for ep in fab.eps.values())
    seqs = {i: fab.send(i, [j for j in (1, 2, 3, 4) if j != i]) for i in (1, 2, 3, 4)}
    fab.run_for(SETTLE)
    missing = [(i, j) for i, s in seqs.items() for j in (1, 2, 3, 4) if j != i and (i, s) not in _delivered(fab, j)]
    assert not missing, f"(sender, receiver) pairs not delivered: {missing}"
    assert not [f for f in fab.failures if f[0] in seqs and f[3] == seqs[f[0]]], "a message to a live peer failed"
    assert sum(ep.c.notices_before_joining for ep in fab.eps.values()) >= 1, "the race happened"
    fab.check()
    fab.atomic({1, 2, 3, 4})


def _watching(proc: int, opcode: OnePipeOpcode, times: list[int]) -> type[RFabric]:
    """An RFabric that notes in ``times`` when process ``proc`` sends the controller an ``opcode``."""

    class Watching(RFabric):
        def _flush(self, i: int) -> None:
            if i == proc:
                times.extend(self.now for a in self.eps[i].actions if isinstance(a, SendTo) and a.dst == CTL
                             and a.data[22] == opcode)
            super()._flush(i)

    return Watching


def test_registers_back_off_while_the_controller_does_not_answer():
    """Ours (OnePipeParams.register_wait_ns): a process whose REGISTERs go unanswered asks again
    after rto_ns, then twice as long each time, so that a controller that is slow, starting or
    handing over its lead is not asked by every process every rto_ns; once admitted, a later
    registration starts again from rto_ns."""
    registers: list[int] = []
    fab = _up(n=2, cls=_watching(1, OnePipeOpcode.REGISTER, registers))
    fab.cut_ctl.add(1)
    fab.kill(1)
    registers.clear()
    fab.start(1)  # restarted, cut off from the controller: its REGISTERs go unanswered
    fab.run_for(400 * US)
    rto = fab.eps[1].params.rto_ns
    gaps = [b - a for a, b in itertools.pairwise(registers)]
    assert len(gaps) >= 4 and gaps[:4] == [rto, 2 * rto, 4 * rto, 8 * rto], gaps
    assert not fab.eps[1].registered
    fab.cut_ctl.discard(1)
    fab.run_for(64 * rto + 100 * US)
    assert fab.eps[1].registered  # answered at its next ask
    assert fab.eps[1].recovery._reg_sends == 0  # and the backoff starts over
    assert OnePipeParams(t_beacon_ns=3_000).register_wait_ns(1000) == rto << RELAY_BACKOFF_MAX  # capped


def test_resends_through_the_controller_back_off():
    """Ours (OnePipeParams.resend_wait_ns): direct resends come every rto_ns; once they go through
    the controller each waits twice as long as the one before, so that a controller slower than
    the resends (docs/onepipe-reliable.md "The controller's core") is not flooded by them."""
    relays: list[int] = []
    fab = _up(n=3, tors=2, cls=_watching(1, OnePipeOpcode.RELAY, relays))
    fab.cut_paths.add(frozenset((1, 2)))
    fab.cut_ctl.add(2)  # the relays reach nobody: P2 is declared failed in the end
    fab.send(1, [2])
    fab.run_for(400 * US)
    gaps = [b - a for a, b in itertools.pairwise(relays)]
    rto = fab.eps[1].params.rto_ns
    assert len(gaps) >= 3 and gaps[:3] == [rto, 2 * rto, 4 * rto]
    assert OnePipeParams(t_beacon_ns=3_000).resend_wait_ns(rto, 1000) == rto << RELAY_BACKOFF_MAX  # capped
