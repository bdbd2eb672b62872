"""Authenticated 1Pipe frames: who seals what, with which context, and who opens it (sans-IO: the
key file is followed by :class:`netstack.auth.watch.KeyFileWatch`). docs/onepipe.md
"Authenticated beacons and barriers" is the design.

With a key file in the topology (``[topology] keys``) every 1Pipe datagram carries the 17-byte
trailer of :mod:`headers.auth` after its 1Pipe packet (the UDP payload is ``header | payload |
trailer``), sealed by whoever sent it on that hop:

- **domain key** (``onepipe-domain/<prefix>``), hop by hop for the frames whose barriers a hop
  reads (:data:`headers.onepipe.BARRIER_OPCODES`: DATA, ACK, NAK, BEACON, COMMIT, RECALL,
  RECALL_ACK; 1Pipe §4-§5, design topics §4-§5): a process seals what it sends (:data:`K_HOST`);
  the ToR opens it with that process's opener, rewrites the barriers and seals it again for the
  output it takes: toward a switch (:data:`K_FABRIC`) or toward a process (:data:`K_EDGE`); the
  switches' own beacons likewise. PREPARE, which switches forward untouched (§7.1), is sealed by
  its sender and opened by its receiver (end to end, :data:`K_HOST`), and so is anything a process
  sends to another process of its own host (the kernel loops it back, no ToR sees it);
- **controller key** (``onepipe-controller/<prefix>``), end to end from a process to the
  controller (REGISTER, FAILURE_REPORT, CALLBACK_DONE, RELAY; §8): :data:`K_TO_CTL`;
- **the controller's signature** (Ed25519, :mod:`netstack.auth.sign`), end to end from the
  controller to a process (REGISTER, FAILURE_NOTICE, RELAY...): :data:`K_FROM_CTL`. Only the
  controller holds the private key; processes check with the public one. A MAC key would let any
  member seal a FAILURE_NOTICE naming any process, or jump the controller's era and so lock the
  victim out of every genuine controller message (issue 34, finding 3). The signed context ends
  with the deployment (its prefix): one signing pair may serve several deployments whose
  addresses coincide (each in its own namespaces).

  Switches pass both untouched.

**The context.** The MAC covers, besides the datagram, a context the receiver rebuilds from what
it knows (never sent): ``kind:8 | src_ip:32 | dst_ip:32 | src_port:16 | dst_port:16 | hop``. The
addresses bind a frame to its sender and receiver (a process's frame cannot be replayed as
another's, nor redirected to another process), ``kind`` to the role that sealed it (a process's
frame is no switch's, a ToR's frame to a process no spine's), and ``hop``, on a switch-to-switch
link only, to the direction of that link (``"tor1:p-spine1>spine1:p-tor1"``: a frame reflected
back to its sender, or replayed onto another link, is forged there).

**Openers** (one replay window per sending peer, :class:`netstack.auth.frame.Opener`): a switch
keeps one per fabric port and one per process behind an edge port (with the process's state,
``max_processes`` of them); a process one for its ToR, one per peer process whose PREPAREs (or
same-host frames) it takes (:class:`PeerOpeners`, least recently used first out past
:data:`MAX_PEERS`) and one for the controller; the controller one per process. An unknown peer's
first frame is opened with a fresh opener that is kept only when the frame is genuine, so forged
frames from made-up addresses create no state.

**What keys do not stop.** Every member of a deployment holds the domain key and the controller
key (process to controller): a process (or a host's root) can seal anything a switch could, for
any address, and a message to the controller as any process of its own host (BCP 38 at its ToR
keeps it from other hosts' addresses). Keys keep out whoever is not a
member (a host outside the deployment, a device on a link); they do not make members honest.
A receiver that forgets a peer (restart, re-enable, an evicted opener) accepts one replay of what
that peer sent before: see docs/onepipe.md.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any, Generic, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from headers.auth import TRAILER_LEN
from headers.onepipe import BARRIER_OPCODES

from ..auth.frame import REASONS, AuthFailure, Opener, Sealer
from ..auth.keys import PURPOSE_ONEPIPE_CONTROLLER, PURPOSE_ONEPIPE_DOMAIN, DerivedKeys, KeyRing
from ..auth.sign import SIGNED_TRAILER_LEN, SignOpener, SignSealer

#: sealed by a 1Pipe process (to its ToR, or end to end: PREPARE, same-host datagrams)
K_HOST = 1
#: sealed by a switch's edge port, toward one process
K_EDGE = 2
#: sealed by a switch port toward the neighbour switch on that link
K_FABRIC = 3
#: a process's message to the controller (controller key)
K_TO_CTL = 4
#: the controller's message to a process (the controller's signature)
K_FROM_CTL = 5

_CTX = struct.Struct("!B4s4sHH")
_BARRIER = frozenset(int(op) for op in BARRIER_OPCODES)
_OPCODE_AT = 22  # the opcode byte in the 24-byte 1Pipe header
#: the replay window of every 1Pipe opener, in frames: switches seal at ingress and queue per
#: class, so frames of one sealer can be reordered by a whole queue (64 would refuse some)
WINDOW = 1024
#: peers a process or the controller keeps an opener for (least recently used out first)
MAX_PEERS = 4096
#: the shortest sealed 1Pipe datagram: a header and a trailer (shorter: ``truncated``, unsealed)
MIN_SEALED = 24 + TRAILER_LEN

Addr = tuple[str, int]
K = TypeVar("K", bound=Hashable)


@lru_cache(maxsize=4096)
def ip4(text: str) -> bytes:
    """A dotted-quad IPv4 address as 4 bytes (ValueError otherwise)."""
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        raise ValueError(f"{text!r} is not an IPv4 address")
    return bytes(int(p) for p in parts)


def context(kind: int, src: Addr, dst: Addr, hop: bytes = b"") -> bytes:
    """The MAC context of a datagram from ``src`` to ``dst`` (module docstring)."""
    return _CTX.pack(kind, ip4(src[0]), ip4(dst[0]), src[1], dst[1]) + hop


def signed_context(ctl: Addr, proc: Addr, deployment: str) -> bytes:
    """The signed context of the controller's message to ``proc``: :func:`context` and the deployment."""
    return context(K_FROM_CTL, ctl, proc) + deployment.encode()


