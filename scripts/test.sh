#!/usr/bin/env bash
# The whole test suite, in two stages run side by side (after scripts/install.sh; extra arguments go
# to both pytest runs):
#
# 1. every test that builds no namespace and no container, in one pytest-xdist worker
#    (NETSTACK_TEST_WORKERS overrides) under the SCHED_IDLE policy (chrt --idle): the unit and
#    hypothesis tests are CPU-bound and independent, and they only take CPU that stage 2 leaves idle;
# 2. the tests marked netns or docker, one at a time, at normal priority: they run live daemons
#    whose run-validity checks judge the machine's scheduling delay (docs/testbed.md). A SCHED_IDLE
#    task yields a core to any normal task that wakes, so stage 1 beside them adds next to no
#    delay; stage 2 alone keeps about one of two cores busy, and stage 1 runs on the other.
#    Measured on this 2-core VM (2026-12-06): stage 1 alone 142 s on 2 workers, stage 2 alone
#    633 s; side by side, stage 1 on 2 workers slowed stage 2 to 741 s (772 s in all, install
#    included), so stage 1 takes one worker here.
#
# NETSTACK_TEST_SERIAL=1 runs stage 1 (on every core) first, then stage 2: the way to tell whether a
# live test that failed minded the company. Stage 1's output is printed after stage 2's.
# Plain `.venv/bin/python -m pytest -q` runs the same tests in one process, only slower.
# Exit status: 0 when both stages pass (a stage that selects nothing, through the arguments, passes).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
UNIT=(-m "not netns and not docker")
LIVE=(-m "netns or docker")

stage() {
    local rc=0
    "$@" || rc=$?
    [ "$rc" -eq 5 ] && rc=0  # nothing selected
    return "$rc"
}

rc=0
if [ "${NETSTACK_TEST_SERIAL:-0}" = 1 ] || ! chrt --idle 0 true 2>/dev/null; then
    echo "[test] stage 1: unit and property tests on ${NETSTACK_TEST_WORKERS:-every} core(s)" >&2
    stage "$PY" -m pytest -q "${UNIT[@]}" -n "${NETSTACK_TEST_WORKERS:-auto}" "$@" || rc=1
    echo "[test] stage 2: namespace and container tests, one at a time" >&2
    stage "$PY" -m pytest -q "${LIVE[@]}" "$@" || rc=1
    exit "$rc"
fi

log1=$(mktemp /tmp/netstack-test-stage1.XXXXXX)
trap 'kill -- "$pid1" 2>/dev/null; rm -f "$log1"' EXIT
trap 'exit 130' INT TERM
echo "[test] stage 1: unit and property tests, ${NETSTACK_TEST_WORKERS:-1} worker(s), SCHED_IDLE," \
     "beside stage 2 (its output follows stage 2's)" >&2
chrt --idle 0 "$PY" -m pytest -q "${UNIT[@]}" -n "${NETSTACK_TEST_WORKERS:-1}" "$@" >"$log1" 2>&1 &
pid1=$!
echo "[test] stage 2: namespace and container tests, one at a time" >&2
stage "$PY" -m pytest -q "${LIVE[@]}" "$@" || rc=1
rc1=0
wait "$pid1" || rc1=$?
[ "$rc1" -eq 5 ] && rc1=0  # nothing selected
echo "[test] stage 1's output (exit status $rc1):" >&2
cat "$log1"
[ "$rc1" -eq 0 ] || rc=1
exit "$rc"
