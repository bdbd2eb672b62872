"""Prometheus samples of a daemon's status (netstack/io/metrics.py), without a daemon."""

from __future__ import annotations

from netstack.io.metrics import render, samples


def test_a_switchs_ecmp_counts_are_one_metric_labelled_by_destination_and_port():
    status = {"ports": {"p-h1": {"rx_frames": 3}},
              "ecmp": {"h3": {"p-spine1": 5, "p-spine2": 7}, "h4": {"p-spine1": 0, "p-spine2": 1}}}
    got = sorted((name, tuple(sorted(labels.items())), value)
                 for name, labels, value in samples(status, {"node": "l1"}))
    assert got == [
        ("netstack_ecmp_frames", (("dst", "h3"), ("node", "l1"), ("port", "p-spine1")), 5.0),
        ("netstack_ecmp_frames", (("dst", "h3"), ("node", "l1"), ("port", "p-spine2")), 7.0),
        ("netstack_ecmp_frames", (("dst", "h4"), ("node", "l1"), ("port", "p-spine1")), 0.0),
        ("netstack_ecmp_frames", (("dst", "h4"), ("node", "l1"), ("port", "p-spine2")), 1.0),
        ("netstack_rx_frames", (("node", "l1"), ("port", "p-h1")), 3.0),
    ]
    assert b'netstack_ecmp_frames{dst="h3",node="l1",port="p-spine2"} 7.0' in render(status, {"node": "l1"})
    assert list(samples({"ecmp": {}}, {})) == []
