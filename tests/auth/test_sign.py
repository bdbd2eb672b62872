"""Signed frames and the controller's signing pair (netstack/auth/sign.py; issue 34, finding 3)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PrivateKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from netstack.auth.frame import AuthFailure
from netstack.auth.keys import KeyFileError, generate
from netstack.auth.sign import (
    SIGNED_TRAILER_LEN,
    SignOpener,
    SignSealer,
    ensure_signing_key,
    load_signing_key,
    load_verify_key,
    signing_paths,
)

KEY = Ed25519PrivateKey.generate()
CTX = b"ctx"


def test_a_signed_frame_opens_once_with_its_context_and_only_then() -> None:
    s, o = SignSealer(KEY, era=5), SignOpener(KEY.public_key(), window=64)
    f = s.seal(CTX, b"hello")
    assert len(f) == 5 + SIGNED_TRAILER_LEN
    with pytest.raises(AuthFailure) as e:
        o.open(b"other", f)  # another context: another receiver, direction or deployment
    assert e.value.reason == "forged"
    assert o.open(CTX, f) == b"hello"
    with pytest.raises(AuthFailure) as e:
        o.open(CTX, f)
    assert e.value.reason == "replayed"
    flipped = bytearray(s.seal(CTX, b"hello"))
    flipped[2] ^= 1
    with pytest.raises(AuthFailure) as e:
        o.open(CTX, bytes(flipped))
    assert e.value.reason == "forged"
    with pytest.raises(AuthFailure) as e:
        o.open(CTX, SignSealer(KEY, era=4).seal(CTX, b"old era"))
    assert e.value.reason == "stale_era"


def test_a_key_of_ones_own_or_a_jumped_era_does_not_move_the_window() -> None:
    """What a member without the private key can do: sign with its own key, in any era. Refused as
    forged before the replay window is read, so the genuine signer's next frame still opens."""
    o, genuine = SignOpener(KEY.public_key(), window=64), SignSealer(KEY, era=9)
    assert o.open(CTX, genuine.seal(CTX, b"a")) == b"a"
    with pytest.raises(AuthFailure):
        o.open(CTX, SignSealer(Ed25519PrivateKey.generate(), era=0xFFFFFFFE).seal(CTX, b"b"))
    assert o.open(CTX, genuine.seal(CTX, b"c")) == b"c"


@given(st.binary(max_size=200))
def test_arbitrary_bytes_give_only_an_auth_failure(data: bytes) -> None:
    o = SignOpener(KEY.public_key(), window=64)
    with pytest.raises(AuthFailure) as e:
        o.open(CTX, data)
    assert e.value.reason in ("truncated", "forged")


@given(st.binary(min_size=1, max_size=100), st.integers(0, SIGNED_TRAILER_LEN + 99))
def test_any_flipped_byte_is_refused(data: bytes, at: int) -> None:
    f = bytearray(SignSealer(KEY, era=1).seal(CTX, data))
    f[at % len(f)] ^= 0x80
    with pytest.raises(AuthFailure):
        SignOpener(KEY.public_key(), window=64).open(CTX, bytes(f))


def test_the_pair_is_made_once_beside_the_key_file(tmp_path: Path) -> None:
    keys = tmp_path / "lab.keys"
    generate(keys)
    private, public = signing_paths(keys)
    assert (private.name, public.name) == ("lab.keys.controller", "lab.keys.controller.pub")
    assert ensure_signing_key(keys) is True
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    before = private.read_bytes()
    assert ensure_signing_key(keys) is False and private.read_bytes() == before
    signed = SignSealer(load_signing_key(keys), era=1).seal(CTX, b"x")
    assert SignOpener(load_verify_key(keys), window=4).open(CTX, signed) == b"x"


def test_bad_signing_files_are_clear_errors(tmp_path: Path) -> None:
    keys = tmp_path / "k"
    private, public = signing_paths(keys)
    with pytest.raises(KeyFileError, match="no such file"):
        load_signing_key(keys)
    with pytest.raises(KeyFileError, match="cannot read the controller's public key"):
        load_verify_key(keys)
    ensure_signing_key(keys)
    os.chmod(private, 0o644)
    with pytest.raises(KeyFileError, match="lets others read"):
        load_signing_key(keys)
    os.chmod(private, 0o600)
    public.unlink()
    with pytest.raises(KeyFileError, match="come together"):
        ensure_signing_key(keys)
    private.write_bytes(b"not a key")
    with pytest.raises(KeyFileError, match="not a PEM private key"):
        load_signing_key(keys)
    other = Ed448PrivateKey.generate()
    private.write_bytes(other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    public.write_bytes(other.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        load_signing_key(keys)
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        load_verify_key(keys)
