"""The delivery-log checker (``netstack onepipe check``): each violation kind by hand, a
differential hypothesis test against a brute-force oracle, targeted perturbations of valid logs,
and bad input (always a CheckError naming file:line, never a traceback)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.onepipe.check import (
    FIELDS,
    KINDS,
    CheckError,
    check_logs,
    log_record,
    main,
)

Entry = dict


def e(receiver: str, src: str, ts: int, seq: int, mid: str | None = None, at: int | None = None) -> Entry:
    return {"receiver": receiver, "src": src, "ts": ts, "seq": seq, "id": mid or f"{src}.{seq}.{receiver}",
            "at": ts + 1 if at is None else at}


def write(tmp_path: Path, logs: dict[str, list[Entry]]) -> list[Path]:
    paths = []
    for receiver, entries in logs.items():
        p = tmp_path / f"{receiver}.jsonl"
        p.write_text("".join(json.dumps(x) + "\n" for x in entries))
        paths.append(p)
    return paths


def check(tmp_path: Path, logs: dict[str, list[Entry]]):
    return check_logs(write(tmp_path, logs))


# --------------------------------------------------------------------------- the format


def test_log_record_is_one_line_with_every_field_and_the_version():
    line = log_record("h2", "h1", 1000, 3, "h1.3.h2", 1500)
    assert line.endswith("\n") and line.count("\n") == 1
    obj = json.loads(line)
    assert obj == {"receiver": "h2", "src": "h1", "ts": 1000, "seq": 3, "id": "h1.3.h2", "at": 1500, "v": 1}
    assert set(FIELDS) == set(obj) - {"v"}


def test_a_valid_run_passes_and_counts(tmp_path):
    logs = {
        "r1": [e("r1", "a", 10, 0), e("r1", "a", 10, 0, "a.0.r1.b"), e("r1", "b", 10, 0), e("r1", "a", 12, 1)],
        "r2": [e("r2", "a", 10, 0), e("r2", "b", 10, 0), e("r2", "b", 11, 1)],
    }
    r = check(tmp_path, logs)
    assert r.ok and r.first is None and r.first_violation is None and r.violations == {}
    assert r.counts == {"messages": 7, "receivers": 2, "senders": 2, "scatterings": 4, "delivered": 7}
    assert r.summary().startswith("ok: 7 messages from 2 senders at 2 receivers")


def test_extra_keys_and_a_missing_version_are_accepted(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({**e("r", "a", 1, 0), "len": 64, "note": "x"}) + "\n"
                 + json.dumps({**e("r", "a", 2, 1), "v": 1}) + "\n")
    assert check_logs([p]).ok


def test_the_tie_order_need_not_be_the_names_order(tmp_path):
    """Ties go by the sender's ID, which the log does not carry: z before a is fine if it is so everywhere."""
    logs = {"r1": [e("r1", "z", 5, 0), e("r1", "a", 5, 0)], "r2": [e("r2", "z", 5, 0), e("r2", "a", 5, 0),
                                                                    e("r2", "z", 7, 1), e("r2", "a", 7, 1)]}
    assert check(tmp_path, logs).ok


def test_a_directory_stands_for_its_logs(tmp_path):
    write(tmp_path, {"r1": [e("r1", "a", 1, 0)], "r2": [e("r2", "a", 1, 0)]})
    (tmp_path / "notes.txt").write_text("not a log")
    r = check_logs([tmp_path])
    assert r.ok and r.counts["receivers"] == 2


# --------------------------------------------------------------------------- each violation by hand


def test_duplicate(tmp_path):
    r = check(tmp_path, {"r": [e("r", "a", 1, 0, "m"), e("r", "a", 2, 1), e("r", "a", 2, 1, "m")]})
    assert not r.ok and r.first.kind == "duplicate"
    assert "r.jsonl:1" in r.first.message and "r.jsonl:3" in r.first.message and "'m'" in r.first.message


def test_causality(tmp_path):
    r = check(tmp_path, {"r": [e("r", "a", 1, 0), e("r", "a", 5, 1, at=5)]})
    assert r.first.kind == "causality" and "r.jsonl:2" in r.first.message and "not after its ts" in r.first.message
    assert r.violations == {"causality": 1}


def test_ts_order(tmp_path):
    r = check(tmp_path, {"r": [e("r", "a", 5, 0), e("r", "b", 4, 0)]})
    assert r.first.kind == "ts_order"
    assert "r.jsonl:2 (b seq 0, ts 4)" in r.first.message and "r.jsonl:1 (a seq 0, ts 5)" in r.first.message


