"""Key files: the master secrets a deployment shares, and the per-purpose keys derived from them.

A key file (``[topology] keys = "path"`` names it) is JSON, readable by its owner only::

    {"format": "netstack-keys", "version": 1,
     "keys": [{"id": 1, "secret": "<base64 of 32 bytes>", "created": 1700000000.0, "not_after": null}]}

Ids are 1..255 (the trailer's ``key_id`` byte) and unique. Exactly one key has ``not_after: null``:
the *current* key, the one senders seal with. Older keys keep a ``not_after`` (unix seconds) until
which receivers still accept them, so a rotation reaches every node before the old key stops
working (:func:`rotate`).

No secret is used directly on the wire. Each protocol derives a 16-byte AES key per purpose and
name with HKDF-SHA256 (:meth:`KeyRing.derive`), so a key learned from one link or reporter opens
nothing else, and one master secret serves every protocol.

The secret never leaves this module except inside a :class:`KeyRing` or :class:`DerivedKeys`:
nothing here prints or logs it, and their ``repr`` hides it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import os
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import NetstackError

FORMAT = "netstack-keys"
VERSION = 1
SECRET_LEN = 32
AES_KEY_LEN = 16
MIN_ID, MAX_ID = 1, 255
#: a key file is a few hundred bytes per key; anything far larger is not one (and is not read whole)
MAX_FILE_BYTES = 1 << 20

#: LinkGuardian control on one link; name: the link's name
PURPOSE_LG_LINK = "lg-link"
#: DTA reports of one reporter; name: the reporter's IPv4 address as text ("10.0.0.1")
PURPOSE_DTA_REPORTER = "dta-reporter"
#: 1Pipe barriers and beacons within one deployment; name: the deployment prefix
PURPOSE_ONEPIPE_DOMAIN = "onepipe-domain"
#: the 1Pipe controller's messages; name: the deployment prefix
PURPOSE_ONEPIPE_CONTROLLER = "onepipe-controller"

_ENTRY_FIELDS = frozenset({"id", "secret", "created", "not_after"})
_FILE_FIELDS = frozenset({"format", "version", "keys"})


class KeyFileError(NetstackError, ValueError):
    """Anything wrong with a key file: missing, unreadable, readable by others, malformed."""


@dataclass(frozen=True)
class DerivedKeys:
    """16-byte AES keys for one purpose and name: ``keys`` maps each key id valid at derivation
    time to its key; ``current`` is the id senders seal with (always in ``keys``)."""

    keys: dict[int, bytes] = field(repr=False)
    current: int

    def __post_init__(self) -> None:
        if self.current not in self.keys:
            raise ValueError(f"current key id {self.current} is not among the keys {sorted(self.keys)}")
        for kid, key in self.keys.items():
            if isinstance(kid, bool) or not isinstance(kid, int) or not MIN_ID <= kid <= MAX_ID:
                raise ValueError(f"key id {kid!r} is not in {MIN_ID}..{MAX_ID}")
            if not isinstance(key, bytes) or len(key) != AES_KEY_LEN:
                raise ValueError(f"key {kid} is not {AES_KEY_LEN} bytes")

    def __repr__(self) -> str:
        return f"DerivedKeys(ids={sorted(self.keys)}, current={self.current})"


@dataclass(frozen=True)
class KeyRing:
    """The master secrets of one key file (``source``): ``keys`` id -> 32-byte secret,
    ``not_after`` id -> unix seconds until which the key is accepted (None: no end), ``current``
    the id to seal with, ``created`` id -> unix seconds."""

    keys: dict[int, bytes] = field(repr=False)
    not_after: dict[int, float | None]
    current: int
    source: str
    created: dict[int, float] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"KeyRing(source={self.source!r}, ids={sorted(self.keys)}, current={self.current})"

    def valid_ids(self, now: float) -> list[int]:
        """Ids accepted at ``now``: no ``not_after``, or ``now <= not_after``."""
        return sorted(k for k, end in self.not_after.items() if end is None or now <= end)

    def derive(self, purpose: str, name: str, now: float) -> DerivedKeys:
        """The AES keys for ``purpose``/``name`` of every key valid at ``now``.

        HKDF-SHA256, no salt (the master secrets are uniformly random already), 16 bytes,
        ``info = "netstack/v1/{purpose}/{name}"``. A ``/`` in ``purpose`` is refused: it would
        let two (purpose, name) pairs share an info string and so a key.
        """
        if not purpose or "/" in purpose:
            raise ValueError(f"purpose {purpose!r} must be non-empty and contain no '/'")
        info = f"netstack/v1/{purpose}/{name}".encode()
        valid = set(self.valid_ids(now)) | {self.current}  # the current key has no end, by construction
        return DerivedKeys({k: _hkdf(self.keys[k], info) for k in sorted(valid)}, self.current)


def _hkdf(secret: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=AES_KEY_LEN, salt=None, info=info).derive(secret)


# --- reading ----------------------------------------------------------------------------------


def load(path: str | Path) -> KeyRing:
    """Read and check a key file. Refuses a file others can read or write (``mode & 0o077``)."""
    return parse(read_private(path, MAX_FILE_BYTES), str(path))


def read_private(path: str | Path, limit: int, what: str = "") -> bytes:
    """The bytes of a secret file (a key file, a signing key): a regular file of at most ``limit``
    bytes that only its owner may read or write; :class:`KeyFileError` otherwise. ``what`` names
    it in the message for a missing file (default: a key file)."""
    source = str(path)
    try:
        # symlinks are followed (secret stores mount files through them): the mode checked is the target's.
        # O_NONBLOCK: a FIFO at the path must not hang the daemon (it is refused below as not a regular file)
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise KeyFileError(f"{source}: no such file, {what}" if what else
                           f"{source}: no such key file (create one with 'netstack keys generate')") from None
    except OSError as exc:
        raise KeyFileError(f"{source}: cannot open key file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)  # of the file opened, not of whatever the path names a moment later
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"{source}: not a regular file")
        if st.st_mode & 0o077:
            raise KeyFileError(f"{source}: mode {stat.S_IMODE(st.st_mode):04o} lets others read or change the "
                               f"keys; chmod 600 {source}")
        if st.st_size > limit:
            raise KeyFileError(f"{source}: {st.st_size} bytes is too large for a key file")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit + 1)
    except OSError as exc:
        raise KeyFileError(f"{source}: cannot read key file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def parse(raw: bytes, source: str) -> KeyRing:
    """A :class:`KeyRing` from a key file's bytes; :class:`KeyFileError` on anything malformed."""
    if len(raw) > MAX_FILE_BYTES:
        raise KeyFileError(f"{source}: too large for a key file")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise KeyFileError(f"{source}: not a JSON key file: {_short(exc)}") from None
    if not isinstance(doc, dict):
        raise KeyFileError(f"{source}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise KeyFileError(f"{source}: \"format\" must be {FORMAT!r}")
    if type(doc.get("version")) is not int or doc["version"] != VERSION:
        raise KeyFileError(f"{source}: unsupported \"version\" (this netstack reads version {VERSION})")
    extra = set(doc) - _FILE_FIELDS
    if extra:
        raise KeyFileError(f"{source}: unknown fields {sorted(extra)}")
    entries = doc.get("keys")
    if not isinstance(entries, list) or not entries:
        raise KeyFileError(f"{source}: \"keys\" must be a non-empty list")
    keys: dict[int, bytes] = {}
    not_after: dict[int, float | None] = {}
    created: dict[int, float] = {}
    for n, entry in enumerate(entries):
        kid, secret, made, end = _entry(entry, f"{source}: keys[{n}]")
        if kid in keys:
            raise KeyFileError(f"{source}: keys[{n}]: id {kid} appears twice")
        keys[kid], not_after[kid], created[kid] = secret, end, made
    current = [k for k, end in not_after.items() if end is None]
    if len(current) != 1:
        raise KeyFileError(f"{source}: exactly one key must have \"not_after\": null (the current key), "
                           f"found {len(current)}")
    return KeyRing(keys, not_after, current[0], source, created)


