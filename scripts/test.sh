#!/usr/bin/env bash
# The whole test suite (after scripts/install.sh; extra arguments go to every pytest run):
#
# 1. every test that builds no namespace and no container, on every core (pytest-xdist, -n auto;
#    NETSTACK_TEST_WORKERS overrides), under the SCHED_IDLE policy (chrt --idle), *beside* stage 2:
#    the unit and hypothesis tests are CPU-bound and independent, and a SCHED_IDLE task yields its
#    core to any normal task that wakes, so they only take the CPU the live tests leave idle;
# 2. the tests marked netns (and not docker), one at a time, at normal priority: they run live
#    daemons whose run-validity checks judge the machine's scheduling delay (docs/testbed.md);
#    their daemons are their children, so stage 1 yields to them;
# 3. once stage 1 is done, the tests marked docker, one at a time: the containers' processes are
#    not our children, and a container runtime may schedule them in a cgroup of its own, where
#    SCHED_IDLE tasks outside it are no longer last in line, so nothing of ours runs beside them.
#
# Measured on this 2-core VM (2026-12-06): stage 1 alone 142 s on 2 workers, the live tests alone
# 633 s; side by side 772 s in all, install included, against 808-874 s one after the other.
# NETSTACK_TEST_SERIAL=1 runs them one after the other (the way to tell whether a live test that
# failed minded the company). Stage 1's output is printed after stage 2's.
# Plain `.venv/bin/python -m pytest -q` runs the same tests in one process, only slower.
#
# Compiled bytecode is kept, outside the tree: in $NETSTACK_TEST_PYCACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/netstack/pycache; "off" leaves the environment alone), through
# PYTHONPYCACHEPREFIX, with PYTHONDONTWRITEBYTECODE lifted for the run. This VM sets
# PYTHONDONTWRITEBYTECODE for every process and scripts/install.sh installs with --no-compile, so
# every interpreter the tests start (each switch daemon, tool and CLI of a live test; each xdist
# worker) compiled all it imported from source: a switch daemon's imports cost 0.5 s of CPU instead
# of 0.2 (pyroute2 alone 0.3 s), and every collection 17 s instead of 5 (pytest rewriting the tests'
# asserts). Measured 2026-12-07, a fresh (cold) cache: stage 2 alone 685 s -> 575 s; stages 1 and 2
# side by side 510 s and 716 s -> 287 s and 563 s (with the suite's trims of that day). The cache
# checks each source's mtime and size, as __pycache__ does: edits are never served stale code.
# Exit status: 0 when every stage passes (a stage that selects nothing, through the arguments, passes).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PYCACHE=${NETSTACK_TEST_PYCACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/netstack/pycache}
if [ "$PYCACHE" != off ]; then
    export PYTHONPYCACHEPREFIX="$PYCACHE"
    unset PYTHONDONTWRITEBYTECODE
fi
UNIT=(-m "not netns and not docker" -n "${NETSTACK_TEST_WORKERS:-auto}")
NETNS=(-m "netns and not docker")
DOCKER=(-m "docker")

stage() {
    local rc=0
    "$@" || rc=$?
    [ "$rc" -eq 5 ] && rc=0  # nothing selected
    return "$rc"
}

rc=0
if [ "${NETSTACK_TEST_SERIAL:-0}" = 1 ] || ! chrt --idle 0 true 2>/dev/null; then
    echo "[test] stage 1: unit and property tests on ${NETSTACK_TEST_WORKERS:-every} core(s)" >&2
    stage "$PY" -m pytest -q "${UNIT[@]}" "$@" || rc=1
    echo "[test] stage 2: namespace tests, one at a time" >&2
    stage "$PY" -m pytest -q "${NETNS[@]}" "$@" || rc=1
    echo "[test] stage 3: container tests, one at a time" >&2
    stage "$PY" -m pytest -q "${DOCKER[@]}" "$@" || rc=1
    exit "$rc"
fi

log1=$(mktemp /tmp/netstack-test-stage1.XXXXXX)
pid1=
trap '[ -n "$pid1" ] && kill "$pid1" 2>/dev/null; rm -f "$log1"' EXIT
trap 'exit 130' INT TERM
echo "[test] stage 1: unit and property tests on ${NETSTACK_TEST_WORKERS:-every} core(s), SCHED_IDLE," \
     "beside stage 2 (its output follows stage 2's)" >&2
chrt --idle 0 "$PY" -m pytest -q "${UNIT[@]}" "$@" >"$log1" 2>&1 &
pid1=$!
echo "[test] stage 2: namespace tests, one at a time" >&2
stage "$PY" -m pytest -q "${NETNS[@]}" "$@" || rc=1
rc1=0
wait "$pid1" || rc1=$?
pid1=
[ "$rc1" -eq 5 ] && rc1=0  # nothing selected
echo "[test] stage 1's output (exit status $rc1):" >&2
cat "$log1"
[ "$rc1" -eq 0 ] || rc=1
echo "[test] stage 3: container tests, one at a time, alone" >&2
stage "$PY" -m pytest -q "${DOCKER[@]}" "$@" || rc=1
exit "$rc"
