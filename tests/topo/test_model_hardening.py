"""Hostile input to the topology loader: overflow, inf/nan, huge numbers, trailing newlines,
upper bounds (docs/security.md, "Topology files, the CLI and the control socket"). Every bad
value is a TopologyError naming the field."""

from __future__ import annotations

import math
import textwrap

import pytest

from netstack.runtime import port_options
from netstack.topo import model
from netstack.topo.model import (
    TopologyError,
    loads_topology,
    parse_delay,
    parse_probability,
    parse_rate,
    parse_size,
    topology_from_dict,
)

from .test_model import GOOD, NODES

SW_LINK = 'a = "sw1"\nb = "sw2"'


def _id(value: object) -> str:
    """A short test id (pytest would print all 400 digits of a huge int)."""
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"{'-' if value < 0 else ''}int{value.bit_length()}bit"
    return repr(value)


def _with_link_key(line: str) -> str:
    """GOOD with ``line`` added to the sw1-sw2 link (links[1])."""
    return GOOD.replace(SW_LINK, f"{SW_LINK}\n{line}")


def _errors(text: str) -> list[tuple[str, str]]:
    with pytest.raises(TopologyError) as info:
        loads_topology(textwrap.dedent(text), "test.toml")
    return info.value.errors


def _one_error(text: str) -> tuple[str, str]:
    errors = _errors(text)
    assert len(errors) == 1, errors
    return errors[0]


# --------------------------------------------------------------------------- finding 1: overflow, inf, nan

OVERFLOWING = [
    ("rate-1e400", 'rate = "1e400Mbit"', "links[1].rate"),
    ("rate-1e308-tera", 'rate = "1e308Tbit"', "links[1].rate"),
    ("rate-huge-int", "rate = " + "9" * 400, "links[1].rate"),
    ("rate-inf", "rate = inf", "links[1].rate"),
    ("rate-nan", "rate = nan", "links[1].rate"),
    ("delay-1e400", 'delay = "1e400ms"', "links[1].delay"),
    ("delay-inf", "delay = inf", "links[1].delay"),
    ("delay-nan", "delay = nan", "links[1].delay"),
    ("buffer-1e400", 'buffer = "1e400KB"', "links[1].buffer"),
    ("buffer-huge-int", "buffer = " + "9" * 400, "links[1].buffer"),
    ("buffer-inf", "buffer = inf", "links[1].buffer"),
    ("mtu-huge-int", "mtu = " + "9" * 400, "links[1].mtu"),
    ("headroom-inf", "headroom = inf", "links[1].headroom"),
    ("corrupt-huge-int", "impairment = { corrupt = " + "9" * 400 + " }", "links[1].impairment.corrupt"),
    ("loss-inf", "impairment = { loss = inf }", "links[1].impairment.loss"),
    ("loss-nan", "impairment = { loss = nan }", "links[1].impairment.loss"),
    ("loss-percent-inf", 'impairment = { loss = "1e400%" }', "links[1].impairment.loss"),
    ("seed-huge-int", "impairment = { loss = 0.1, seed = " + "9" * 400 + " }", "links[1].impairment.seed"),
]


@pytest.mark.parametrize(("line", "path"), [c[1:] for c in OVERFLOWING], ids=[c[0] for c in OVERFLOWING])
def test_overflowing_link_values_are_topology_errors(line, path):
    field, problem = _one_error(_with_link_key(line))
    assert field == path
    assert problem


@pytest.mark.parametrize(("section", "line", "path"), [
    ("topology", 'paper_rate = "1e400Gbit"', "topology.paper_rate"),
    ("defaults", 'rate = "1e400Mbit"', "defaults.rate"),
    ("defaults", 'delay = "1e400s"', "defaults.delay"),
    ("defaults", 'buffer = "1e400GiB"', "defaults.buffer"),
    ("defaults", "mtu = " + "9" * 400, "defaults.mtu"),
])
def test_overflowing_top_level_values_are_topology_errors(section, line, path):
    field, _ = _one_error(GOOD + f"\n[{section}]\n{line}\n")
    assert field == path


def test_1e400mbit_message_names_the_field_and_the_bound():
    with pytest.raises(TopologyError) as info:
        loads_topology(_with_link_key('rate = "1e400Mbit"'), "lab.toml")
    assert str(info.value) == ('lab.toml: links[1].rate: "1e400Mbit" is above the maximum rate of 10Tbit '
                               '(10000000000000 bit/s)')


@pytest.mark.parametrize("value", ["1e400Mbit", "1e308Tbit", 10**400, 2**64 * 10**12], ids=_id)
def test_parse_rate_never_overflows(value):
    with pytest.raises(ValueError, match="above the maximum rate"):
        parse_rate(value)


