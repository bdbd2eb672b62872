"""The transactional key-value store on 1Pipe and its 2PC baseline (issue 32, netstack/onepipe/kv).

- the strict-serializability checker rejects hand-made histories that are not (a stale read, a
  lost update, a fractured read, write skew, real time broken) and accepts ones that are;
- the engines under hypothesis: a shard replica fed one delivered order with queries, repeats and
  junk interleaved applies each transaction once, in that order, as a serial execution would; two
  2PC shards under random retransmissions and reorderings never let conflicting locks coexist and
  end as the commit order says; a client completes each transaction once, whatever the order;
- the ``onepipe-kv`` scenario in virtual time: the 1Pipe store's history is strictly serializable
  under loss and with one process killed (reliable 1Pipe), and the 2PC baseline's under loss
  (with several transactions in flight a client and the host CPU model on, in some runs).
Nothing here asserts a timing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.engine import SendTo
from netstack.onepipe.kv import wire
from netstack.onepipe.kv.checker import Txn, check
from netstack.onepipe.kv.client import KvClient
from netstack.onepipe.kv.scenario import SCENARIO, kv_sim
from netstack.onepipe.kv.shard import KvShard
from netstack.onepipe.kv.twopc import TwoPCClient, TwoPCShard
from netstack.onepipe.kv.wire import Kind, Op, OpKind
from netstack.onepipe.kv.workload import Workload, txn_class
from netstack.onepipe.scenarios import fabric_topology
from netstack.sim.network import Network
from netstack.sim.scenario import Context, ScenarioError, resolve_topology

R, W, M = OpKind.READ, OpKind.WRITE, OpKind.RMW


def _t(uid: int, ops: list[tuple[OpKind, int, int]], reads: list[tuple[int, int]], inv: int, resp: int | None,
       stamp: object = None) -> Txn:
    return Txn(uid, tuple(Op(k, key, a) for k, key, a in ops), tuple(reads), inv, resp, stamp)


# --------------------------------------------------------------------------------- the checker
def test_checker_accepts_a_serial_history_and_finds_an_order_without_stamps() -> None:
    h = [_t(1, [(W, 1, 5)], [], 0, 10), _t(2, [(R, 1, 0), (M, 2, 3)], [(1, 5), (2, 0)], 20, 30),
         _t(3, [(R, 2, 0)], [(2, 3)], 40, 50)]
    assert check([Txn(t.uid, t.ops, t.reads, t.invoke, t.respond, t.uid) for t in h]).ok
    v = check(h)
    assert v.ok and v.searched and v.order == (1, 2, 3)


def test_checker_rejects_a_stale_read_after_a_write_responded() -> None:
    """Real time: the read began after the write had responded, yet saw the old value (it would
    be serializable, not strictly)."""
    h = [_t(1, [(W, 1, 5)], [], 0, 10), _t(2, [(R, 1, 0)], [(1, 0)], 20, 30)]
    assert check(h[::-1]).ok is False
    # concurrent instead: the read may come first
    assert check([h[0], _t(2, [(R, 1, 0)], [(1, 0)], 5, 30)]).ok


def test_checker_rejects_a_lost_update() -> None:
    """Two read-modify-writes of one key both read 0: one of them was lost."""
    h = [_t(1, [(M, 1, 1)], [(1, 0)], 0, 10), _t(2, [(M, 1, 2)], [(1, 0)], 0, 10), _t(3, [(R, 1, 0)], [(1, 2)], 20, 30)]
    assert not check(h).ok


def test_checker_rejects_a_fractured_read_and_write_skew() -> None:
    fractured = [_t(1, [(W, 1, 1), (W, 2, 1)], [], 0, 10), _t(2, [(R, 1, 0), (R, 2, 0)], [(1, 1), (2, 0)], 0, 10)]
    assert not check(fractured).ok
    skew = [_t(1, [(R, 1, 0), (W, 2, 1)], [(1, 0)], 0, 10), _t(2, [(R, 2, 0), (W, 1, 1)], [(2, 0)], 0, 10),
            _t(3, [(R, 1, 0), (R, 2, 0)], [(1, 1), (2, 1)], 20, 30)]
    assert not check(skew).ok


def test_checker_rejects_a_wrong_claimed_order_on_a_long_history_and_uses_pending_ones() -> None:
    """Past the search limit only the store's claim is checked: a claim that breaks a read fails.
    A pending transaction may have taken effect: its write explains a read only if included."""
    h = [_t(i, [(M, 1, 1)], [(1, i)], 10 * i, 10 * i + 5, i) for i in range(20)]
    assert check(h).ok
    bad = h[:]
    bad[5], bad[6] = (Txn(h[5].uid, h[5].ops, h[5].reads, h[5].invoke, h[5].respond, 6.5),
                      Txn(h[6].uid, h[6].ops, h[6].reads, h[6].invoke, h[6].respond, 5.5))
    assert not check(bad).ok
    pend = [_t(1, [(W, 1, 7)], [], 0, None), _t(2, [(R, 1, 0)], [(1, 7)], 5, 10)]
    assert check(pend).ok
    assert not check([_t(1, [(W, 1, 7)], [], 20, None), _t(2, [(R, 1, 0)], [(1, 7)], 5, 10)]).ok


@settings(max_examples=50, deadline=None)
@given(txns=st.lists(st.lists(st.tuples(st.sampled_from([R, W, M]), st.integers(0, 3), st.integers(1, 9)),
                              min_size=1, max_size=3), min_size=1, max_size=7),
       slack=st.lists(st.tuples(st.integers(0, 25), st.integers(0, 25)), min_size=7, max_size=7),
       victim=st.integers(0, 100))
def test_checker_accepts_every_serial_execution_and_rejects_an_impossible_read(txns, slack, victim) -> None:
    """Transactions executed one after another, each invoked and answered around its own point in
    time (so real time never contradicts the order): accepted with the stamps, and by search
    without them. One read changed to a value nobody wrote (negative): rejected both ways."""
    store: dict[int, int] = {}
    hist = []
    for i, t in enumerate(txns):
        ops = tuple(Op(k, key, a) for k, key, a in t)
        a, b = slack[i]
        hist.append(Txn(i, ops, wire.execute(store, ops), 10 * i - a, 10 * i + b, i))
    assert check(hist).ok and check([Txn(t.uid, t.ops, t.reads, t.invoke, t.respond) for t in hist]).ok
    readers = [i for i, t in enumerate(hist) if t.reads]
    if readers:
        i = readers[victim % len(readers)]
        t = hist[i]
        bad = [*hist[:i], Txn(t.uid, t.ops, ((t.reads[0][0], -1), *t.reads[1:]), t.invoke, t.respond, t.stamp),
               *hist[i + 1:]]
        assert not check(bad).ok
        assert not check([Txn(x.uid, x.ops, x.reads, x.invoke, x.respond) for x in bad]).ok


# --------------------------------------------------------------------------------- the engines
_OPS = st.lists(st.tuples(st.sampled_from([R, W, M]), st.integers(0, 5), st.integers(1, 50)), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(txns=st.lists(_OPS, min_size=1, max_size=8), noise=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9)),
                                                                     max_size=20), seed=st.integers(0, 1000))
def test_shard_applies_the_delivered_order_once_whatever_is_interleaved(txns, noise, seed) -> None:
    """1Pipe delivers the transactions in one order; queries (also for uids not there yet),
    repeated deliveries and junk come in between. Two replicas with different noise end the same,
    each transaction ran once, and every result is what a serial execution reads."""
    rng = random.Random(seed)
    ops = [tuple(Op(k, key, a) for k, key, a in t) for t in txns]
    reps = [KvShard(0, 0), KvShard(0, 1)]
    client = ("10.0.0.9", 40101)
    for rep, extra in zip(reps, (noise, noise[::-1]), strict=True):
        events: list[tuple[str, int]] = [("d", i) for i in range(len(ops))]
        for kind, i in extra:  # noise anywhere; deliveries keep their order
            events.insert(rng.randrange(len(events) + 1), (("q", "dup", "junk", "q")[kind], i % len(ops)))
        for kind, i in events:
            msg = wire.txn(Kind.TXN, wire.uid_of(1, i), ops[i])
            if kind == "d" or (kind == "dup" and wire.uid_of(1, i) in rep.results):
                rep.deliver(1000 + i, client, msg, 0)
            elif kind == "q":
                rep.query(("10.0.0.9", 41101), wire.shard_msg(Kind.QUERY, wire.uid_of(1, i), 0), 0)
            else:
                rep.deliver(1000 + i, client, msg[:5], 0)
                rep.query(client, b"\xff" * 12, 0)
    ref: dict[int, int] = {}
    expect = [wire.execute(ref, o) for o in ops]
    for rep in reps:
        assert rep.c.applied == len(ops) and [u for _, _, u in rep.log] == [wire.uid_of(1, i) for i in range(len(ops))]
        assert rep.store == ref
        assert [wire.parse_result(rep.results[wire.uid_of(1, i)])[3] for i in range(len(ops))] == expect
        for act in rep.actions.take_all():
            assert isinstance(act, SendTo) and wire.head(act.data)[0] is Kind.RESULT
    assert reps[0].store == reps[1].store and reps[0].log == reps[1].log


@settings(max_examples=60, deadline=None)
@given(txns=st.lists(_OPS, min_size=2, max_size=6), seed=st.integers(0, 10_000))
def test_2pc_shards_never_hold_conflicting_locks_and_end_as_the_commits_say(txns, seed) -> None:
    """Clients' PREPAREs, COMMITs and ABORTs to two shards, repeated and shuffled: no key is ever
    locked exclusively by one uid while another holds it; the stores end as the committed
    transactions applied in commit order would leave them."""
    rng = random.Random(seed)
    shards = [TwoPCShard(0), TwoPCShard(1)]
    ops = [tuple(Op(k, key, a) for k, key, a in t) for t in txns]
    msgs = [(s, wire.txn(Kind.PREPARE, u, [o for o in ops[u] if o.key % 2 == s]))
            for u in range(len(ops)) for s in {o.key % 2 for o in ops[u]}]
    votes: dict[int, dict[int, bool]] = {}
    decided: list[int] = []
    while msgs:
        s, m = msgs.pop(rng.randrange(len(msgs)))
        if rng.random() < 0.2:
            msgs.append((s, m))  # a retransmission
        shards[s].receive(("10.0.0.9", 41101), m, 0)
        for sh in shards:
            for key, (excl, holders) in sh.locks.items():
                assert not (excl and len(holders) > 1), f"key {key} held exclusively by {holders}"
            for act in sh.actions.take_all():
                kind, uid = wire.head(act.data)
                if kind is Kind.VOTE and uid not in decided:
                    shard, yes, _ = wire.parse_vote(act.data)
                    votes.setdefault(uid, {})[shard] = yes
                    need = {o.key % 2 for o in ops[uid]}
                    if set(votes[uid]) == need or not yes:
                        decided.append(uid)
                        commit = all(votes[uid].values()) and set(votes[uid]) == need
                        msgs += [(x, wire.decision(Kind.COMMIT if commit else Kind.ABORT, uid)) for x in need]
    ref: dict[int, int] = {}
    committed = [u for u in decided if all(u in sh.decided and sh.decided[u] for sh in shards
                                               if any(o.key % 2 == sh.shard for o in ops[u]))]
    for u in sorted(committed, key=decided.index):
        wire.execute(ref, ops[u])
    merged = {**shards[0].store, **shards[1].store}
    assert merged == ref and not shards[0].locks and not shards[1].locks


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), nshards=st.integers(1, 3))
def test_client_completes_a_transaction_once_whatever_order_results_come_in(seed, nshards) -> None:
    rng = random.Random(seed)
    reps = [[(f"10.0.1.{s}", 40101 + r) for r in range(2)] for s in range(nshards)]
    c = KvClient(3, reps, query_timeout_ns=100)
    wl = Workload(keys=200, shards=nshards, ops=2, mix="mixed")
    ops = wl.txn(rng, 1)
    uid, scatter = c.begin(ops, 0)
    shards = [KvShard(s, r) for s in range(nshards) for r in range(2)]
    by_addr = {a: shards[s * 2 + r] for s in range(nshards) for r, a in enumerate(reps[s])}
    replies = []
    for dst, msg in scatter:
        by_addr[dst].deliver(77, ("10.0.0.9", 40101), msg, 0)
        replies += [a.data for a in by_addr[dst].actions.take_all()]
    c.on_timer(500)  # overdue: it asks again
    assert all(wire.head(a.data)[0] is Kind.QUERY for a in c.actions.take_all())
    replies = replies * 2
    rng.shuffle(replies)
    done = [d for d in (c.on_result(m, 600) for m in replies) if d is not None]
    assert len(done) == 1 and done[0].uid == uid and done[0].ts == 77
    assert done[0].reads == wire.execute({}, ops) and c.c.replica_mismatch == 0 and not c.pending
    assert txn_class(ops) in ("RO", "WO", "WR")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), drop=st.floats(0, 0.4), dup=st.floats(0, 0.3))
def test_2pc_clients_finish_once_through_loss_duplication_and_conflicts(seed, drop, dup) -> None:
    """Two 2PC clients on the same two shards, every datagram dropped, duplicated or reordered at
    random: each transaction is done exactly once, the locks are all released, and the shards end
    as the two transactions applied in the order of their commit decisions."""
    rng = random.Random(seed)
    shards = [TwoPCShard(0), TwoPCShard(1)]
    saddr = [("10.0.0.1", 41101), ("10.0.0.2", 41101)]
    clients = [TwoPCClient(i + 1, saddr, rto_ns=100, backoff_ns=10, rng=random.Random(seed + i)) for i in range(2)]
    caddr = [("10.0.0.3", 41101 + i) for i in range(2)]
    txns = [(Op(M, 0, 5), Op(W, 1, 7)), (Op(R, 0, 0), Op(M, 1, 3))]
    bag: list[tuple[object, object, bytes]] = []
    done: dict[int, object] = {}
    now = 0
    for c, ops in zip(clients, txns, strict=True):
        c.begin(ops, now)

    def collect() -> None:
        for i, c in enumerate(clients):
            bag.extend((a.dst, caddr[i], a.data) for a in c.actions.take_all())
        for j, sh in enumerate(shards):
            bag.extend((a.dst, saddr[j], a.data) for a in sh.actions.take_all())

    collect()
    for _ in range(5000):
        if len(done) == 2 and not bag and not any(c.attempts for c in clients):
            break
        if not bag:
            now += 50
            for c in clients:
                c.on_timer(now)
            collect()
            continue
        dst, src, data = bag.pop(rng.randrange(len(bag)))
        if rng.random() < drop:
            continue
        if rng.random() < dup:
            bag.append((dst, src, data))
        if dst in saddr:
            shards[saddr.index(dst)].receive(src, data, now)
        else:
            i = caddr.index(dst)
            d = clients[i].receive(data, now)
            if d is not None:
                assert i not in done
                done[i] = d
        collect()
    assert len(done) == 2 and not shards[0].locks and not shards[1].locks
    first, second = sorted(done, key=lambda i: done[i].ts)
    ref: dict[int, int] = {}
    assert wire.execute(ref, txns[first]) == done[first].reads
    assert wire.execute(ref, txns[second]) == done[second].reads
    assert {**shards[0].store, **shards[1].store} == ref


def test_2pc_client_aborts_on_a_no_vote_and_retries_after_a_backoff() -> None:
    sh = TwoPCShard(0)
    sh.locks[1] = (True, {999})  # someone else holds key 1
    c = TwoPCClient(1, [("10.0.0.5", 41101)], rto_ns=1000, backoff_ns=10, rng=random.Random(1))
    c.begin((Op(W, 1, 5),), 0)
    for a in c.actions.take_all():
        sh.receive(("10.0.0.9", 41101), a.data, 0)
    c.receive(sh.actions.take_all()[0].data, 1)
    assert c.c.aborts == 1 and c.retry_at is not None and c.busy
    sh.locks.clear()
    c.on_timer(c.retry_at)
    assert c.c.attempts == 2


# --------------------------------------------------------------------------------- the scenario
SMALL = fabric_topology(tors=2, hosts_per_tor=2)


def _sim(duration_ns: int, seed: int = 1, **params: object) -> dict:
    topo = resolve_topology(SMALL)
    ctx = Context(topo, seed, duration_ns, SCENARIO.check_params(params))
    return kv_sim(Network(topo, seed=seed), ctx)


def _strict(res: dict) -> None:
    assert res["check"]["ok"], res["check"]["reason"]
    assert res["replicas_agree"] and res["clients"].get("replica_mismatch", 0) == 0


def test_onepipe_kv_is_strictly_serializable_under_loss_and_contention() -> None:
    res = _sim(100_000, loss=0.01, contention=0.5, replicas=2, window=3, cpu=True)
    _strict(res)
    assert res["cpu"]["busiest_core_share"] > 0
    assert res["done"] > 20 and res["impaired_ports"] > 0 and res["aborts"] == 0


def test_onepipe_kv_survives_a_killed_replica_and_a_killed_client() -> None:
    """kill=replica: the scatterings the dead replica had not acknowledged are recalled (all or
    none) and run again on the live replicas; kill=client: its last transaction ran everywhere
    or nowhere. Both histories, pending transactions included, pass the check."""
    res = _sim(120_000, kill="replica", replicas=2, contention=0.5, drain_ns=400_000)
    _strict(res)
    assert res["recovery"]["killed"] == 1 and res["done"] > 20
    res = _sim(120_000, seed=2, kill="client", contention=0.5, loss=0.005, drain_ns=400_000)
    _strict(res)
    assert res["recovery"]["killed"] == 1


def test_2pc_baseline_is_strictly_serializable_under_loss_and_aborts_under_contention() -> None:
    res = _sim(100_000, mode="2pc", loss=0.01, contention=0.8, procs=6, window=2, cpu=True)
    _strict(res)
    assert res["done"] > 10 and res["aborts"] > 0 and res["attempts_per_txn"] > 1


def test_bad_parameters_are_scenario_errors() -> None:
    for bad in ({"mode": "paxos"}, {"kill": "replica"}, {"kill": "everyone"}, {"mix": "tpcc"}):
        with pytest.raises(ScenarioError):
            _sim(10_000, **bad)


def test_the_check_fails_a_store_that_breaks_its_promise(monkeypatch) -> None:
    """The scenario's check can fail: 2PC with its locks removed, or best-effort 1Pipe under loss
    (a transaction lost at one shard and applied at the other: no atomicity) are caught."""
    monkeypatch.setattr(TwoPCShard, "_free", lambda self, o, uid: True)
    assert not _sim(100_000, mode="2pc", contention=0.8, procs=6)["check"]["ok"]
    monkeypatch.undo()
    assert not _sim(100_000, reliable=False, loss=0.02, contention=0.8, procs=6)["check"]["ok"]