def frame_context(kind: int, frame: bytes, u: int, hop: bytes = b"") -> bytes:
    """The context of an Ethernet/IPv4/UDP ``frame`` whose UDP header is at ``u``: the addresses
    from its IP header (``26:34``: source, destination) and its UDP ports (``u:u+4``)."""
    return bytes((kind,)) + frame[26:34] + frame[u:u + 4] + hop


def fabric_hop(sender: str, sport: str, receiver: str, rport: str) -> bytes:
    """The ``hop`` of a frame ``sender`` sends out of its port ``sport`` to ``receiver``'s
    ``rport`` (switch and port names as the topology has them)."""
    return f"{sender}:{sport}>{receiver}:{rport}".encode()


def domain_keys(ring: KeyRing, domain: str, now: float) -> DerivedKeys:
    return ring.derive(PURPOSE_ONEPIPE_DOMAIN, domain, now)


def controller_keys(ring: KeyRing, domain: str, now: float) -> DerivedKeys:
    return ring.derive(PURPOSE_ONEPIPE_CONTROLLER, domain, now)


def same_keys(a: DerivedKeys, b: DerivedKeys) -> bool:
    return a.current == b.current and a.keys == b.keys


@dataclass(eq=False, slots=True)
class AuthCounters:
    """Per opener class (a switch port, a process's ToR / peers / controller): frames sealed, and
    frames offered to be opened: each is ``ok`` or refused for exactly one reason."""

    sealed: int = 0
    ok: int = 0
    truncated: int = 0
    unknown_key: int = 0
    forged: int = 0
    stale_era: int = 0
    replayed: int = 0

    def refuse(self, reason: str) -> None:
        setattr(self, reason, getattr(self, reason) + 1)

    @property
    def refused(self) -> int:
        return sum(getattr(self, r) for r in REASONS)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


assert set(REASONS) <= set(AuthCounters.__slots__)


def seal(sealer: Sealer, ctx: bytes, data: bytes) -> bytes:
    """``data`` with its trailer, the MAC covering ``ctx`` too."""
    return data + sealer.seal(ctx + data)[-TRAILER_LEN:]


def check(opener: Opener, msg: bytes, c: AuthCounters) -> bool:
    """Whether ``msg`` (context, datagram, trailer) is genuine and new; counted in ``c``."""
    try:
        opener.open(msg)
    except AuthFailure as e:
        c.refuse(e.reason)
        return False
    c.ok += 1
    return True


