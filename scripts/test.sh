#!/usr/bin/env bash
# The whole test suite, in two stages (after scripts/install.sh; extra arguments go to both pytest runs):
#
# 1. every test that builds no namespace and no container, on all cores (pytest-xdist, -n auto;
#    NETSTACK_TEST_WORKERS overrides): the unit and hypothesis tests are CPU-bound and independent;
# 2. the tests marked netns or docker, one at a time and alone: they run live daemons whose run-validity
#    checks judge the machine's scheduling delay (docs/testbed.md), so nothing of ours runs beside them.
#
# Plain `.venv/bin/python -m pytest -q` runs the same tests in one process, only slower.
# Exit status: 0 when both stages pass (a stage that selects nothing, through the arguments, passes).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

stage() {
    local rc=0
    "$PY" -m pytest -q "$@" || rc=$?
    [ "$rc" -eq 5 ] && rc=0  # nothing selected
    return "$rc"
}

rc=0
echo "[test] stage 1: unit and property tests on ${NETSTACK_TEST_WORKERS:-every} core(s)" >&2
stage -m "not netns and not docker" -n "${NETSTACK_TEST_WORKERS:-auto}" "$@" || rc=1
echo "[test] stage 2: namespace and container tests, one at a time" >&2
stage -m "netns or docker" "$@" || rc=1
exit "$rc"