def test_fifo(tmp_path):
    """Equal ts from one sender: seq must not go down (the scatterings' order)."""
    r = check(tmp_path, {"r": [e("r", "a", 5, 1), e("r", "a", 5, 0)]})
    assert r.first.kind == "fifo" and "r.jsonl:1" in r.first.message and "r.jsonl:2" in r.first.message
    assert r.violations == {"fifo": 1}


def test_equal_seq_is_one_scattering_and_allowed(tmp_path):
    assert check(tmp_path, {"r": [e("r", "a", 5, 1, "x"), e("r", "a", 5, 1, "y")]}).ok


def test_one_ts_across_receivers(tmp_path):
    r = check(tmp_path, {"r1": [e("r1", "a", 5, 0)], "r2": [e("r2", "a", 6, 0)]})
    assert r.first.kind == "one_ts" and "r1.jsonl:1" in r.first.message and "r2.jsonl:1" in r.first.message
    assert r.violations == {"one_ts": 1}


def test_one_ts_within_a_receiver(tmp_path):
    r = check(tmp_path, {"r": [e("r", "a", 5, 0, "x"), e("r", "a", 6, 0, "y")]})
    assert r.violations == {"one_ts": 1}


def test_total_order_two_receivers_disagree_on_a_tie(tmp_path):
    r = check(tmp_path, {"r1": [e("r1", "a", 5, 0), e("r1", "b", 5, 0)],
                         "r2": [e("r2", "b", 5, 0), e("r2", "a", 5, 0)]})
    assert r.first.kind == "total_order" and r.violations == {"total_order": 1}
    for where in ("r1.jsonl:1", "r1.jsonl:2", "r2.jsonl:1", "r2.jsonl:2"):
        assert where in r.first.message


def test_total_order_one_receiver_flips_the_tie_at_another_ts(tmp_path):
    """The tie-break is the sender's fixed ID: the same two senders cannot swap at a later ts."""
    r = check(tmp_path, {"r": [e("r", "a", 5, 0), e("r", "b", 5, 0), e("r", "b", 9, 1), e("r", "a", 9, 1)]})
    assert r.first.kind == "total_order"


def test_total_order_a_sender_interrupted_at_one_ts(tmp_path):
    r = check(tmp_path, {"r": [e("r", "a", 5, 0, "x"), e("r", "b", 5, 0), e("r", "a", 5, 0, "y")]})
    assert r.first.kind == "total_order" and "grouped by sender" in r.first.message
    assert "r.jsonl:3" in r.first.message and "r.jsonl:1" in r.first.message


def test_total_order_a_cycle_of_three(tmp_path):
    """No two receivers disagree, yet no order of a, b, c fits: found at the end."""
    r = check(tmp_path, {"r1": [e("r1", "a", 5, 0), e("r1", "b", 5, 0)],
                         "r2": [e("r2", "b", 5, 0), e("r2", "c", 5, 0)],
                         "r3": [e("r3", "c", 5, 0), e("r3", "a", 5, 0)]})
    assert r.first.kind == "total_order" and "no one order of the senders" in r.first.message
    for where in ("r1.jsonl:1", "r2.jsonl:2", "r3.jsonl:1"):
        assert where in r.first.message


def test_the_first_violation_is_the_first_in_file_and_line_order(tmp_path):
    r = check(tmp_path, {"r1": [e("r1", "a", 5, 0), e("r1", "a", 6, 1, at=6)],
                         "r2": [e("r2", "a", 5, 0, "x"), e("r2", "a", 5, 0, "x")]})
    assert r.first.kind == "causality" and r.violations == {"causality": 1, "duplicate": 1}
    assert "violations: duplicate 1, causality 1" in r.summary()


# --------------------------------------------------------------------------- hypothesis


@st.composite
def runs(draw) -> dict[str, list[Entry]]:
    """A valid run: scatterings from a few senders, ts non-decreasing per sender (ties within
    and across senders likely), sorted by (ts, the senders' secret ID order, seq), each
    receiver's log that order filtered to its messages."""
    senders = draw(st.lists(st.sampled_from("abcde"), min_size=1, max_size=4, unique=True))
    receivers = draw(st.lists(st.sampled_from(["r1", "r2", "r3", "a", "b"]), min_size=1, max_size=4, unique=True))
    rank = {s: i for i, s in enumerate(draw(st.permutations(senders)))}
    clock = dict.fromkeys(senders, 0)
    seq = dict.fromkeys(senders, 0)
    scatterings = []
    for src, step in draw(st.lists(st.tuples(st.sampled_from(senders), st.integers(0, 2)), min_size=1,
                                   max_size=25)):
        clock[src] += step
        dests = draw(st.lists(st.sampled_from(receivers), min_size=1, max_size=4))
        scatterings.append((clock[src], rank[src], seq[src], src, dests))
        seq[src] += 1
    scatterings.sort()
    logs: dict[str, list[Entry]] = {r: [] for r in receivers}
    for ts, _, s, src, dests in scatterings:
        for k, d in enumerate(dests):
            logs[d].append(e(d, src, ts, s, f"{src}.{s}.{k}", ts + 1 + draw(st.integers(0, 3))))
    return {r: x for r, x in logs.items() if x}


