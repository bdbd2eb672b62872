"""Key files: creation, permissions, rotation, parsing hostile files, derivation, and ``netstack keys``."""

import base64
import hashlib
import hmac
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.auth.keys import (
    PURPOSE_DTA_REPORTER,
    PURPOSE_LG_LINK,
    PURPOSE_ONEPIPE_CONTROLLER,
    PURPOSE_ONEPIPE_DOMAIN,
    DerivedKeys,
    KeyFileError,
    KeyRing,
    describe,
    generate,
    load,
    parse,
    rotate,
)
from netstack.cli import main


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def secrets_in(path):
    return [k["secret"] for k in json.loads(Path(path).read_text())["keys"]]


def write_keys(path, entries, **top):
    doc = {"format": "netstack-keys", "version": 1, "keys": entries} | top
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    os.chmod(path, 0o600)
    return path


def entry(kid, not_after=None, secret=None, created=1.0):
    return {"id": kid, "secret": secret or base64.b64encode(bytes([kid]) * 32).decode(), "created": created,
            "not_after": not_after}


# --- generate and load ----------------------------------------------------------------------


def test_generate_creates_a_private_file_and_refuses_to_overwrite(tmp_path):
    path = tmp_path / "keys.json"
    assert generate(path, now=123.5) == 1
    assert mode(path) == 0o600
    ring = load(path)
    assert ring.current == 1 and list(ring.keys) == [1] and len(ring.keys[1]) == 32
    assert ring.not_after == {1: None} and ring.created == {1: 123.5} and ring.source == str(path)
    before = path.read_bytes()
    with pytest.raises(KeyFileError, match="already exists"):
        generate(path)
    assert path.read_bytes() == before
    assert generate(path, force=True) == 1
    assert mode(path) == 0o600 and path.read_bytes() != before
    assert load(path).keys[1] != ring.keys[1]
    assert sorted(os.listdir(tmp_path)) == ["keys.json"]  # no temp file left behind


