"""``[defaults]``: the rate, delay, MTU and buffer of every link that does not set its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..classes import DEFAULT_BUFFER_BYTES, DEFAULT_DELAY_NS, DEFAULT_MTU, DEFAULT_RATE_BPS
from ..values import parse_delay, parse_rate, parse_size
from .fields import Errors, as_table, int_field, parsed, unknown_keys

_DEFAULT_KEYS = {"rate", "delay", "mtu", "buffer"}


@dataclass(frozen=True)
class LinkDefaults:
    """``[defaults]``: what a link that does not set its own ``rate``/``delay``/``mtu``/``buffer`` gets."""

    rate: int
    delay: int
    mtu: int
    buffer: int


def parse_defaults(errors: Errors, data: Mapping[str, Any]) -> LinkDefaults:
    """``[defaults]``; an invalid value is reported and the built-in default stands in for it."""
    d_rate, d_delay, d_mtu, d_buffer = DEFAULT_RATE_BPS, DEFAULT_DELAY_NS, DEFAULT_MTU, DEFAULT_BUFFER_BYTES
    defaults = as_table(errors, "defaults", data.get("defaults", {}))
    if defaults is not None:
        unknown_keys(errors, "defaults", defaults, _DEFAULT_KEYS)
        if "rate" in defaults:
            d_rate = parsed(errors, "defaults.rate", defaults["rate"], parse_rate) or d_rate
        if "delay" in defaults:
            v = parsed(errors, "defaults.delay", defaults["delay"], parse_delay)
            d_delay = d_delay if v is None else v
        if "mtu" in defaults:
            d_mtu = int_field(errors, "defaults.mtu", defaults["mtu"], 68, 65535 - 256) or d_mtu
        if "buffer" in defaults:
            d_buffer = parsed(errors, "defaults.buffer", defaults["buffer"], parse_size) or d_buffer
    return LinkDefaults(d_rate, d_delay, d_mtu, d_buffer)