def oracle(logs: dict[str, list[Entry]]) -> set[str]:
    """Which guarantees are broken, found by brute force: every order of the senders is tried."""
    broken = set()
    ts_of: dict[tuple[str, int], set[int]] = {}
    deduped = {}
    for r, entries in logs.items():
        seen, kept = set(), []
        for x in entries:
            if x["id"] in seen:
                broken.add("duplicate")
                continue
            seen.add(x["id"])
            kept.append(x)
            broken |= {"causality"} if x["at"] <= x["ts"] else set()
            ts_of.setdefault((x["src"], x["seq"]), set()).add(x["ts"])
        deduped[r] = kept
    if any(len(v) > 1 for v in ts_of.values()):
        broken.add("one_ts")
    senders = sorted({x["src"] for xs in deduped.values() for x in xs})
    fifo = all(all(a["seq"] <= b["seq"] for a, b in itertools.pairwise([x for x in xs if x["src"] == s]))
               for xs in deduped.values() for s in senders)
    fits = any(all(all((a["ts"], p.index(a["src"]), a["seq"]) <= (b["ts"], p.index(b["src"]), b["seq"])
                       for a, b in itertools.pairwise(xs)) for xs in deduped.values())
               for p in itertools.permutations(senders))
    if not (fifo and fits):
        broken.add("order")
    return broken


def verdict(result) -> set[str]:
    v = set(result.violations)
    order = {"ts_order", "fifo", "total_order"}
    return (v - order) | ({"order"} if v & order else set())


def _check_in(tmp_path_factory, logs):
    return check_logs(write(tmp_path_factory.mktemp("logs"), logs))


@settings(max_examples=150)
@given(runs())
def test_every_valid_run_passes(tmp_path_factory, logs):
    r = _check_in(tmp_path_factory, logs)
    assert r.ok, r.first_violation
    assert r.counts["messages"] == sum(map(len, logs.values()))


def _perturb(data, logs: dict[str, list[Entry]]) -> dict[str, list[Entry]]:
    logs = {r: [dict(x) for x in xs] for r, xs in logs.items()}
    r = data.draw(st.sampled_from(sorted(logs)))
    xs = logs[r]
    i = data.draw(st.integers(0, len(xs) - 1))
    how = data.draw(st.sampled_from(["swap", "tie", "tie", "ts", "dup", "move", "at", "seq"]))
    ties = [j for j in range(len(xs) - 1) if xs[j]["ts"] == xs[j + 1]["ts"] and xs[j]["src"] != xs[j + 1]["src"]]
    if how == "tie" and ties:  # two senders' messages at one ts the other way round
        j = data.draw(st.sampled_from(ties))
        xs[j], xs[j + 1] = xs[j + 1], xs[j]
    elif how == "swap" and len(xs) > 1:
        i = min(i, len(xs) - 2)
        xs[i], xs[i + 1] = xs[i + 1], xs[i]
    elif how == "ts":
        xs[i]["ts"] += data.draw(st.sampled_from([-2, -1, 1, 2]))
    elif how == "dup":
        xs.insert(data.draw(st.integers(i + 1, len(xs))), dict(xs[i]))
    elif how == "move":
        x = xs.pop(i)
        xs.insert(data.draw(st.integers(0, len(xs))), x)
    elif how == "at":
        xs[i]["at"] = xs[i]["ts"] - data.draw(st.integers(0, 2))
    elif how == "seq":
        xs[i]["seq"] = max(0, xs[i]["seq"] + data.draw(st.sampled_from([-1, 1])))
    return logs


@settings(max_examples=300)
@given(runs(), st.data())
def test_the_checker_agrees_with_brute_force_on_perturbed_runs(tmp_path_factory, logs, data):
    logs = _perturb(data, logs)
    r = _check_in(tmp_path_factory, logs)
    assert verdict(r) == oracle(logs), (r.violations, r.first_violation)
    assert r.ok == (r.first is None) == (not r.violations)


