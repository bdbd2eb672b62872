"""The campaign's own error: it could not be run (a failed check is a result, not an error)."""

from __future__ import annotations

from ..errors import NetstackError


class FuzzError(NetstackError, RuntimeError):
    """The campaign could not be run (not a failed check): the message says why."""