def _entry(entry: Any, where: str) -> tuple[int, bytes, float, float | None]:
    if not isinstance(entry, dict):
        raise KeyFileError(f"{where}: expected an object")
    if set(entry) != _ENTRY_FIELDS:
        raise KeyFileError(f"{where}: fields must be exactly {sorted(_ENTRY_FIELDS)}")
    kid = entry["id"]
    if type(kid) is not int or not MIN_ID <= kid <= MAX_ID:
        raise KeyFileError(f"{where}: \"id\" must be a whole number in {MIN_ID}..{MAX_ID}")
    text = entry["secret"]
    try:
        if not isinstance(text, str):
            raise ValueError
        secret = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, binascii.Error):  # (UnicodeEncodeError is a ValueError)
        raise KeyFileError(f"{where}: \"secret\" must be base64") from None
    if len(secret) != SECRET_LEN:
        # the length says nothing about the secret; its value is never put in a message
        raise KeyFileError(f"{where}: \"secret\" must encode {SECRET_LEN} bytes, not {len(secret)}")
    made = _time(entry["created"], f"{where}: \"created\"")
    end = None if entry["not_after"] is None else _time(entry["not_after"], f"{where}: \"not_after\"")
    return kid, secret, made, end


def _time(value: Any, where: str) -> float:
    if type(value) not in (int, float):
        raise KeyFileError(f"{where} must be a number of unix seconds")
    try:
        out = float(value)
    except OverflowError:  # an int too large for a float
        raise KeyFileError(f"{where} is out of range") from None
    if not math.isfinite(out) or out < 0:
        raise KeyFileError(f"{where} must be finite and not negative")
    return out


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


