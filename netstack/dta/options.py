"""``dta_enable``'s options, wherever they come from: the control socket (``netstack dta
enable``, :mod:`.control`), a topology file (``[links.features.<end>] dta``, :mod:`.topology`)
or a virtual-time run (:mod:`.simhosts`): their names, and how they become
:class:`~netstack.dta.translator.TranslatorConfig` keywords."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Switch-side options of ``dta_enable`` -> (TranslatorConfig field, scale to ns or None).
_MS = 1_000_000  # ms -> ns
TRANSLATOR_OPTIONS = {
    "grace_reports": ("grace_reports", None),
    "grace_ms": ("grace_ns", _MS),
    "append_flush_ms": ("append_flush_ns", _MS),
    "max_redundancy": ("max_redundancy", None),
    "ack_every": ("ack_every", None),
    "track_seqnum": ("track_seqnum", None),
    "sketch_nack_holdoff_ms": ("sketch_nack_holdoff_ns", _MS),
    "udp_sport": ("udp_sport", None),
    "nak_window_ms": ("nak_window_ns", _MS),
    "nak_window_slack": ("nak_window_slack", None),
    "window": ("window", None),
    "window_timeout_ms": ("window_timeout_ns", _MS),
    "postcard_flush_ms": ("postcard_flush_ns", _MS),
}


def translator_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """``dta_enable``'s options (:data:`TRANSLATOR_OPTIONS`) as
    :class:`~netstack.dta.translator.TranslatorConfig` keywords: times in ms made ns, ``window``
    :data:`~netstack.dta.requester.DEFAULT_WINDOW` unless given (the engine's own default is no
    window), and a time-based grace period replacing the default count. ValueError names a time
    that is not a non-negative number or null."""
    from .requester import DEFAULT_WINDOW

    kwargs: dict[str, Any] = {}
    for key, (field, scale) in TRANSLATOR_OPTIONS.items():
        if key in options:
            value = options[key]
            if scale is not None and value is not None:
                if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                    raise ValueError(f"{key}={value!r} must be a non-negative number or null")
                value = round(value * scale)
            kwargs[field] = value
    kwargs.setdefault("window", DEFAULT_WINDOW)
    if "grace_ns" in kwargs and "grace_reports" not in kwargs:
        kwargs["grace_reports"] = None
    return kwargs


__all__ = ["TRANSLATOR_OPTIONS", "translator_kwargs"]