def open_with(opener: Opener, ctx: bytes, data: bytes, c: AuthCounters) -> bytes | None:
    """``data`` without its trailer, or None (refused and counted in ``c``)."""
    if len(data) < MIN_SEALED:
        c.truncated += 1  # no room for a header and a trailer (the context would hide it from the opener)
        return None
    try:
        opener.open(ctx + data)
    except AuthFailure as e:
        c.refuse(e.reason)
        return None
    c.ok += 1
    return data[:-TRAILER_LEN]


def open_signed(opener: SignOpener, ctx: bytes, data: bytes, c: AuthCounters) -> bytes | None:
    """:func:`open_with` for a signed datagram (a header and a signed trailer at least)."""
    if len(data) < 24 + SIGNED_TRAILER_LEN:
        c.truncated += 1
        return None
    try:
        out = opener.open(ctx, data)
    except AuthFailure as e:
        c.refuse(e.reason)
        return None
    c.ok += 1
    return out


class PeerOpeners(Generic[K]):
    """One opener per sending peer, at most ``limit`` (the least recently used goes first). An
    unknown peer's frame is opened with a fresh opener, kept only if the frame is genuine."""

    def __init__(self, keys: DerivedKeys, window: int = WINDOW, limit: int = MAX_PEERS) -> None:
        self.keys = keys
        self.window = window
        self.limit = limit
        self.evicted = 0
        self._map: OrderedDict[K, Opener] = OrderedDict()

    def __len__(self) -> int:
        return len(self._map)

    def get(self, peer: K) -> Opener | None:
        return self._map.get(peer)

    def open(self, peer: K, ctx: bytes, data: bytes, c: AuthCounters) -> bytes | None:
        o = self._map.get(peer)
        if o is not None:
            self._map.move_to_end(peer)
            return open_with(o, ctx, data, c)
        if len(data) < MIN_SEALED:
            c.truncated += 1
            return None
        o = Opener(self.keys, self.window)
        out = open_with(o, ctx, data, c)
        if out is not None:
            self._map[peer] = o
            if len(self._map) > self.limit:
                self._map.popitem(last=False)
                self.evicted += 1
        return out

    def update_keys(self, keys: DerivedKeys) -> None:
        self.keys = keys
        for o in self._map.values():
            o.update_keys(keys)


@dataclass(eq=False, slots=True)
class HostAuthCounters:
    """A process's :class:`AuthCounters` per class of peer (``HostAuth.c``): ``tor``: barrier frames
    from the ToR; ``peer``: PREPAREs and same-host frames from other processes; ``controller``: its
    messages. ``sealed`` counts in the class the frame goes to."""

    tor: AuthCounters = field(default_factory=AuthCounters)
    peer: AuthCounters = field(default_factory=AuthCounters)
    controller: AuthCounters = field(default_factory=AuthCounters)