@pytest.mark.parametrize("value", ["1e400ms", "1e300s", "1e400ns"])
def test_parse_delay_never_overflows(value):
    with pytest.raises(ValueError, match="above the maximum delay"):
        parse_delay(value)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), float("-inf")])
def test_parse_delay_rejects_non_finite_numbers(value):
    with pytest.raises(ValueError, match="is not a delay"):
        parse_delay(value)


@pytest.mark.parametrize("value", ["1e400KB", "1e400GiB", 10**400], ids=_id)
def test_parse_size_never_overflows(value):
    with pytest.raises(ValueError, match="above the maximum size"):
        parse_size(value)


@pytest.mark.parametrize("value", [10**400, -(10**400), float("inf"), float("-inf"), "1e400%", "inf%", "nan%"], ids=_id)
def test_parse_probability_never_overflows(value):
    with pytest.raises(ValueError, match="is not a probability"):
        parse_probability(value)


@pytest.mark.parametrize("value", [-(10**5000), 10**5000], ids=["minus-1e5000", "1e5000"])
def test_numbers_too_long_to_print_are_described(value):
    """Python refuses str() of an int of more than 4300 digits; the message must not need it."""
    for parser in (parse_rate, parse_size):
        with pytest.raises(ValueError) as info:
            parser(value)
        assert "16610-bit integer" in str(info.value)
        assert "set_int_max_str_digits" not in str(info.value)


def test_huge_ints_from_a_dict_are_topology_errors():
    """A dict (not TOML) can carry any int; str() of one with >4300 digits raises ValueError."""
    data = {"nodes": [{"name": "sw1", "kind": "switch"}, {"name": "sw2", "kind": "switch"}],
            "links": [{"a": "sw1", "b": "sw2", "mtu": 10**5000, "rate": -(10**5000)}]}
    with pytest.raises(TopologyError) as info:
        topology_from_dict(data, "d")
    assert [p for p, _ in info.value.errors] == ["links[0].rate", "links[0].mtu"]
    assert "set_int_max_str_digits" not in str(info.value)


def test_toml_that_python_cannot_read_is_a_topology_error():
    # tomllib raises a plain ValueError for an integer of more than 4300 digits, and
    # RecursionError for deep nesting: neither is a TOMLDecodeError
    field, problem = _one_error(_with_link_key("mtu = " + "9" * 5000))
    assert field == "" and problem.startswith("not valid TOML")
    field, problem = _one_error(GOOD + "\nx = " + "[" * 100_000)
    assert field == "" and problem.startswith("not valid TOML")


@pytest.mark.parametrize(("key", "value"), [("xoff", "1e400KB"), ("xon", "1e400MiB"), ("ecn_threshold", 10**400),
                                            ("xoff", "17GiB")], ids=_id)
def test_switch_port_sizes_never_overflow(key, value):
    with pytest.raises(TopologyError) as info:
        port_options("sw1-sw2", {key: value})
    assert info.value.errors[0][0] == f"links[sw1-sw2].features.switch.{key}"
    assert "above the maximum size" in info.value.errors[0][1]


# --------------------------------------------------------------------------- finding 2: trailing newlines

TRAILING_NEWLINE = [
    ("node-name", GOOD.replace('name = "sw2"', 'name = "sw2\\n"'), "nodes[3].name", "is not a node name"),
    ("link-name", GOOD.replace('a = "h1"', 'name = "h1-sw1\\n"\na = "h1"'), "links[0].name", "is not a link name"),
    ("ifname", GOOD.replace('a = "h1"', 'a = "h1"\na_ifname = "eth0\\n"'), "links[0].a_ifname",
     "is not an interface name"),
    ("prefix", GOOD + '\n[topology]\nprefix = "ns\\n"\n', "topology.prefix", "is not a prefix"),
]


@pytest.mark.parametrize(("text", "path", "words"), [c[1:] for c in TRAILING_NEWLINE],
                         ids=[c[0] for c in TRAILING_NEWLINE])
def test_names_ending_in_a_newline_are_rejected(text, path, words):
    errors = _errors(text)
    assert any(p == path and words in problem for p, problem in errors), errors
    problem = next(problem for p, problem in errors if p == path)
    assert "\n" not in problem and '\\n"' in problem  # the newline is shown escaped: one line per problem


def test_validate_prefix_rejects_trailing_newline():
    with pytest.raises(TopologyError, match="is not a prefix"):
        model.validate_prefix("ns\n")


@pytest.mark.parametrize("name", ["NODE_NAME_RE", "PREFIX_RE", "LINK_NAME_RE", "IFNAME_RE", "MAC_RE",
                                  "_RATE_RE", "_DELAY_RE", "_SIZE_RE"])
