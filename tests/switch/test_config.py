"""Configuration validation: every bad value is a ConfigError naming its field."""

from __future__ import annotations

import pytest

from netstack.switch import ConfigError, ImpairmentConfig, PortConfig, Switch, SwitchConfig

from . import make_switch


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"delay_ns": -1}, "delay_ns"),
        ({"rate_bps": -5}, "rate_bps"),
        ({"buffer_bytes": 0}, "buffer_bytes"),
        ({"mtu": 10}, "mtu"),
        ({"lossless": True, "xon_bytes": 10}, "xoff_bytes"),
        ({"lossless": True, "xoff_bytes": 100}, "xon_bytes"),
        ({"lossless": True, "xoff_bytes": 100, "xon_bytes": 100}, "xon_bytes"),
        ({"default_class": 8}, "default_class"),
        ({"class_map": (0, 1, 2)}, "class_map"),
        ({"pfc_classes": (9,)}, "pfc_classes"),
        ({"peer_mac": "zz:00:00:00:00:01"}, "peer_mac"),
        ({"mac": b"\x01\x02"}, "mac"),
        ({"static_macs": ("01:00:5e:00:00:01",)}, "static_macs"),
        ({"fcs": "yes"}, "fcs"),
        ({"ecn_threshold_bytes": -1}, "ecn_threshold_bytes"),
    ],
)
def test_port_field_errors_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        PortConfig("p0", **kwargs)
    assert field in info.value.field
    assert "p0" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"loss": 1.5}, "loss"),
        ({"corrupt": -0.1}, "corrupt"),
        ({"loss": 0.6, "corrupt": 0.6}, "corrupt"),
        ({"p_good_to_bad": 0.1, "p_bad_to_good": 0.0}, "p_bad_to_good"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_impairment_errors(kwargs, field):
    with pytest.raises(ConfigError) as info:
        ImpairmentConfig(**kwargs)
    assert info.value.field == f"impairment.{field}"


def test_switch_level_errors():
    with pytest.raises(ConfigError, match="used twice"):
        SwitchConfig("s", (PortConfig("a"), PortConfig("a")))
    with pytest.raises(ConfigError, match="at least one port"):
        SwitchConfig("s", ())
    with pytest.raises(ConfigError, match="unknown port"):
        SwitchConfig("s", (PortConfig("a"),), {"02:00:00:00:00:01": "b"})
    with pytest.raises(ConfigError, match="also static"):
        SwitchConfig("s", (PortConfig("a", static_macs=("02:00:00:00:00:01",)),
                           PortConfig("b", static_macs=("02:00:00:00:00:01",))))
    with pytest.raises(ConfigError):
        Switch("not a config")  # type: ignore[arg-type]


def test_from_dict_round_trip_and_unknown_keys():
    cfg = SwitchConfig.from_dict({
        "name": "s1",
        "ports": [
            {"name": "a", "rate_bps": 1e9, "fcs": True, "static_macs": ["02:00:00:00:00:01"],
             "impairment": {"corrupt": 0.01, "seed": 7}},
            {"name": "b", "lossless": True, "xoff_bytes": 20000, "xon_bytes": 17000, "peer_mac": "02:00:00:00:00:99"},
        ],
        "static_fdb": {"02:00:00:00:00:02": "b"},
    })
    assert cfg.ports[0].rate_bps == 1_000_000_000 and isinstance(cfg.ports[0].rate_bps, int)
    assert cfg.ports[0].impairment == ImpairmentConfig(corrupt=0.01, seed=7)
    assert cfg.ports[1].pfc_dst == bytes.fromhex("020000000099")
    assert cfg.all_static() == {bytes.fromhex("020000000001"): "a", bytes.fromhex("020000000002"): "b"}
    with pytest.raises(ConfigError) as info:
        PortConfig.from_dict({"name": "a", "rate": 5})
    assert info.value.field == "port a: rate"
    with pytest.raises(ConfigError):
        SwitchConfig.from_dict({"name": "s", "ports": [], "bogus": 1})


def test_runtime_update_validates_and_keeps_old_config_on_error():
    sw = make_switch(2, rate_bps=10**9)
    with pytest.raises(ConfigError) as info:
        sw.update_port("p0", xon_bytes=5, xoff_bytes=2, lossless=True)
    assert "xon_bytes" in info.value.field
    assert sw.ports[0].cfg.lossless is False
    with pytest.raises(ConfigError):
        sw.update_port("p0", name="other")
    with pytest.raises(ConfigError):
        sw.set_rate("nope", 5)
    sw.set_rate("p0", 2 * 10**9)
    sw.set_delay("p0", 5000)
    sw.set_buffer("p0", 4096)
    state = sw.counters()["p0"]
    assert (state["rate_bps"], state["delay_ns"], state["buffer_bytes"]) == (2 * 10**9, 5000, 4096)
    assert sw.config.port("p0").delay_ns == 5000
