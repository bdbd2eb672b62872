"""Following a key file for rotations: the one watcher every daemon that holds keys runs (the
switch daemon, the 1Pipe controller, the 1Pipe host processes).

``netstack keys rotate`` replaces the file atomically; a watcher polls its (mtime, size) about
once a second (``KEY_POLL_S``) and reloads it when it changed. A file that changed but cannot
be read keeps the keys already loaded (and is tried again at the next poll): a half-written or
broken file must never take a running daemon's keys away. Old keys also end with time alone
(their overlap), so the caller re-derives its keys after every poll, changed or not
(``AuthContext.refresh``, a 1Pipe ``update_keys``): that is cheap.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable

from .keys import KeyRing, load

#: how often the key file is checked for a rotation (and expired keys dropped)
KEY_POLL_S = 1.0


class KeyFileWatch:
    """A key file and the ring last loaded from it; :meth:`poll` reloads it when it changed.

    ``ring``: a ring the caller has just loaded from ``path`` (else it is loaded here, raising
    ``KeyFileError``); ``log``: where a reload and an unreadable file are said (None: silent;
    ``errors`` counts them either way)."""

    def __init__(self, path: str, ring: KeyRing | None = None, log: logging.Logger | None = None) -> None:
        self.path = path
        self.ring = ring if ring is not None else load(path)
        self.log = log
        self._stamp = self._stat()
        self.reloads = 0
        self.errors = 0

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def poll(self) -> KeyRing:
        """The current ring: reloaded if the file changed (a broken file keeps the old keys)."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return self.ring
        try:
            ring = load(self.path)
        except ValueError as exc:  # KeyFileError: keep the keys we have, try again next poll
            self.errors += 1
            if self.log is not None:
                self.log.warning("key file changed but cannot be read (keeping the old keys): %s", exc)
            return self.ring
        self.ring = ring
        self._stamp = stamp
        self.reloads += 1
        if self.log is not None:
            self.log.info("key file reloaded: key %d current, valid %s", ring.current, ring.valid_ids(time.time()))
        return ring

    async def follow(self, apply: Callable[[KeyRing, bool], None], interval: float = KEY_POLL_S) -> None:
        """Every ``interval`` s: :meth:`poll`, then ``apply(ring, reloaded)`` (until cancelled)."""
        while True:
            await asyncio.sleep(interval)
            before = self.reloads
            ring = self.poll()
            apply(ring, self.reloads != before)
