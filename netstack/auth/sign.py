"""Signed frames: a key only one party holds (Ed25519), for messages every member must be able to
check but no member may forge (sans-IO, apart from the key files' reading and writing below).

Why (issue 34, finding 3): a MAC key opens and seals alike, so every holder of the 1Pipe
controller key could act as the controller: seal a FAILURE_NOTICE naming any process, or seal a
message in era 2^32 - 2, after which the victim refused every genuine controller message as
``stale_era``. A signature splits the two: the controller signs with a private key that only it
is given; every process checks with the public key. Only the controller can then advance its
own era, so eras do not jump at a member's will.

A signed frame is ``data || era:32 || seq:32 || sig:512`` (:data:`SIGNED_TRAILER_LEN` = 72
bytes). ``sig`` is Ed25519 over ``context || data || era || seq``; the context (never sent)
binds it to its sender, receiver, direction and deployment, as the MAC trailer's context does.
``(era, seq)`` and the replay window are the MAC trailer's (:class:`netstack.auth.frame.
ReplayWindow`): era is the signer's start in whole seconds. A receiver refuses, counted per
reason: ``truncated``, ``forged`` (the signature does not verify), ``stale_era``, ``replayed``.

**Key files.** The signing key of a key file ``F`` lives beside it: ``F.controller`` (the private
key, PKCS#8 PEM, mode 0600, read by the controller only) and ``F.controller.pub`` (the public key,
SubjectPublicKeyInfo PEM, for the processes). :func:`ensure_signing_key` makes the pair when it is
missing (``netstack keys generate`` and ``netstack up`` call it); the private file is refused when
others may read it, as the key file is. One pair per key file: it does not rotate with the key
file (replacing it means restarting the deployment's processes, which read the public key once).

Cost (``netstack bench headers``, ``auth`` table): an Ed25519 signature and its check each cost
tens of microseconds, 10-50x a CMAC; controller messages are rare (registration, failures,
relays during recovery), so the controller pays it, not the data path.
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .frame import FORGED, TRUNCATED, U32, AuthFailure, ReplayWindow
from .keys import KeyFileError, read_private

SIG_LEN = 64
_SEQ = struct.Struct("!II")
#: era:32 seq:32 sig:512
SIGNED_TRAILER_LEN = _SEQ.size + SIG_LEN
#: the private key's file beside key file F is F + this; the public key's, F + this + ".pub"
SUFFIX = ".controller"
#: a PEM Ed25519 key is a few hundred bytes
MAX_PEM_BYTES = 4096
#: the node kinds given the private key where a runtime hands files over (the containers' secrets)
SIGNER_KINDS = frozenset({"onepipe-controller"})


class SignSealer:
    """Signs one sender's frames: ``seal(ctx, data) -> data + trailer`` (``ctx`` is not sent)."""

    def __init__(self, key: Ed25519PrivateKey, era: int) -> None:
        if isinstance(era, bool) or not isinstance(era, int) or not 0 <= era <= U32:
            raise ValueError(f"era {era!r} is not a 32-bit unsigned number")
        self._key = key
        self.era = era
        self._next_seq = 1
        self.sealed = 0

    def seal(self, ctx: bytes, data: bytes) -> bytes:
        seq = self._next_seq
        if seq > U32:  # as Sealer: a new era makes every later frame newer than all before
            self.era = (self.era + 1) & U32
            seq = 1
        self._next_seq = seq + 1
        tail = _SEQ.pack(self.era, seq)
        self.sealed += 1
        return data + tail + self._key.sign(ctx + data + tail)


class SignOpener:
    """Checks and strips the trailers of one signer: ``open(ctx, frame) -> data`` or AuthFailure."""

    def __init__(self, key: Ed25519PublicKey, window: int) -> None:
        self._key = key
        self._replay = ReplayWindow(window)

    def open(self, ctx: bytes, frame: bytes) -> bytes:
        n = len(frame)
        if n < SIGNED_TRAILER_LEN:
            raise AuthFailure(TRUNCATED, f"{n} bytes, a signed trailer alone is {SIGNED_TRAILER_LEN}")
        body = n - SIG_LEN
        try:
            self._key.verify(frame[body:], ctx + frame[:body])
        except InvalidSignature:
            raise AuthFailure(FORGED) from None
        era, seq = _SEQ.unpack_from(frame, body - _SEQ.size)
        reason = self._replay.admit(era, seq)
        if reason is not None:
            raise AuthFailure(*reason)
        return frame[:body - _SEQ.size]


# --- key files --------------------------------------------------------------------------------


def signing_paths(keys: str | Path) -> tuple[Path, Path]:
    """(private, public): where key file ``keys``'s signing pair lives."""
    p = Path(keys)
    return p.with_name(p.name + SUFFIX), p.with_name(p.name + SUFFIX + ".pub")


def ensure_signing_key(keys: str | Path) -> bool:
    """Make key file ``keys``'s signing pair unless both files exist; True when made. The private
    file is created with ``O_EXCL`` and mode 0600 (never over an existing file or a symlink)."""
    private, public = signing_paths(keys)
    if private.exists() and public.exists():
        return False
    if private.exists() or public.exists():
        raise KeyFileError(f"{private} and {public} come together: one is missing; remove the other to make a new "
                           "pair (every process of a running deployment must then restart)")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        raise KeyFileError(f"{private}: cannot create the controller's signing key: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        public.write_bytes(pub)
    except OSError as exc:
        for p in (private, public):
            with contextlib.suppress(OSError):
                p.unlink()
        raise KeyFileError(f"{private}: cannot write the controller's signing key: {exc.strerror or exc}") from None
    return True


def load_signing_key(keys: str | Path) -> Ed25519PrivateKey:
    """Key file ``keys``'s private signing key (the controller's); KeyFileError if missing,
    readable by others or not an Ed25519 key."""
    path = signing_paths(keys)[0]
    raw = read_private(path, MAX_PEM_BYTES, "the controller's signing key (made by 'netstack keys generate' or "
                                            "'netstack up')")
    try:
        key = serialization.load_pem_private_key(raw, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 key")
    return key


def load_verify_key(keys: str | Path) -> Ed25519PublicKey:
    """Key file ``keys``'s public signing key (what processes check the controller with)."""
    path = signing_paths(keys)[1]
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read the controller's public key: {exc.strerror or exc} "
                           "(made beside the key file by 'netstack keys generate' or 'netstack up')") from None
    try:
        key = serialization.load_pem_public_key(raw)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path}: not an Ed25519 key")
    return key


__all__ = ["SIGNED_TRAILER_LEN", "SIGNER_KINDS", "SIG_LEN", "SUFFIX", "SignOpener", "SignSealer", "ensure_signing_key",
           "load_signing_key", "load_verify_key", "signing_paths"]