class HostAuth:
    """A 1Pipe process's sealing and opening (module docstring), between its socket and its engine:
    :meth:`seal` what the engine sends to ``dst`` (the real address: the subnet broadcast for
    the ToR, the controller's for it), :meth:`open` what the socket received from ``src``.
    ``controller``: reliable 1Pipe's controller: what goes to it is sealed with the controller key
    ``controller_keys``; what comes from it must carry its signature, checked with
    ``controller_verify`` (its public key) in ``deployment``'s context (:func:`signed_context`)."""

    def __init__(self, me: Addr, domain: DerivedKeys, era: int, *, controller: Addr | None = None,
                 controller_keys: DerivedKeys | None = None, controller_verify: Ed25519PublicKey | None = None,
                 deployment: str = "", window: int = WINDOW, max_peers: int = MAX_PEERS) -> None:
        if not ((controller is None) == (controller_keys is None) == (controller_verify is None)):
            raise ValueError("the controller's address, its key and its public key come together")
        ip4(me[0])  # a concrete address: it is in every context
        self.me = me
        self.controller = controller
        self.deployment = deployment
        self._sealer = Sealer(domain, era)
        self._tor = Opener(domain, window)
        self._peers: PeerOpeners[Addr] = PeerOpeners(domain, window, max_peers)
        self._ctl_sealer = Sealer(controller_keys, era) if controller_keys is not None else None
        self._ctl = SignOpener(controller_verify, window) if controller_verify is not None else None
        self.c = HostAuthCounters()

    @classmethod
    def from_ring(cls, ring: KeyRing, domain: str, me: Addr, era: int, now: float,
                  controller: Addr | None = None, controller_verify: Ed25519PublicKey | None = None) -> HostAuth:
        ck = controller_keys(ring, domain, now) if controller is not None else None
        return cls(me, domain_keys(ring, domain, now), era, controller=controller, controller_keys=ck,
                   controller_verify=controller_verify, deployment=domain)

    def seal(self, dst: Addr, data: bytes) -> bytes:
        if dst == self.controller and self._ctl_sealer is not None:
            self.c.controller.sealed += 1
            return seal(self._ctl_sealer, context(K_TO_CTL, self.me, dst), data)
        (self.c.tor if dst[0] != self.me[0] else self.c.peer).sealed += 1
        return seal(self._sealer, context(K_HOST, self.me, dst), data)

    def open(self, src: Addr, data: bytes) -> bytes | None:
        """The 1Pipe packet in ``data``, or None: refused (counted per reason)."""
        if src == self.controller and self._ctl is not None:
            return open_signed(self._ctl, signed_context(src, self.me, self.deployment), data, self.c.controller)
        if len(data) > _OPCODE_AT and data[_OPCODE_AT] in _BARRIER and src[0] != self.me[0]:
            # barriers come through the ToR, which sealed them for us (same host: the kernel's loopback)
            return open_with(self._tor, context(K_EDGE, src, self.me), data, self.c.tor)
        return self._peers.open(src, context(K_HOST, src, self.me), data, self.c.peer)

    def update_keys(self, domain: DerivedKeys, controller: DerivedKeys | None = None) -> None:
        """A rotated key file, or an old key's end (:class:`netstack.auth.watch.KeyFileWatch`)."""
        self._sealer.update_keys(domain)
        self._tor.update_keys(domain)
        self._peers.update_keys(domain)
        if controller is not None and self._ctl_sealer is not None:
            self._ctl_sealer.update_keys(controller)  # (the controller's signing pair does not rotate)

    def refresh(self, ring: KeyRing, domain: str, now: float) -> None:
        self.update_keys(domain_keys(ring, domain, now),
                         controller_keys(ring, domain, now) if self._ctl_sealer is not None else None)

    def counters(self) -> dict[str, Any]:
        kinds: dict[str, AuthCounters] = {f.name: getattr(self.c, f.name) for f in fields(self.c)}
        out: dict[str, Any] = {k: c.to_dict() for k, c in kinds.items()}
        out["refused"] = sum(c.refused for c in kinds.values())
        out["peers"] = len(self._peers)
        out["era"] = self._sealer.era
        return out


class ControllerAuth:
    """The controller's side: one opener of the controller key per process (by address), and
    its signing key for what it sends (``signing``, in ``deployment``'s context). ``era``: see
    docs/onepipe-reliable.md "Authenticated controller messages" (a new leader's era must be
    above every earlier leader's)."""

    def __init__(self, me: Addr, keys: DerivedKeys, era: int, signing: Ed25519PrivateKey, deployment: str,
                 window: int = WINDOW, max_peers: int = MAX_PEERS) -> None:
        ip4(me[0])
        self.me = me
        self.deployment = deployment
        self._sealer = SignSealer(signing, era)
        self._peers: PeerOpeners[Addr] = PeerOpeners(keys, window, max_peers)
        self.c = AuthCounters()

    def seal(self, dst: Addr, data: bytes) -> bytes:
        self.c.sealed += 1
        return self._sealer.seal(signed_context(self.me, dst, self.deployment), data)

    def open(self, src: Addr, data: bytes) -> bytes | None:
        return self._peers.open(src, context(K_TO_CTL, src, self.me), data, self.c)

    def update_keys(self, keys: DerivedKeys) -> None:
        self._peers.update_keys(keys)

    def counters(self) -> dict[str, Any]:
        return {**self.c.to_dict(), "refused": self.c.refused, "peers": len(self._peers), "era": self._sealer.era}


__all__ = ["K_EDGE", "K_FABRIC", "K_FROM_CTL", "K_HOST", "K_TO_CTL", "MAX_PEERS", "MIN_SEALED", "WINDOW",
           "AuthCounters", "ControllerAuth", "HostAuth", "HostAuthCounters", "PeerOpeners", "check", "context",
           "controller_keys", "domain_keys", "fabric_hop", "frame_context", "ip4", "open_signed", "open_with",
           "same_keys", "seal", "signed_context"]
