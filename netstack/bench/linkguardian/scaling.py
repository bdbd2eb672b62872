"""How ``netstack bench linkguardian`` scales the paper's 100G link down to the emulated one
(docs/architecture.md "Time and scale"), as recorded in the results and printed at the start."""

from __future__ import annotations

from typing import Any

from .params import PAPER_LONG_DELAY_NS, PAPER_ONE_WAY_DELAY_NS, PAPER_RATE_BPS


def scaling(scale: float, frame_size: int) -> dict[str, Any]:
    """Every scale factor of the run (docs/architecture.md "Time and scale": rates / scale,
    times x scale, bytes unchanged)."""
    from ...ethernet import line_time_exact_ns
    from ...linkguardian import LGParams

    p = LGParams.paper(100)
    rate = PAPER_RATE_BPS / scale
    return {
        "scale": scale,
        "paper_rate_bps": PAPER_RATE_BPS,
        "emulated_rate_bps": rate,
        "rule": f"rates / {scale:g}, times x {scale:g}, bytes unchanged (docs/architecture.md 'Time and scale')",
        "ack_no_timeout": {"paper_ns": p.ack_no_timeout_ns, "scaled_ns": p.ack_no_timeout_ns * scale},
        "one_way_delay_virtual": {"paper_ns": PAPER_ONE_WAY_DELAY_NS, "scaled_ns": PAPER_ONE_WAY_DELAY_NS * scale},
        "long_delay_virtual": {"paper_ns": PAPER_LONG_DELAY_NS, "scaled_ns": PAPER_LONG_DELAY_NS * scale},
        "frame_time": {"bytes": frame_size,
                       "paper_ns": line_time_exact_ns(frame_size, PAPER_RATE_BPS),
                       "scaled_ns": line_time_exact_ns(frame_size, rate)},
        "bytes_unchanged": {"pause_threshold": p.pause_threshold_bytes, "resume_threshold": p.resume_bytes,
                            "tx_buffer": p.tx_buffer_limit_bytes, "reorder_buffer": p.reorder_buffer_limit_bytes,
                            "frame": frame_size},
        "not_scaled": "live sections: the kernel's TCP timers (RTO min 200 ms, delayed ACK) and the Python "
                      "daemons' own latency (~ms per hop) run in real time; virtual-time sections scale everything",
    }


def scaling_lines(sc: dict[str, Any]) -> list[str]:
    s = sc["scale"]
    ft = sc["frame_time"]
    b = sc["bytes_unchanged"]
    return [
        f"link rate: paper {sc['paper_rate_bps'] / 1e9:g} Gbit/s -> emulated {sc['emulated_rate_bps'] / 1e6:g} Mbit/s "
        f"(factor 1/{s:g})",
        f"times x {s:g}: ackNoTimeout {sc['ack_no_timeout']['paper_ns'] / 1e3:g} us -> "
        f"{sc['ack_no_timeout']['scaled_ns'] / 1e6:g} ms; {ft['bytes']} B frame time {ft['paper_ns']:.3g} ns -> "
        f"{ft['scaled_ns'] / 1e3:.4g} us; virtual-time one-way delay "
        f"{sc['one_way_delay_virtual']['paper_ns'] / 1e3:g} us -> "
        f"{sc['one_way_delay_virtual']['scaled_ns'] / 1e6:g} ms "
        f"(sensitivity {sc['long_delay_virtual']['paper_ns'] / 1e3:g} us -> "
        f"{sc['long_delay_virtual']['scaled_ns'] / 1e6:g} ms)",
        f"bytes unchanged: pauseThreshold {b['pause_threshold']} B, resumeThreshold {b['resume_threshold']} B, "
        f"Tx buffer {b['tx_buffer']} B, reordering buffer {b['reorder_buffer']} B, frames {b['frame']} B",
        f"not scaled: {sc['not_scaled']}",
    ]