# --- writing ----------------------------------------------------------------------------------


def generate(path: str | Path, *, force: bool = False, now: float | None = None) -> int:
    """Write a new key file with one fresh key (id 1) and return its id.

    Created with ``O_EXCL`` and mode 0600, so an existing file (or a symlink planted in its place)
    is never followed or overwritten; ``force`` replaces an existing file atomically instead.
    ``now`` (unix seconds, default: the wall clock) is recorded as ``created``.
    """
    made = time.time() if now is None else now
    entry = _new_entry(MIN_ID, made)
    text = _dump([entry])
    if force:
        _write_atomic(Path(path), text)
        return MIN_ID
    try:
        fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        raise KeyFileError(f"{path}: already exists; refusing to overwrite keys (--force replaces it)") from None
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot create key file: {exc.strerror or exc}") from None
    try:
        _write_fd(fd, text)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)  # a half-written file would block the next try without force
        raise KeyFileError(f"{path}: cannot write key file: {exc.strerror or exc}") from None
    return MIN_ID


def rotate(path: str | Path, *, overlap_s: float, now: float) -> int:
    """Add a new current key and return its id.

    The previous current key stays valid until ``now + overlap_s`` (so nodes that have not yet
    reloaded the file keep talking); keys whose ``not_after`` has passed are dropped. The new id is
    the next after the current one, 255 wrapping to 1, skipping ids still in the file.
    """
    if not math.isfinite(overlap_s) or overlap_s < 0:
        raise KeyFileError(f"{path}: overlap must be a finite number of seconds >= 0, not {overlap_s}")
    ring = load(path)
    not_after = dict(ring.not_after)
    not_after[ring.current] = now + overlap_s
    kept = sorted(k for k, end in not_after.items() if end is not None and end >= now)
    new_id = _next_id(ring.current, set(kept))
    if new_id is None:
        raise KeyFileError(f"{path}: all {MAX_ID} key ids are in use by keys still valid; "
                           "rotate again once older keys expire")
    entries = [{"id": k, "secret": _b64(ring.keys[k]), "created": ring.created.get(k, now), "not_after": not_after[k]}
               for k in kept]
    entries.append(_new_entry(new_id, now))
    _write_atomic(Path(path), _dump(entries))
    return new_id


def _next_id(current: int, taken: set[int]) -> int | None:
    for step in range(1, MAX_ID + 1):
        kid = (current - MIN_ID + step) % MAX_ID + MIN_ID
        if kid not in taken:
            return kid
    return None


def _new_entry(kid: int, made: float) -> dict[str, Any]:
    return {"id": kid, "secret": _b64(os.urandom(SECRET_LEN)), "created": made, "not_after": None}


def _b64(secret: bytes) -> str:
    return base64.b64encode(secret).decode("ascii")


def _dump(entries: list[dict[str, Any]]) -> str:
    return json.dumps({"format": FORMAT, "version": VERSION, "keys": entries}, indent=2) + "\n"


def _write_fd(fd: int, text: str) -> None:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: a 0600 temp file in the same directory (mkstemp creates it
    with O_EXCL and mode 0600), fsync, rename over. Readers see the old file or the new one."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot create a temporary file beside it: {exc.strerror or exc}") from None
    try:
        _write_fd(fd, text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise KeyFileError(f"{path}: cannot write key file: {exc.strerror or exc}") from None
    with contextlib.suppress(OSError):  # make the rename durable; not every filesystem allows it
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


# --- showing ----------------------------------------------------------------------------------


def describe(ring: KeyRing, now: float) -> list[dict[str, Any]]:
    """One dict per key (id, created, not_after, current, valid at ``now``), by id; never secrets."""
    valid = set(ring.valid_ids(now))
    return [{"id": k, "created": ring.created.get(k), "not_after": ring.not_after[k],
             "current": k == ring.current, "valid": k in valid} for k in sorted(ring.keys)]