@settings(max_examples=100)
@given(runs(), st.data())
def test_swapping_two_adjacent_entries_of_different_ts_is_a_ts_order_violation(tmp_path_factory, logs, data):
    pairs = [(r, i) for r, xs in logs.items() for i in range(len(xs) - 1) if xs[i]["ts"] != xs[i + 1]["ts"]]
    if not pairs:
        return
    r, i = data.draw(st.sampled_from(pairs))
    logs[r][i], logs[r][i + 1] = logs[r][i + 1], logs[r][i]
    res = _check_in(tmp_path_factory, logs)
    assert res.first.kind == "ts_order" and f"{r}.jsonl:{i + 2}" in res.first.message


@settings(max_examples=100)
@given(runs(), st.data())
def test_changing_the_ts_of_a_shared_scattering_is_a_one_ts_violation(tmp_path_factory, logs, data):
    count: dict[tuple[str, int], int] = {}
    for xs in logs.values():
        for x in xs:
            count[(x["src"], x["seq"])] = count.get((x["src"], x["seq"]), 0) + 1
    spots = [(r, i) for r, xs in logs.items() for i, x in enumerate(xs) if count[(x["src"], x["seq"])] > 1]
    if not spots:
        return
    r, i = data.draw(st.sampled_from(spots))
    logs[r][i]["ts"] -= data.draw(st.integers(1, 3))  # (still below at: causality holds)
    res = _check_in(tmp_path_factory, logs)
    assert "one_ts" in res.violations and not res.ok


@settings(max_examples=100)
@given(runs(), st.data())
def test_a_duplicated_entry_is_a_duplicate_violation(tmp_path_factory, logs, data):
    r = data.draw(st.sampled_from(sorted(logs)))
    i = data.draw(st.integers(0, len(logs[r]) - 1))
    j = data.draw(st.integers(i + 1, len(logs[r])))
    logs[r].insert(j, dict(logs[r][i]))
    res = _check_in(tmp_path_factory, logs)
    assert res.first.kind == "duplicate" and f"{r}.jsonl:{i + 1}" in res.first.message
    assert f"{r}.jsonl:{j + 1}" in res.first.message