def test_validation_regexes_match_the_whole_text(name):
    """No validation regex may accept a trailing newline, whichever way it is called. (The names'
    patterns are in netstack/topo/validate/fields.py, the quantities' in netstack/topo/values.py.)"""
    from netstack.topo import values
    from netstack.topo.validate import fields

    pattern = getattr(fields if hasattr(fields, name) else values, name)
    good = {"NODE_NAME_RE": "h1", "PREFIX_RE": "ns", "LINK_NAME_RE": "a-b", "IFNAME_RE": "eth0",
            "MAC_RE": "02:00:00:00:00:01", "_RATE_RE": "1Mbit", "_DELAY_RE": "1ms", "_SIZE_RE": "1KB"}[name]
    assert pattern.fullmatch(good)
    assert not pattern.fullmatch(good + "\n")
    assert not pattern.match(good + "\n"), f"{name} ends in '$', which matches before a trailing newline"


# --------------------------------------------------------------------------- finding 3: upper bounds


def test_bounds_are_the_documented_ones():
    assert model.MAX_RATE_BPS == 10**13
    assert model.MAX_DELAY_NS == 3600 * 10**9
    assert model.MAX_SIZE_BYTES == 16 * 2**30
    assert model.MAX_IN_FLIGHT_BYTES == model.MAX_SIZE_BYTES


def test_bounds_themselves_are_accepted():
    assert parse_rate("10Tbit") == model.MAX_RATE_BPS
    assert parse_rate(model.MAX_RATE_BPS) == model.MAX_RATE_BPS
    assert parse_delay("3600s") == model.MAX_DELAY_NS
    assert parse_size("16GiB") == model.MAX_SIZE_BYTES
    assert parse_size(model.MAX_SIZE_BYTES) == model.MAX_SIZE_BYTES


@pytest.mark.parametrize(("parser", "value", "message"), [
    (parse_rate, "10.001Tbit", '"10.001Tbit" is above the maximum rate of 10Tbit (10000000000000 bit/s)'),
    (parse_rate, 10**13 + 1, "10000000000001 is above the maximum rate of 10Tbit (10000000000000 bit/s)"),
    (parse_delay, "3601s", '"3601s" is above the maximum delay of 1 hour (3600s)'),
    (parse_delay, "3600000001us", '"3600000001us" is above the maximum delay of 1 hour (3600s)'),
    (parse_size, "17GiB", '"17GiB" is above the maximum size of 16GiB (17179869184 bytes)'),
    (parse_size, 16 * 2**30 + 1, "17179869185 is above the maximum size of 16GiB (17179869184 bytes)"),
])
def test_values_above_the_bounds_are_refused_with_the_bound(parser, value, message):
    with pytest.raises(ValueError) as info:
        parser(value)
    assert str(info.value) == message


@pytest.mark.parametrize(("line", "path", "words"), [
    ('rate = "20Tbit"', "links[1].rate", "maximum rate of 10Tbit"),
    ('delay = "4000000ms"', "links[1].delay", "maximum delay of 1 hour"),
    ('buffer = "32GiB"', "links[1].buffer", "maximum size of 16GiB"),
])
def test_loader_reports_the_bound_with_the_field(line, path, words):
    field, problem = _one_error(_with_link_key(line))
    assert field == path and words in problem


def test_bandwidth_delay_product_is_bounded():
    """A sending switch holds every frame in flight for ``delay``: rate x delay / 8 bytes."""
    field, problem = _one_error(_with_link_key('rate = "1Tbit"\ndelay = "1000s"'))
    assert field == "links[1].delay"
    assert problem == ("1000s at 1000000000000 bit/s keeps 125000000000000 bytes in flight (rate x delay / 8), "
                       "above the limit of 16GiB (17179869184 bytes)")
    # the defaults count too, and a link just inside the limit loads
    field, _ = _one_error(GOOD.replace(SW_LINK, f'{SW_LINK}\ndelay = "3600s"'))
    assert field == "links[1].delay"
    t = loads_topology(_with_link_key('rate = "1Gbit"\ndelay = "137s"'))
    assert t.links[1].rate_bps * t.links[1].delay_ns // (8 * 10**9) <= model.MAX_IN_FLIGHT_BYTES


def test_every_loaded_value_stays_finite_and_bounded():
    t = loads_topology(NODES + '\n[[links]]\na = "sw1"\nb = "sw2"\nrate = "10Tbit"\ndelay = "10ms"\n'
                       'buffer = "16GiB"\n[[links]]\na = "h1"\nb = "sw1"\n[[links]]\na = "h2"\nb = "sw2"\n')
    link = t.links[0]
    assert (link.rate_bps, link.delay_ns, link.buffer_bytes) == (model.MAX_RATE_BPS, 10**7, model.MAX_SIZE_BYTES)
    assert math.isfinite(8e9 / link.rate_bps)
