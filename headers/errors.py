"""The one exception every decoder and encoder in :mod:`headers` raises."""

from __future__ import annotations


class HeaderError(ValueError):
    """Malformed or out-of-range header data.

    ``header`` names the header, ``problem`` says what was wrong and ``offset``
    (when known) is the byte offset in the buffer handed to the decoder.
    Decoders raise this and nothing else: a daemon catches it, counts the frame as
    malformed and drops it (docs/architecture.md "Engines are sans-IO": bad input gets a counted drop).
    """

    def __init__(self, header: str, problem: str, offset: int | None = None) -> None:
        self.header = header
        self.problem = problem
        self.offset = offset
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{header}: {problem}{where}")


def need(header: str, data: bytes | bytearray | memoryview, offset: int, size: int) -> None:
    """Raise unless ``size`` bytes are available at ``offset``."""
    if offset < 0 or len(data) - offset < size:
        raise HeaderError(header, f"truncated: need {size} bytes, have {max(0, len(data) - offset)}", offset)


def check_bits(header: str, field: str, value: int, bits: int) -> None:
    """Raise unless ``value`` fits in an unsigned field of ``bits`` bits."""
    if not isinstance(value, int) or (isinstance(value, bool) and bits != 1):
        raise HeaderError(header, f"{field} must be an int, got {type(value).__name__}")
    if value < 0 or value >> bits:
        raise HeaderError(header, f"{field}={value} does not fit in {bits} bits")
