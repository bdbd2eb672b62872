"""Header records as tuples: a trusted construction path for decoders, validation at the edges.

Every record of the fast codecs is a ``tuple`` subclass whose items are the wire fields (often
exactly what ``Struct.unpack_from`` returns), read by name through :func:`field` (the C getter
``NamedTuple`` uses) or, for bit fields kept packed in their byte, through properties. Two ways
in:

- the public constructor (``LGData(seq_no=..., era=...)``) validates every argument and raises
  :class:`~headers.errors.HeaderError`, as the frozen dataclasses did: that is where values from
  code, configuration or users enter;
- a decoder, having checked what the bytes can get wrong (length, type bits, reserved
  encodings), builds the record with :func:`new` (``tuple.__new__``) straight from the struct's
  tuple, without re-checking that an integer out of a 16-bit struct code fits in 16 bits.

The data path thus pays for what it needs (issue 19: a decode costs a small multiple of a bare
``struct.unpack_from``). :func:`record` gives each class what a dataclass gave: equality only
between records of the same class, a hash, a repr by the public field names (``FIELDS``),
pickling through the public constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

try:
    from collections import _tuplegetter  # type: ignore[attr-defined]  # what NamedTuple fields are
except ImportError:  # pragma: no cover - not CPython
    def _tuplegetter(index: int, doc: str) -> Any:
        return property(itemgetter(index), doc=doc)

R = TypeVar("R")
C = TypeVar("C", bound=type)

if TYPE_CHECKING:
    def new(cls: type[R], values: Iterable[Any], /) -> R:
        """Build ``cls`` from its tuple layout without validation (decoders only)."""
        ...
else:
    new = tuple.__new__


def field(index: int, doc: str = "") -> Any:
    """A read-only attribute reading item ``index`` of the record's tuple.

    Declared as ``seq_no: int = field(1)`` so type checkers see an ``int`` attribute. Not a
    ``NamedTuple``: its ``_fields`` would be the tuple layout, which is not the constructor's
    argument list (introspection such as hypothesis' ``builds`` reads the signature instead).
    """
    return _tuplegetter(index, doc)


def record(cls: C) -> C:
    """Class decorator for a tuple-based header record with public field names ``cls.FIELDS``.

    Tuple equality would make an ``LGData`` equal to any tuple (or other record) holding the
    same numbers; records compare equal only to records of their own class.
    """
    names: tuple[str, ...] = cls.FIELDS  # type: ignore[attr-defined]
    tuple_eq: Callable[[Any, object], bool] = tuple.__eq__

    def __eq__(self: object, other: object) -> bool:
        return self.__class__ is other.__class__ and tuple_eq(self, other)

    def __ne__(self: object, other: object) -> bool:
        return not (self.__class__ is other.__class__ and tuple_eq(self, other))

    def __repr__(self: object) -> str:
        return f"{cls.__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def __reduce__(self: object) -> tuple[type, tuple[object, ...]]:
        # the tuple layout is not the constructor's argument list: rebuild from public fields
        return cls, tuple(getattr(self, n) for n in names)

    methods: dict[str, object] = {"__eq__": __eq__, "__ne__": __ne__, "__hash__": tuple.__hash__,
                                   "__repr__": __repr__, "__reduce__": __reduce__}
    for name, fn in methods.items():
        setattr(cls, name, fn)
    return cls


def field_values(rec: object) -> dict[str, Any]:
    """The public fields of a record, by name, in declaration order (``dataclasses.fields`` for
    tuple-based records; works on dataclass records too)."""
    names = getattr(rec, "FIELDS", None)
    if names is None:
        from dataclasses import fields

        return {f.name: getattr(rec, f.name) for f in fields(rec)}  # type: ignore[arg-type]
    return {n: getattr(rec, n) for n in names}


def replace(rec: R, **changes: Any) -> R:
    """A copy of ``rec`` with some public fields changed, through the validating constructor."""
    return type(rec)(**{**field_values(rec), **changes})