def test_a_large_run(tmp_path):
    """35 000 lines, 8 processes scattering to all others, three senders sharing every ts (in
    the order of their IDs, p7 lowest): linear, no recursion."""
    procs = [f"p{i}" for i in range(8)]
    files = {p: (tmp_path / f"{p}.jsonl").open("w") for p in procs}
    seq = dict.fromkeys(procs, 0)
    for n in range(5000):
        ts = 1000 + n // 3
        src = sorted((procs[(n // 3 + k) % 8] for k in range(3)), reverse=True)[n % 3]
        for d in procs:
            if d != src:
                files[d].write(log_record(d, src, ts, seq[src], f"{n}.{d}", ts + 7))
        seq[src] += 1
    for f in files.values():
        f.close()
    r = check_logs([tmp_path])
    assert r.ok, r.first_violation
    assert r.counts == {"messages": 35000, "receivers": 8, "senders": 8, "scatterings": 5000, "delivered": 35000}


# --------------------------------------------------------------------------- bad input


GOOD = json.dumps(e("r", "a", 1, 0))


@pytest.mark.parametrize("text, problem", [
    ("{not json\n", "r.jsonl:1: not JSON"),
    (GOOD + "\n[1, 2]\n", "r.jsonl:2: a JSON list, not an object"),
    (GOOD + "\n\n" + GOOD + "\n", "r.jsonl:2: blank line"),
    (json.dumps({k: v for k, v in e("r", "a", 1, 0).items() if k != "seq"}) + "\n", "r.jsonl:1: missing 'seq'"),
    (json.dumps({**e("r", "a", 1, 0), "ts": 1.5}) + "\n", "r.jsonl:1: 'ts' is 1.5, not an integer"),
    (json.dumps({**e("r", "a", 1, 0), "at": True}) + "\n", "'at' is true, not an integer"),
    (json.dumps({**e("r", "a", 1, 0), "seq": "3"}) + "\n", "'seq' is \"3\", not an integer"),
    (json.dumps({**e("r", "a", 1, 0), "seq": -1}) + "\n", "'seq' is -1, below 0"),
    (json.dumps({**e("r", "a", 1, 0), "src": ""}) + "\n", "'src' is \"\", not a non-empty string"),
    (json.dumps({**e("r", "a", 1, 0), "id": 7}) + "\n", "'id' is 7, not a non-empty string"),
    (json.dumps({**e("r", "a", 1, 0), "v": 2}) + "\n", "format version 2"),
    (GOOD + "\n" + json.dumps(e("q", "a", 2, 1)) + "\n", "r.jsonl:2: receiver 'q', but r.jsonl:1 says 'r'"),
    ('{"ts": ' + "9" * 5000 + "}\n", "r.jsonl:1: not JSON"),
    ("[" * 100000 + "\n", "r.jsonl:1: not JSON"),
    ("", "r.jsonl: empty"),
    (GOOD + "\n" + GOOD[:20], "r.jsonl:2: not JSON"),  # a writer killed mid-line
])
def test_bad_input_names_file_and_line(tmp_path, text, problem):
    p = tmp_path / "r.jsonl"
    p.write_text(text)
    with pytest.raises(CheckError) as info:
        check_logs([p])
    assert problem in str(info.value).replace(str(tmp_path) + "/", "")


def test_not_utf8(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(GOOD.encode() + b"\n" + b'{"receiver": "\xff"}\n')
    with pytest.raises(CheckError, match=r"r\.jsonl:2: not UTF-8"):
        check_logs([p])


def test_unreadable_and_missing_files_and_empty_directories(tmp_path):
    with pytest.raises(CheckError, match=r"nope\.jsonl: cannot read: No such file"):
        check_logs([tmp_path / "nope.jsonl"])
    with pytest.raises(CheckError, match=r"no \*\.jsonl delivery logs"):
        check_logs([tmp_path])
    with pytest.raises(CheckError, match="no delivery logs given"):
        check_logs([])


def test_one_receiver_in_two_files(tmp_path):
    (tmp_path / "x.jsonl").write_text(GOOD + "\n")
    (tmp_path / "y.jsonl").write_text(GOOD + "\n")
    with pytest.raises(CheckError, match=r"y\.jsonl:1: receiver 'r' also has .*x\.jsonl"):
        check_logs([tmp_path / "x.jsonl", tmp_path / "y.jsonl"])


def test_an_empty_log_is_accepted_when_asked(tmp_path):
    (tmp_path / "idle.jsonl").write_text("")
    write(tmp_path, {"r": [e("r", "a", 1, 0)]})
    r = check_logs([tmp_path], allow_empty=True)
    assert r.ok and r.counts["receivers"] == 1


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_a_verdict_or_a_check_error(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("junk") / "r.jsonl"
    p.write_bytes(data)
    try:
        check_logs([p])
    except CheckError as exc:
        assert str(exc).startswith(str(p))


@settings(max_examples=200)
@given(st.lists(st.dictionaries(st.sampled_from([*FIELDS, "v", "x"]),
                                st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False),
                                          st.sampled_from(["", "r", "a", "b"])), max_size=8), min_size=1, max_size=5))
def test_arbitrary_json_objects_give_a_verdict_or_a_check_error(tmp_path_factory, objs):
    p = tmp_path_factory.mktemp("junk") / "r.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in objs))
    try:
        r = check_logs([p])
    except CheckError as exc:
        assert str(exc).startswith(f"{p}:")
    else:
        assert set(r.violations) <= set(KINDS)


# --------------------------------------------------------------------------- command line


def test_main_exit_codes_and_output(tmp_path, capsys):
    ok = tmp_path / "ok"
    ok.mkdir()
    write(ok, {"r1": [e("r1", "a", 1, 0)], "r2": [e("r2", "a", 1, 0)]})
    assert main([str(ok)]) == 0
    assert capsys.readouterr().out.startswith("ok: 2 messages from 1 senders at 2 receivers, 1 scatterings")
    bad = tmp_path / "bad"
    bad.mkdir()
    paths = write(bad, {"r1": [e("r1", "a", 5, 0), e("r1", "b", 4, 0)]})
    assert main([str(p) for p in paths]) == 1
    out = capsys.readouterr().out
    assert out.startswith("violation (ts_order): r1 delivers") and "r1.jsonl:2" in out
    junk = tmp_path / "junk.jsonl"
    junk.write_text("nope\n")
    assert main([str(junk)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"{junk}:1: not JSON" in captured.err
    assert main(["--json", str(ok)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["counts"]["messages"] == 2 and doc["first"] is None


# --------------------------------------------------------------------------- atomicity (design topic §12 item 8)


def lines(path: Path, objs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))


RELIABLE = {"mode": "reliable"}


def run_dir(tmp_path: Path, logs: dict[str, list[Entry]], sent: dict[str, list[dict]], *,
            send_fail: dict[str, list[dict]] | None = None, proc_fail: dict[str, list[dict]] | None = None,
            run: dict | None = RELIABLE) -> Path:
    """A run directory as ``netstack onepipe run`` leaves it: delivery logs, ``sent/``,
    ``send-fail/``, ``proc-fail/`` and ``run.json`` (a reliable run's unless given; None: none)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    write(tmp_path, logs)
    for sub, per in (("sent", sent), ("send-fail", send_fail or {}), ("proc-fail", proc_fail or {})):
        (tmp_path / sub).mkdir(exist_ok=True)
        for p, objs in per.items():
            lines(tmp_path / sub / f"{p}.jsonl", objs)
    if run is not None:
        (tmp_path / "run.json").write_text(json.dumps(run))
    return tmp_path


def s(seq: int, *dsts: str) -> dict:
    return {"seq": seq, "ts": None, "dsts": list(dsts), "at": 1}


def reg(p: str, inc: int) -> dict:
    return {"proc": f"10.0.0.1:{40100 + int(p[1:])}", "name": p, "registered": inc, "at": 1}


def failed(p: str, inc: int | None, t_f: int = 5) -> dict:
    return {"proc": f"10.0.0.1:{40100 + int(p[1:])}", "name": p, "incarnation": inc, "t_f": t_f, "at": 9}


#: p1 scatters seq 0 (ts 10) and seq 1 (ts 20) to p2 and p3; p2 sends seq 0 (ts 30) to p3
SENT = {"p1": [s(0, "p2", "p3"), s(1, "p2", "p3")], "p2": [s(0, "p3")], "p3": []}


def full() -> dict[str, list[Entry]]:
    return {"p2": [e("p2", "p1", 10, 0), e("p2", "p1", 20, 1)],
            "p3": [e("p3", "p1", 10, 0), e("p3", "p1", 20, 1), e("p3", "p2", 30, 0)]}


def test_atomicity_a_clean_run_passes(tmp_path):
    r = check_logs([run_dir(tmp_path, full(), SENT, run={"reliable": True, "killed": []})])
    assert r.ok, r.summary()
    assert r.counts["atomicity_checked"] == 3 and r.counts["undecided"] == 0 and r.counts["unlisted"] == 0
    assert "atomicity" in r.summary() and "receivers excluded: none" in r.summary()


def test_atomicity_a_partial_delivery_is_a_violation_listed_by_scattering(tmp_path, capsys):
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]  # p3 skipped p1's seq 1 (ts 20), went on past it
    d = run_dir(tmp_path, logs, SENT)
    r = check_logs([d])
    assert not r.ok and r.violations == {"atomicity": 1} and r.first.kind == "atomicity"
    assert r.broken == [r.first.message]
    assert "p1 seq 1 (ts 20;" in r.first.message and "delivered by p2 but not by p3 (delivered up to ts 30)" \
        in r.first.message and "sent/p1.jsonl:2" in r.first.message
    # the command line: exit 1, every broken scattering printed (the file arguments' directory is the run's)
    assert main([str(p) for p in sorted(d.glob("*.jsonl"))]) == 1
    out = capsys.readouterr().out
    assert out.startswith("violation (atomicity): p1 seq 1") and "broke atomicity: p1 seq 1" in out
    assert main(["--json", str(d)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["violations"] == {"atomicity": 1} and len(doc["atomicity"]) == 1


def test_atomicity_a_receiver_whose_log_ends_before_the_scattering_is_undecided(tmp_path):
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0)]  # stopped before its commit barrier passed ts 20
    r = check_logs([run_dir(tmp_path, logs, SENT)])
    assert r.ok and r.counts["undecided"] == 1  # p1 seq 1 at p3 (p2's seq 0, delivered nowhere, is atomic)


def test_atomicity_a_failed_receiver_is_excluded(tmp_path):
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    pf = {"p1": [reg("p1", 1), failed("p3", 1)], "p2": [reg("p2", 1), failed("p3", 1)], "p3": [reg("p3", 1)]}
    r = check_logs([run_dir(tmp_path, logs, SENT, proc_fail=pf)])
    assert r.ok, r.summary()
    assert r.excluded == {"p3": "failed"} and "receivers excluded: p3 (failed)" in r.summary()


def test_atomicity_a_killed_receiver_is_excluded(tmp_path):
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    r = check_logs([run_dir(tmp_path, logs, SENT, run={"reliable": True, "killed": ["p3"]})])
    assert r.ok and r.excluded == {"p3": "killed"}


def test_atomicity_a_recovered_receiver_is_judged(tmp_path):
    """p3 was declared failed as incarnation 1 and registered again as 2: it is a correct
    receiver again, and must deliver what the others delivered."""
    pf = {"p1": [reg("p1", 1), failed("p3", 1)], "p2": [reg("p2", 1), failed("p3", 1)],
          "p3": [reg("p3", 1), reg("p3", 2)]}
    assert check_logs([run_dir(tmp_path / "ok", full(), SENT, proc_fail=pf)]).ok
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    r = check_logs([run_dir(tmp_path / "bad", logs, SENT, proc_fail=pf)])
    assert r.violations == {"atomicity": 1} and r.excluded == {} and "not by p3" in r.first.message


def test_atomicity_a_failure_after_a_process_stopped_is_its_end_not_a_crash(tmp_path):
    """p3 ended normally as incarnation 1; the controller then declared 1 failed (its input timed
    out): p3 is judged. Stopped while not registered (null), a failure still excludes it."""
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    stop = {"proc": "10.0.0.1:40103", "name": "p3", "stopped": 1, "at": 99}
    pf = {"p1": [reg("p1", 1), failed("p3", 1)], "p3": [reg("p3", 1), stop]}
    r = check_logs([run_dir(tmp_path / "a", logs, SENT, proc_fail=pf)])
    assert r.violations == {"atomicity": 1} and r.excluded == {}
    pf = {"p1": [reg("p1", 1), failed("p3", 1)], "p3": [reg("p3", 1), {**stop, "stopped": None}]}
    r = check_logs([run_dir(tmp_path / "b", logs, SENT, proc_fail=pf)])
    assert r.ok and r.excluded == {"p3": "failed"}


def test_atomicity_a_failure_of_an_earlier_run_on_the_same_address_is_ignored(tmp_path):
    """Incarnation 4 of p3's address failed (a process of an earlier run): this run's p3 is 5."""
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    pf = {"p1": [reg("p1", 3), failed("p3", 4)], "p3": [reg("p3", 5)]}
    r = check_logs([run_dir(tmp_path, logs, SENT, proc_fail=pf)])
    assert r.violations == {"atomicity": 1} and r.excluded == {}


def test_atomicity_a_failure_with_no_incarnation_or_no_registration_excludes(tmp_path):
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    for name, pf in (("none", {"p1": [failed("p3", None)], "p3": [reg("p3", 1), reg("p3", 2)]}),
                     ("unregistered", {"p1": [failed("p3", 1)]})):
        r = check_logs([run_dir(tmp_path / name, logs, SENT, proc_fail=pf)])
        assert r.ok and r.excluded == {"p3": "failed"}, name


def test_atomicity_a_message_that_never_left_excludes_its_receiver_for_that_scattering(tmp_path):
    """ts 0 in send-fail: p3 was known failed when p1 sent seq 1, so the message never left."""
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    sf = {"p1": [{"id": "p1.1.p3", "dst": "p3", "ts": 0, "seq": 1}]}
    assert check_logs([run_dir(tmp_path / "a", logs, SENT, send_fail=sf)]).ok
    sf = {"p1": [{"id": "p1.1.p3", "dst": "p3", "ts": 20, "seq": 1}]}  # a recall (ts known): still judged
    assert not check_logs([run_dir(tmp_path / "b", logs, SENT, send_fail=sf)]).ok


def test_atomicity_is_not_checked_for_best_effort_or_without_sent_logs(tmp_path):
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    r = check_logs([run_dir(tmp_path / "be", logs, SENT, run={"reliable": False})])
    assert r.ok and "atomicity_checked" not in r.counts
    r = check_logs([run_dir(tmp_path / "old", logs, SENT, run={"tool": "netstack onepipe run"})])  # before reliable
    assert r.ok
    (tmp_path / "plain").mkdir()
    write(tmp_path / "plain", logs)
    assert check_logs([tmp_path / "plain"]).ok
    # logs from two directories: no one run directory, unless --run-dir names it
    d = run_dir(tmp_path / "two", logs, SENT)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (d / "p3.jsonl").rename(other / "p3.jsonl")
    assert check_logs([d / "p2.jsonl", other / "p3.jsonl"]).ok
    assert not check_logs([d / "p2.jsonl", other / "p3.jsonl"], run_dir=d).ok


def test_atomicity_only_judges_the_receivers_whose_logs_are_given(tmp_path):
    logs = full()
    logs["p3"] = [e("p3", "p1", 10, 0), e("p3", "p2", 30, 0)]
    d = run_dir(tmp_path, logs, SENT)
    assert check_logs([d / "p2.jsonl"]).ok


def test_atomicity_unlisted_scatterings_are_counted(tmp_path):
    """p2's sent log lost its last line (it was killed): its seq 0 is delivered but unlisted."""
    r = check_logs([run_dir(tmp_path, full(), {"p1": SENT["p1"], "p2": []})])
    assert r.ok and r.counts["unlisted"] == 1


def test_atomicity_an_auxiliary_log_cut_short_by_a_kill_loses_its_last_line(tmp_path):
    d = run_dir(tmp_path, full(), SENT)
    with (d / "sent" / "p2.jsonl").open("a") as f:
        f.write('{"seq": 1, "dsts": ["p')
    assert check_logs([d]).ok


@pytest.mark.parametrize("sub, text, problem", [
    ("sent/p1.jsonl", '{"seq": -1, "dsts": []}\n', "sent/p1.jsonl:1: 'seq' is -1"),
    ("sent/p1.jsonl", '{"seq": 0, "dsts": "p2"}\n', "sent/p1.jsonl:1: 'dsts' is \"p2\", not a list"),
    ("sent/p1.jsonl", '{"seq": 0, "dsts": []}\nnope\n{"seq": 1, "dsts": []}\n', "sent/p1.jsonl:2: not JSON"),
    ("sent/p1.jsonl", "\n\n", "sent/p1.jsonl:1: blank line"),
    ("sent/p1.jsonl", "[1]\n", "sent/p1.jsonl:1: a JSON list, not an object"),
    ("send-fail/p1.jsonl", '{"dst": "p2", "seq": 0}\n', "send-fail/p1.jsonl:1: a send-fail entry needs"),
    ("proc-fail/p1.jsonl", '{"proc": 3, "t_f": 1}\n', "proc-fail/p1.jsonl:1: 'proc' is 3"),
    ("proc-fail/p1.jsonl", '{"proc": "10.0.0.1:40101", "registered": "1"}\n', "'registered' is \"1\""),
    ("proc-fail/p1.jsonl", '{"proc": "10.0.0.1:40101", "t_f": 1.5}\n', "'t_f' must be an integer"),
    ("proc-fail/p1.jsonl", '{"proc": "10.0.0.1:40101"}\n', "neither 't_f'"),
    ("proc-fail/p1.jsonl", '{"proc": "10.0.0.1:40101", "stopped": "x"}\n', "'stopped' is \"x\""),
    ("run.json", "[]", "run.json: a JSON list, not an object"),
    ("run.json", "{", "run.json: not JSON"),
    ("run.json", '{"killed": "p3"}', "'killed' is \"p3\", not a list"),
])
def test_atomicity_bad_auxiliary_logs_name_file_and_line(tmp_path, sub, text, problem):
    d = run_dir(tmp_path, full(), SENT)
    (d / sub).write_text(text)
    with pytest.raises(CheckError) as info:
        check_logs([d])
    assert problem in str(info.value).replace(str(tmp_path) + "/", "")


def test_check_refuses_to_guess_the_mode_without_run_json(tmp_path, capsys):
    """Issue 31: sent/ logs and no run.json: best effort or reliable? Bad input (exit 2) naming
    --mode, not thousands of false atomicity violations; --mode decides, and overrides run.json."""
    from netstack.onepipe.check import ModeUnknown, main

    logs = {"p2": [e("p2", "p1", 10, 0)], "p3": [e("p3", "p2", 20, 0)]}  # p3 never got p1's seq 0
    d = run_dir(tmp_path / "r", logs, {"p1": [s(0, "p2", "p3")], "p2": [s(0, "p3")]}, run=None)
    with pytest.raises(ModeUnknown, match="--mode best_effort\\|reliable"):
        check_logs([d])
    assert main([str(d)]) == 2
    err = capsys.readouterr().err
    assert "no run.json" in err and "--mode" in err and err.count("\n") == 1
    assert main([str(d), "--mode", "best_effort"]) == 0  # no atomicity promised
    assert "atomicity" not in capsys.readouterr().out
    assert main([str(d), "--mode", "reliable"]) == 1
    assert "broke atomicity: p1 seq 0" in capsys.readouterr().out
    (d / "run.json").write_text(json.dumps({"mode": "best_effort"}))
    assert check_logs([d]).ok and not check_logs([d], mode="reliable").ok
    (d / "run.json").write_text(json.dumps({"mode": "sometimes"}))
    with pytest.raises(CheckError, match="'mode' is \"sometimes\""):
        check_logs([d])
    # the count netstack onepipe run makes, from the same logs (one function, accounting.tally)
    (d / "run.json").write_text(json.dumps({"mode": "best_effort"}))
    a = check_logs([d]).accounting
    assert a is not None and (a["messages_sent"], a["delivered"], a["in_flight_at_end"]) == (3, 2, 1)