def test_generate_never_follows_a_planted_symlink(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    (tmp_path / "keys.json").symlink_to(target)
    with pytest.raises(KeyFileError, match="already exists"):
        generate(tmp_path / "keys.json")
    assert target.read_text() == "precious"


def test_secrets_are_random_and_hidden_from_repr(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    generate(a)
    generate(b)
    assert secrets_in(a) != secrets_in(b)
    ring = load(a)
    derived = ring.derive(PURPOSE_LG_LINK, "sw1-sw2", 0)
    for text in (repr(ring), str(ring), repr(derived)):
        assert secrets_in(a)[0] not in text and repr(ring.keys[1]) not in text
        assert repr(derived.keys[1]) not in text


@pytest.mark.parametrize("bad_mode", [0o644, 0o640, 0o604, 0o660, 0o602])
def test_load_refuses_a_file_others_can_read_or_write(tmp_path, bad_mode):
    path = tmp_path / "keys.json"
    generate(path)
    os.chmod(path, bad_mode)
    with pytest.raises(KeyFileError, match="chmod 600") as exc:
        load(path)
    assert str(path) in str(exc.value)


def test_load_refuses_missing_and_directory_and_checks_a_symlinks_target(tmp_path):
    with pytest.raises(KeyFileError, match="no such key file"):
        load(tmp_path / "missing.json")
    with pytest.raises(KeyFileError, match="not a regular file"):
        load(tmp_path)
    os.mkfifo(tmp_path / "fifo", 0o600)
    with pytest.raises(KeyFileError, match="not a regular file"):
        load(tmp_path / "fifo")  # and does not wait for a writer
    generate(tmp_path / "real.json")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert load(tmp_path / "link.json").keys == load(tmp_path / "real.json").keys
    os.chmod(tmp_path / "real.json", 0o644)  # the link's own mode (0777) is not what counts
    with pytest.raises(KeyFileError, match="chmod 600"):
        load(tmp_path / "link.json")


# --- rotate ---------------------------------------------------------------------------------


def test_rotate_keeps_the_old_key_for_the_overlap_then_drops_it(tmp_path):
    path = tmp_path / "keys.json"
    generate(path, now=1000.0)
    old_secret = load(path).keys[1]
    assert rotate(path, overlap_s=60, now=2000.0) == 2
    assert mode(path) == 0o600
    ring = load(path)
    assert ring.current == 2 and ring.keys[1] == old_secret and ring.not_after == {1: 2060.0, 2: None}
    assert ring.created == {1: 1000.0, 2: 2000.0}
    assert ring.valid_ids(2000.0) == [1, 2] and ring.valid_ids(2060.0) == [1, 2]
    assert ring.valid_ids(2060.5) == [2]
    assert sorted(ring.derive(PURPOSE_LG_LINK, "l", 2030.0).keys) == [1, 2]
    assert sorted(ring.derive(PURPOSE_LG_LINK, "l", 2061.0).keys) == [2]
    assert ring.derive(PURPOSE_LG_LINK, "l", 2030.0).current == 2
    # the next rotation drops key 1 (expired) and keeps key 2 for its overlap
    assert rotate(path, overlap_s=0, now=2100.0) == 3
    ring = load(path)
    assert sorted(ring.keys) == [2, 3] and ring.not_after == {2: 2100.0, 3: None} and ring.current == 3
    assert sorted(os.listdir(tmp_path)) == ["keys.json"]


def test_rotate_wraps_past_255_and_skips_ids_still_present(tmp_path):
    path = write_keys(tmp_path / "k", [entry(1, not_after=5000.0), entry(2, not_after=10.0), entry(255)])
    # id 1 is still valid (kept), 2 has expired (dropped): the id after 255 is 2
    assert rotate(path, overlap_s=1, now=100.0) == 2
    ring = load(path)
    assert sorted(ring.keys) == [1, 2, 255] and ring.current == 2
    assert ring.keys[2] != base64.b64decode(entry(2)["secret"])  # a fresh secret, not the dropped one


def test_rotate_refuses_when_every_id_is_in_use(tmp_path):
    path = write_keys(tmp_path / "k", [entry(i, not_after=9e9) for i in range(1, 255)] + [entry(255)])
    before = Path(path).read_bytes()
    with pytest.raises(KeyFileError, match="in use"):
        rotate(path, overlap_s=1, now=100.0)
    assert Path(path).read_bytes() == before


@pytest.mark.parametrize("overlap", [-1.0, float("nan"), float("inf")])
def test_rotate_refuses_a_bad_overlap(tmp_path, overlap):
    generate(tmp_path / "k")
    with pytest.raises(KeyFileError, match="overlap"):
        rotate(tmp_path / "k", overlap_s=overlap, now=1.0)


def test_rotate_refuses_a_readable_file(tmp_path):
    generate(tmp_path / "k")
    os.chmod(tmp_path / "k", 0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        rotate(tmp_path / "k", overlap_s=1, now=1.0)


# --- derive ---------------------------------------------------------------------------------


def hkdf_sha256(ikm: bytes, info: bytes, length: int = 16) -> bytes:
    """RFC 5869 with the standard library only, as an independent check of the derivation."""
    prk = hmac.new(b"\0" * 32, ikm, hashlib.sha256).digest()  # salt=None means HashLen zeros
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()[:length]


def test_derive_is_hkdf_sha256_with_the_documented_info(tmp_path):
    ring = KeyRing({1: b"\x01" * 32, 2: b"\x02" * 32}, {1: 50.0, 2: None}, 2, "mem", {1: 0.0, 2: 0.0})
    derived = ring.derive(PURPOSE_DTA_REPORTER, "7", 10.0)
    assert derived == ring.derive(PURPOSE_DTA_REPORTER, "7", 10.0)  # deterministic
    assert derived.current == 2 and sorted(derived.keys) == [1, 2]
    for kid in (1, 2):
        assert len(derived.keys[kid]) == 16
        assert derived.keys[kid] == hkdf_sha256(bytes([kid]) * 32, b"netstack/v1/dta-reporter/7")


def test_derived_keys_differ_per_purpose_name_and_key_id():
    ring = KeyRing({1: b"\x01" * 32, 2: b"\x02" * 32}, {1: None, 2: 99.0}, 1, "mem")
    seen = {}
    for purpose in (PURPOSE_LG_LINK, PURPOSE_DTA_REPORTER, PURPOSE_ONEPIPE_DOMAIN, PURPOSE_ONEPIPE_CONTROLLER):
        for name in ("a", "b", "sw1-sw2", "1", "10", ""):
            for kid, key in ring.derive(purpose, name, 0.0).keys.items():
                assert key not in seen, (purpose, name, kid, seen.get(key))
                seen[key] = (purpose, name, kid)
    assert len(seen) == 4 * 6 * 2


@pytest.mark.parametrize("purpose", ["", "a/b"])
def test_derive_refuses_an_ambiguous_purpose(purpose):
    ring = KeyRing({1: b"\x01" * 32}, {1: None}, 1, "mem")
    with pytest.raises(ValueError):
        ring.derive(purpose, "x", 0.0)


@pytest.mark.parametrize("keys,current", [({1: b"k" * 16}, 2), ({0: b"k" * 16}, 0), ({256: b"k" * 16}, 256),
                                          ({1: b"short"}, 1), ({True: b"k" * 16}, True)])
def test_derived_keys_check_themselves(keys, current):
    with pytest.raises(ValueError):
        DerivedKeys(keys, current)


def test_describe_lists_no_secret(tmp_path):
    path = tmp_path / "k"
    generate(path, now=10.0)
    rotate(path, overlap_s=5, now=20.0)
    rows = describe(load(path), now=30.0)
    assert rows == [{"id": 1, "created": 10.0, "not_after": 25.0, "current": False, "valid": False},
                    {"id": 2, "created": 20.0, "not_after": None, "current": True, "valid": True}]


# --- hostile files --------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
entry_values = st.fixed_dictionaries({
    "id": st.one_of(st.integers(-2, 300), json_values),
    "secret": st.one_of(st.just(entry(1)["secret"]), st.text(max_size=60), json_values,
                        st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode())),
    "created": st.one_of(st.floats(), st.integers(), json_values),
    "not_after": st.one_of(st.none(), st.floats(), st.integers(-1, 10**400), json_values),
}, optional={"extra": json_values})
documents = st.one_of(
    json_values,
    st.fixed_dictionaries({"format": st.sampled_from(["netstack-keys", "other"]) | json_values,
                           "version": st.sampled_from([1, 1.0, True, 2]) | json_values,
                           "keys": st.lists(entry_values, max_size=4) | json_values}),
)


@pytest.fixture(scope="module")
def keydir():
    """hypothesis re-runs a test body many times, so its files go to one directory for the module
    (pytest's tmp_path is per test call), removed at its end: an atexit hook was not enough, as
    pytest-xdist's workers end without running it (each left a directory in /tmp)."""
    with tempfile.TemporaryDirectory(prefix="netstack-keys-test-") as d:
        yield d


def _load_bytes(keydir: str, raw: bytes):
    path = os.path.join(keydir, "k.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    return load(path)


def _check(keydir: str, raw: bytes) -> None:
    try:
        ring = _load_bytes(keydir, raw)
    except KeyFileError as exc:
        assert os.path.join(keydir, "k.json") in str(exc)  # says which file
        return
    # whatever is accepted is a consistent ring
    assert ring.current in ring.keys and ring.not_after[ring.current] is None
    assert all(1 <= k <= 255 and len(s) == 32 for k, s in ring.keys.items())
    assert len(ring.derive(PURPOSE_LG_LINK, "x", 0.0).keys[ring.current]) == 16


@settings(max_examples=200)
@given(documents)
def test_arbitrary_json_raises_only_key_file_error(keydir, doc):
    _check(keydir, json.dumps(doc).encode())


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_key_file_error(keydir, raw):
    _check(keydir, raw)


@pytest.mark.parametrize("raw", [
    b"[" * 100_000, b'{"format": "netstack-keys", "version": 1, "keys": [' + b"[" * 50_000 + b"]}",
    b"\xff\xfe", b'{"version": 1e999}', b'{"keys": [{"id": 1' + b"0" * 5000 + b"}]}",
])
def test_pathological_files_raise_key_file_error(keydir, raw):
    with pytest.raises(KeyFileError):
        _load_bytes(keydir, raw)


@pytest.mark.parametrize("entries,match", [
    ([], "non-empty"),
    ([entry(1), entry(2)], "exactly one key"),
    ([entry(1, not_after=5.0)], "exactly one key"),
    ([entry(1), entry(1, not_after=5.0)], "twice"),
    ([entry(1) | {"id": 0}], "id"),
    ([entry(1) | {"id": 256}], "id"),
    ([entry(1) | {"id": True}], "id"),
    ([entry(1) | {"id": 1.0}], "id"),
    ([entry(1) | {"secret": base64.b64encode(b"x" * 31).decode()}], "32 bytes"),
    ([entry(1) | {"secret": "not base64!"}], "base64"),
    ([entry(1) | {"created": "yesterday"}], "created"),
    ([entry(1) | {"created": -1.0}], "created"),
    ([entry(1) | {"extra": 1}], "fields"),
])
def test_malformed_entries(tmp_path, entries, match):
    with pytest.raises(KeyFileError, match=match):
        load(write_keys(tmp_path / "k", entries))


def test_wrong_format_or_version(tmp_path):
    with pytest.raises(KeyFileError, match="format"):
        load(write_keys(tmp_path / "a", [entry(1)], format="other"))
    with pytest.raises(KeyFileError, match="version"):
        load(write_keys(tmp_path / "b", [entry(1)], version=2))
    with pytest.raises(KeyFileError, match="unknown fields"):
        load(write_keys(tmp_path / "c", [entry(1)], comment="x"))


def test_a_too_large_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "k"
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.truncate(2 << 20)
    with pytest.raises(KeyFileError, match="too large"):
        load(path)
    with pytest.raises(KeyFileError, match="too large"):
        parse(b" " * (2 << 20), "mem")


# --- netstack keys --------------------------------------------------------------------------


def test_cli_generate_rotate_show_never_print_secrets(tmp_path, capsys):
    path = str(tmp_path / "keys.json")
    assert main(["keys", "generate", path]) == 0
    assert main(["keys", "rotate", path, "--overlap", "300"]) == 0
    assert main(["keys", "show", path]) == 0
    assert main(["keys", "show", path, "--json"]) == 0
    out, err = capsys.readouterr()
    secrets = secrets_in(path)
    assert len(secrets) == 2 and mode(path) == 0o600
    for secret in secrets:
        assert secret not in out and secret not in err
        assert base64.b64decode(secret).hex() not in out
    assert "key 1 is current" in out and "key 2 is current" in out
    table = out.split("rotated", 1)[1]
    assert "not_after" in table and "current" in table
    shown = json.loads(out[out.index("{"):])
    assert shown["current"] == 2 and [k["id"] for k in shown["keys"]] == [1, 2]
    assert all(set(k) == {"id", "created", "not_after", "current", "valid"} for k in shown["keys"])
    assert shown["keys"][0]["valid"] and not shown["keys"][0]["current"]


def test_cli_generate_force(tmp_path, capsys):
    path = str(tmp_path / "keys.json")
    assert main(["keys", "generate", path]) == 0
    first = secrets_in(path)
    assert main(["keys", "generate", path]) == 2
    assert "already exists" in capsys.readouterr().err and secrets_in(path) == first
    assert main(["keys", "generate", path, "--force"]) == 0
    assert secrets_in(path) != first and mode(path) == 0o600


@pytest.mark.parametrize("argv,message", [
    (["keys", "rotate", "{f}", "--overlap", "-1"], "--overlap"),
    (["keys", "rotate", "{f}", "--overlap", "nan"], "--overlap"),
    (["keys", "rotate", "{missing}"], "no such key file"),
    (["keys", "show", "{missing}"], "no such key file"),
    (["keys", "generate", "{f}"], "already exists"),
    (["keys", "show", "{open}"], "chmod 600"),
    (["keys", "show", "{garbage}"], "not a JSON key file"),
])
def test_cli_bad_input_exits_2_with_a_message(tmp_path, capsys, argv, message):
    f, opened, garbage = tmp_path / "keys.json", tmp_path / "open.json", tmp_path / "garbage.json"
    generate(f)
    generate(opened)
    os.chmod(opened, 0o644)
    write_keys(garbage, [])
    garbage.write_text("{not json")
    args = [a.format(f=f, missing=tmp_path / "missing.json", open=opened, garbage=garbage) for a in argv]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.startswith("netstack keys: error: ") and message in err
    for secret in secrets_in(f) + secrets_in(opened):
        assert secret not in out + err


def test_cli_help_mentions_the_topology_key(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["keys", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "[topology]" in out and 'keys = "' in out and "0600" in out
