"""netstack.argtypes: every option converter the commands, daemons and host tools share. Good
text gives the value; bad text an ArgumentTypeError that quotes it and says what is wanted."""

from __future__ import annotations

import argparse
import inspect

import pytest

from netstack import argtypes as at


@pytest.mark.parametrize(("convert", "text", "value"), [
    (at.positive_int(), "3", 3),
    (at.positive_float(), "0.5", 0.5),
    (at.non_negative_float(), "0", 0.0),
    (at.non_negative_float(most=1000), "1000", 1000.0),
    (at.finite_float, "-2.5", -2.5),
    (at.probability, "1e-2", 0.01),
    (at.probability, "1", 1.0),
    (at.int_between(0, 7), "7", 7),
    (at.uint32, "0xffffffff", 0xFFFFFFFF),
    (at.uint32, "42", 42),
    (at.int_list("classes", "0 or 0,3"), "0,3", [0, 3]),
    (at.int_list(), "1,,2,", [1, 2]),
    (at.pair(at.probability, "two probabilities"), "0.1,0.2", (0.1, 0.2)),
    (at.name_value(), "cnp_interval_ns=20000000", ("cnp_interval_ns", 20000000)),
    (at.name_value(), " g = 0.5", ("g", 0.5)),
    (at.name_value(), "clamp=True", ("clamp", True)),
    (at.rate_bps, "80Mbit", 80_000_000),
    (at.rate_bps, "1000", 1000),
    (at.size_bytes, "4MB", 4_000_000),
    (at.size_bytes, "256KiB", 256 * 1024),
    (at.size_bytes, "1500", 1500),
    (at.delay_ns, "50ms", 50_000_000),
    (at.delay_ns, "20us", 20_000),
])
def test_good_text_gives_the_value(convert, text, value):
    assert convert(text) == value


@pytest.mark.parametrize(("convert", "text", "said"), [
    (at.positive_int("the count"), "x", "'x' is not a whole number"),
    (at.positive_int("the count"), "0", "'0': the count must be at least 1"),
    (at.positive_float("the time"), "-1", "'-1': the time must be positive (> 0)"),
    (at.positive_float("the time"), "nan", "'nan': the time must be positive (> 0)"),
    (at.positive_float("the time"), "inf", "'inf': the time must be finite"),
    (at.non_negative_float("a time"), "-5", "'-5': a time cannot be negative (or infinite)"),
    (at.non_negative_float("the hold-off", most=1000), "1001", "'1001': the hold-off must be at most 1000"),
    (at.finite_float, "x", "'x' is not a number"),
    (at.finite_float, "-inf", "'-inf' is not a finite number"),
    (at.finite_float, "nan", "'nan' is not a finite number"),
    (at.probability, "x", "'x' is not a number"),
    (at.probability, "1.5", "'1.5' is not a probability in [0, 1]"),
    (at.probability, "nan", "'nan' is not a probability in [0, 1]"),
    (at.int_between(0, 7, "a priority class"), "8", "'8': a priority class must be 0 to 7"),
    (at.int_between(1, 9, "the number of replicas"), "1.5", "'1.5' is not a whole number"),
    (at.tcp_port_between(1024, 65000), "80", "'80' is not a TCP port in 1024..65000"),
    (at.uint32, "-1", "'-1' is not a 32-bit unsigned integer"),
    (at.uint32, "0x1_0000_0000", "is not a 32-bit unsigned integer"),
    (at.uint32, "ten", "'ten' is not an integer"),
    (at.int_list("classes", "0 or 0,3"), "0,x", "'0,x' is not a list of classes such as 0 or 0,3"),
    (at.pair(at.probability, "two probabilities, P_GB,P_BG"), "0.1", "'0.1': give two probabilities, P_GB,P_BG"),
    (at.pair(at.probability, "two probabilities"), "0.1,2", "'2' is not a probability in [0, 1]"),
    (at.name_value("a DcqcnParams field"), "g", "'g' is not NAME=VALUE (a DcqcnParams field)"),
    (at.name_value(), "=1", "'=1' is not NAME=VALUE (a field)"),
    (at.name_value(), "g=lots", "'g=lots': 'lots' is not a number"),
    (at.rate_bps, "fast", "is not a rate"),
    (at.rate_bps, "0", "is not a positive rate"),
    (at.size_bytes, "big", "is not a size in bytes"),
    (at.size_bytes, "0", "is not a positive size"),
    (at.delay_ns, "50", "is not a delay"),
    (at.delay_ns, "0", "'0' must be above 0"),
])
def test_bad_text_is_a_clear_argument_type_error(convert, text, said):
    with pytest.raises(argparse.ArgumentTypeError) as err:
        convert(text)
    assert said in str(err.value)


def test_argparse_says_it_as_a_usage_error(capsys):
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--class", dest="cls", type=at.int_between(0, 7, "a priority class"))
    with pytest.raises(SystemExit) as done:
        p.parse_args(["--class", "9"])
    assert done.value.code == 2
    assert "argument --class: '9': a priority class must be 0 to 7" in capsys.readouterr().err


def test_every_converter_is_covered_here():
    """A converter added to argtypes gets a row above (its good and its bad text)."""
    public = {name for name, obj in vars(at).items()
              if inspect.isfunction(obj) and obj.__module__ == at.__name__ and not name.startswith("_")}
    assert public == set(at.__all__)
    source = inspect.getsource(inspect.getmodule(test_every_converter_is_covered_here))
    assert [name for name in sorted(public) if f"at.{name}" not in source] == []
