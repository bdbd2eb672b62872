"""The controller core's cost per datagram (netstack/bench/onepipe/ctlcost.py): the kernel's UDP
path on this process's own loopback, a baseline loop subtracted. Behaviour only: the numbers are
positive whole ns and the result says how it was measured; a bad request is refused."""

from __future__ import annotations

import pytest

from netstack.bench.onepipe import ctlcost


def test_a_measurement_gives_the_calls_and_half_their_sum_per_datagram() -> None:
    m = ctlcost.measure(datagrams=200, batches=3)
    assert (m["datagrams"], m["batches"]) == (200, 3)
    assert all(isinstance(m[k], int) and m[k] >= 0 for k in ("sendto_ns", "recv_ns", "baseline_ns"))
    both = m["sendto_ns"] + m["recv_ns"] - 2 * m["baseline_ns"]  # (each rounded: within 2 ns of the sum)
    assert m["per_datagram_ns"] >= 1 and abs(2 * m["per_datagram_ns"] - both) <= 4
    assert f"{m['per_datagram_ns'] / 1e3:.2f} us" in ctlcost.summary(m)


@pytest.mark.parametrize(("datagrams", "batches"), [(0, 3), (10, 0), (-1, 1)])
def test_a_bad_size_is_refused(datagrams: int, batches: int) -> None:
    with pytest.raises(ValueError, match="at least one"):
        ctlcost.measure(datagrams=datagrams, batches=batches)
