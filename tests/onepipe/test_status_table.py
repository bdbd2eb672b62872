"""``netstack onepipe status``'s per-port table: the auth column says what the keys refused, per reason."""

from __future__ import annotations

from netstack.commands.onepipe import STATUS_COLS, port_row
from netstack.onepipe.auth import AuthCounters


def test_the_auth_column_counts_refusals_per_reason_and_is_a_dash_without_keys():
    a = AuthCounters(sealed=5, ok=7)
    for reason in ("forged", "forged", "replayed"):
        a.refuse(reason)
    row = port_row({"counters": {"rx": 10}, "auth": a.to_dict()})
    assert len(row) == len(STATUS_COLS)
    assert row[STATUS_COLS.index("auth_refused")] == "3 (forged 2, replayed 1)"
    assert port_row({"counters": {}, "auth": AuthCounters(ok=4).to_dict()})[-1] == 0
    assert port_row({"counters": {}})[-1] == "-"
