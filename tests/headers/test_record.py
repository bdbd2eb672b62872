"""Tuple-based header records (headers/record.py): what the frozen dataclasses gave, kept."""

from __future__ import annotations

import copy
import pickle

import pytest

from headers.dta import DTABase, DTANack, KeyWrite, decode_report, encode_report
from headers.errors import HeaderError
from headers.frame import describe
from headers.linkguardian import LGData, LGLeadingAck, decode_tag
from headers.onepipe import OnePipeHeader, OnePipeOpcode
from headers.record import field_values, replace
from headers.roce import AETH, BTH
from headers.tcsack import TcsAck, TcsData

RECORDS = [
    LGData(40000, 0x0800, era=1), LGLeadingAck(7, piggybacked=1), TcsData(3, 9, 5, 1),
    TcsAck(1, 2, 3, blocks=((5, 6), (8, 9))), OnePipeHeader(1 << 47, 5, 6, 7, OnePipeOpcode.BEACON),
    BTH(opcode=10, migreq=1, dqpn=0x123, psn=0xABCD), AETH(0x60, 42), DTABase(1, 17, 0, 1, 3),
    DTANack.for_sketch(4, 7, 1, 6), KeyWrite(2, 0x0A000001, (1, 2, 3)),
]


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: type(r).__name__)
def test_record_semantics(rec: object) -> None:
    cls = type(rec)
    fields = field_values(rec)
    assert list(fields) == list(cls.FIELDS)  # type: ignore[attr-defined]
    again = cls(**fields)
    assert again == rec and hash(again) == hash(rec)
    assert (again != rec) is False
    assert repr(rec) == f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in fields.items())})"
    assert pickle.loads(pickle.dumps(rec)) == rec and copy.deepcopy(rec) == rec
    assert rec != tuple(rec)  # type: ignore[call-overload]  # equal only to records of its class
    assert describe(rec).startswith(cls.__name__ + "(")
    name = cls.FIELDS[0]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        setattr(rec, name, 0)
    with pytest.raises(AttributeError):
        rec.not_a_field = 1  # type: ignore[attr-defined]


def test_classes_with_the_same_numbers_differ() -> None:
    # same wire numbers apart from the type bits: never equal (tuple equality would say so)
    data, ack = LGData(5, 0, 0, 0, 0, 0, 0), LGLeadingAck(5, 0)
    assert data != ack and data[1:] == ack[1:]


def test_public_constructor_validates_decoder_trusts_only_the_struct() -> None:
    with pytest.raises(HeaderError):
        LGData(seq_no=1 << 16)
    with pytest.raises(HeaderError):
        BTH(psn=1 << 24)
    rec = decode_tag(LGData(65535, 0xFFFF, 1, 1, 1, 1, 1).to_bytes())
    assert rec == LGData(65535, 0xFFFF, 1, 1, 1, 1, 1)


def test_replace_goes_through_the_constructor() -> None:
    rec = OnePipeHeader(10, 20, 30, 1, OnePipeOpcode.DATA)
    assert replace(rec, be_barrier=25).be_barrier == 25
    with pytest.raises(HeaderError):
        replace(rec, psn=1 << 32)


def test_dta_base_records_are_shared_and_immutable() -> None:
    raw = encode_report(DTABase(1, 9), KeyWrite(1, 2, (3,)))
    (b1, p1), (b2, p2) = decode_report(raw), decode_report(bytearray(raw))
    assert b1 is b2 and b1 == DTABase(1, 9) and p1 == p2 == KeyWrite(1, 2, (3,))
