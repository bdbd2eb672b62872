"""LinkGuardian as features of the software switch (``netstack.switch`` feature interface).

LinkGuardian Fig. 5: the *sender* switch stamps, buffers and retransmits on its egress port
toward the corrupting link; the *receiver* switch, on its ingress port from that link,
detects holes, reorders and sends ACKs, loss notifications and pauses back.

- :class:`LGSenderFeature` (sender switch, protected egress port)
  ``on_egress`` stamps frames of the protected classes (dequeue time = wire order, §3.5)
  and keeps copies; ``on_ingress`` consumes explicit ACK couriers and loss notifications
  and strips piggybacked leading-ACK tags from reverse traffic before it is forwarded;
  ``idle_frame`` is the self-replenishing dummy queue (§3.2); retransmissions go through
  ``switch.enqueue(port, copy, retx_class)`` (strict priority above normal data, §3.4).
  The receiver's PFC pause of the normal classes is honoured by the switch itself
  (§3.5 "Backpressuring the normal packet queue"); the feature only reports it.
- :class:`LGReceiverFeature` (receiver switch, protected ingress port)
  ``on_ingress`` runs Algorithm 1 and returns the frame to forward, or None when it was
  held, a duplicate, a dummy or control; frames released later (hole repaired, or
  ackNoTimeout through ``next_deadline``/``on_timer``) are injected into normal forwarding
  with :func:`forward_as_received`; ``on_egress`` piggybacks the leading ACK on reverse
  traffic and ``idle_frame`` is the explicit-ACK courier (§3.1); loss notifications go out
  on the highest class and Algorithm 2 drives ``switch.pause_class`` (real 802.1Qbb).

Enable / disable at run time, without restarting the switch (§3: LinkGuardian "lies
dormant" until corruptd turns it on). A disabled feature stays attached but passive: the
sender stops stamping and flushes its Tx buffer; the receiver releases its reordering
buffer in order, resumes the sender and from then on only strips tags still in flight, so
no tagged frame ever leaks to a host. :func:`enable_sender`, :func:`enable_receiver`,
:func:`disable` and :func:`status` are the entry points for the daemon and CLI. Enable
the receiver before the sender and disable the sender first.

Frames on the protected link also carry the software FCS; the switch adds and checks it,
so the features only ever see frames without it.

Authenticated control (docs/security.md "Keys and authenticated frames"): when the switch has
keys (``switch.auth``, the topology's key file) and the port is an end of a topology link, the
receiver seals every frame that carries leading-ACK or loss-notification tags (piggybacked,
explicit couriers, notifications) with the link's key: an AES-CMAC trailer over the Ethernet
addresses and the control tags, appended at the end of the frame (before the software FCS).
The sender opens it before its engine sees the tags, and drops and counts per reason what
fails. Only the control direction is sealed: it is what frees Tx-buffer copies and triggers
retransmissions (LinkGuardian §3.1, §3.4); data tags stay as the paper has them.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from headers.auth import TRAILER_LEN
from headers.errors import HeaderError
from headers.linkguardian import DATA_DUMMY, DATA_ERA, DATA_RETX, ETHERTYPE, TAG_SIZE, LGType, find_tag

from ..auth.frame import REASONS, AuthFailure, Opener, OpenerCounters, Sealer
from ..auth.keys import PURPOSE_LG_LINK
from ..engine import Backpressure, Transmit
from ..errors import ConfigError
from ..switch import Switch
from ..switch.config import derived_mac
from ..switch.feature import FeatureBase
from .params import LGParams
from .receiver import LGReceiver
from .sender import LG_CONTROL_MAC, LGSender

_LG_HI = ETHERTYPE >> 8
_LG_LO = ETHERTYPE & 0xFF

#: the tag sizes of the two control tags (type byte onward, without next_type)
_CONTROL_TAG: dict[int, int] = {int(LGType.LEADING_ACK): 3, int(LGType.LOSS_NOTIFICATION): 6}

SENDER = "sender"
#: retransmitted seq_nos remembered by a passive (disabled) receiver, oldest forgotten first
PASSIVE_RECORD = 4096
RECEIVER = "receiver"
ROLES = (SENDER, RECEIVER)


def forward_as_received(switch: Switch, port: str, frame: bytes, now_ns: int | None = None,
                        after: Any = None) -> bool:
    """Forward ``frame`` as if it had just been received on ``port`` and passed ``after``'s
    ingress hook (frames released from the reordering buffer later than their arrival)."""
    return switch.forward(port, frame, now_ns, after_feature=after)


def control_span(frame: bytes) -> int:
    """How far the control tags at the front of ``frame`` reach (the bytes a seal covers:
    addresses, EtherType, every leading-ACK / loss-notification tag with its next_type);
    0 when the frame does not start with one."""
    o = 12
    n = len(frame)
    while n >= o + 3 and frame[o] == _LG_HI and frame[o + 1] == _LG_LO:
        size = _CONTROL_TAG.get(frame[o + 2] >> 6)
        if size is None or n < o + 2 + size + 2:
            break
        o += 2 + size  # the tag; its next_type is the next EtherType
    return o + 2 if o > 12 else 0


def unsealed_control(frame: bytes, span: int) -> bool:
    """Does ``frame`` carry a control tag (leading ACK, loss notification) outside its sealed
    leading ``span`` (:func:`control_span`; 0: nothing sealed)? The sender acts on a control tag
    wherever it sits in the tag stack (it skips data tags to find it), but a seal covers only the
    control tags at the front: with keys, a control tag behind a data tag is an unauthenticated
    one (issue 34: an on-link device freed the Tx buffer that way), and the frame is refused."""
    o = 12  # an EtherType: the frame's, then each tag's next_type
    n = len(frame)
    while n >= o + 3 and frame[o] == _LG_HI and frame[o + 1] == _LG_LO:
        t = o + 2
        size = _CONTROL_TAG.get(frame[t] >> 6)
        if size is not None and t >= span:
            return True
        o = t + (size if size is not None else TAG_SIZE - 2)  # a data tag: 3 bytes, then next_type
    return False


class _LGFeature(FeatureBase):
    role = ""

    def __init__(self, switch: Switch, port: str, params: LGParams | None = None) -> None:
        if params is None:
            params = LGParams()
        if not isinstance(params, LGParams):
            raise ConfigError("linkguardian", f"expected LGParams, got {type(params).__name__}")
        cfg = switch.config.port(port)  # ConfigError for an unknown port
        self.switch = switch
        self.port = port
        self.params = params
        self.mac = cfg.mac if cfg.mac is not None else derived_mac(switch.name, port)
        self.enabled = False
        self.attached = False

    def attach(self) -> None:
        if not self.attached:
            self.switch.attach_feature(self.port, self)
            self.attached = True

    def detach(self, now_ns: int | None = None) -> None:
        """Disable, then remove from the switch (tags still in flight are no longer stripped)."""
        self.disable(now_ns)
        if self.attached:
            self.switch.detach_feature(self.port, self)
            self.attached = False

    def enable(self, now_ns: int | None = None) -> None:
        raise NotImplementedError

    def disable(self, now_ns: int | None = None) -> None:
        raise NotImplementedError

    def set_params(self, params: LGParams) -> None:
        raise NotImplementedError

    def _keyed_link(self) -> str | None:
        """The link whose key seals this port's LinkGuardian control, or None without keys.
        Both directions protected on one link cannot be authenticated (a reverse frame's
        data tag would sit in front of the sealed control tags): refused."""
        auth = self.switch.auth
        if auth is None:
            return None
        link = auth.link_of(self.port)
        if link is None:
            return None
        other = SENDER if self.role == RECEIVER else RECEIVER
        if (self.port, other) in _registry(self.switch):
            raise ConfigError("linkguardian", f"port {self.port}: authenticated LinkGuardian protects one direction "
                                              "of a link; both directions are enabled here (docs/security.md)")
        return str(link)

    def status(self) -> dict[str, Any]:
        return {"role": self.role, "port": self.port, "enabled": self.enabled, "attached": self.attached,
                "params": self.params.to_dict(), "counters": self.counters()}

    def counters(self) -> dict[str, Any]:
        raise NotImplementedError


class LGSenderFeature(_LGFeature):
    """The sender switch's protected egress port (see the module docstring)."""

    role = SENDER

    def __init__(self, switch: Switch, port: str, params: LGParams | None = None) -> None:
        super().__init__(switch, port, params)
        self.engine = LGSender(self.params, src_mac=self.mac, dst_mac=LG_CONTROL_MAC)
        #: bit c set: class c is stamped (0 while disabled)
        self._mask = 0
        self._repoll_at: int | None = None
        #: opens the receiver's sealed control frames when the link has keys (module docstring)
        self.opener: Opener | None = None
        #: frames refused with keys for a control tag outside the seal (unsealed_control)
        self.unsealed_control = 0

    # ------------------------------------------------------------- feature interface
    def on_egress(self, frame: bytes, cls: int, now_ns: int) -> bytes:
        if self._mask >> cls & 1:
            if self._repoll_at is None and self.engine.dummy_budget == 0:
                # The switch asks an idle source again only after a switch event, and a
                # dequeue is not one: without this, the dummies behind a lone frame (the
                # tail loss of §3.2) would wait for the next unrelated event. A timer that
                # is due at once is such an event.
                self._repoll_at = now_ns
            return self.engine.stamp(frame, now_ns)
        return frame  # other classes (retransmissions included) go out as they are

    def next_deadline(self) -> int | None:
        return self._repoll_at

    def on_timer(self, now_ns: int) -> None:
        self._repoll_at = None

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        if frame[12] != _LG_HI or frame[13] != _LG_LO:
            return frame
        if self.opener is not None:
            span = control_span(frame)
            if unsealed_control(frame, span):
                self.unsealed_control += 1  # refused: auth_refused["unsealed_control"]
                return None
            if span:
                try:
                    self.opener.open(frame[:span] + frame[-TRAILER_LEN:] if len(frame) >= span + TRAILER_LEN
                                     else frame[:span])
                except AuthFailure:
                    return None  # refused: counted by the opener, per reason
                frame = frame[:-TRAILER_LEN]
        fwd, retx = self.engine.receive(frame, now_ns)
        if retx and self.enabled:
            sw, port, cls = self.switch, self.port, self.params.retx_class
            for copy in retx:
                if not sw.enqueue(port, copy, cls, now_ns):
                    self.engine.c.retx_dropped += 1
        return fwd

    def idle_frame(self, now_ns: int) -> bytes | None:
        if not self.enabled:
            return None
        return self.engine.dummy(now_ns)

    # --------------------------------------------------------------------- control
    def enable(self, now_ns: int | None = None) -> None:
        self.attach()
        link = self._keyed_link()
        self.opener = self.switch.auth.opener(PURPOSE_LG_LINK, link, self.port) if link else None
        self.enabled = True
        self._mask = sum(1 << c for c in self.params.data_classes)

    def disable(self, now_ns: int | None = None) -> None:
        self.enabled = False
        self._mask = 0
        self.engine.flush()

    def set_params(self, params: LGParams) -> None:
        self.params = params
        self.engine.set_params(params)
        if self.enabled:
            self._mask = sum(1 << c for c in params.data_classes)

    def counters(self) -> dict[str, Any]:
        out = self.engine.counters()
        out["auth"] = self.opener is not None
        opened = asdict(self.opener.c if self.opener is not None else OpenerCounters())
        out["auth_ok"] = opened["ok"]
        out["auth_refused"] = {**{r: opened[r] for r in REASONS}, "unsealed_control": self.unsealed_control}
        state = self.switch.counters().get(self.port, {})
        per_class = state.get("pauses_rx_class", [])
        paused = state.get("paused", [])
        data = self.params.data_classes
        # the switch honours the receiver's 802.1Qbb frames itself; report what it saw
        out["pauses_rx"] = sum(per_class[c] for c in data if c < len(per_class))
        out["paused_now"] = any(paused[c] for c in data if c < len(paused))
        out["paused_ns"] = max((state.get("paused_ns", [0] * 8)[c] for c in data), default=0)
        return out


@dataclass(slots=True)
class ReceiverFeatureCounters:
    """What the receiver's feature counts beside its engine (``LGReceiverFeature.c``)."""

    notifications_dropped: int = 0  # loss notifications the switch did not queue
    released_later: int = 0  # frames the feature forwarded itself (held frames a repair, timer or disable released)
    passive_stripped: int = 0  # disabled: tags still in flight stripped, the frame delivered as it is
    passive_duplicates: int = 0  # disabled: further copies of a retransmitted frame dropped


class LGReceiverFeature(_LGFeature):
    """The receiver switch's protected ingress port (see the module docstring)."""

    role = RECEIVER

    def __init__(self, switch: Switch, port: str, params: LGParams | None = None) -> None:
        super().__init__(switch, port, params)
        self.engine = LGReceiver(self._engine_params(), src_mac=self.mac, dst_mac=LG_CONTROL_MAC)
        self.c = ReceiverFeatureCounters()
        #: seals the control frames toward the sender when the link has keys (see the module docstring)
        self.sealer: Sealer | None = None
        #: retransmitted (era, seq_no) delivered while passive: N copies of one frame may
        #: still be in flight when protection is disabled, and only the first may pass
        self._passive_seen: dict[int, None] = {}

    def set_timer_slack(self, slack_ns: int) -> None:
        """ackNoTimeout on a loaded host (Switch.set_timer_slack): LGReceiver.set_timer_slack."""
        self.engine.set_timer_slack(slack_ns)

    # ------------------------------------------------------------- feature interface
    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        if frame[12] != _LG_HI or frame[13] != _LG_LO:
            return frame  # unprotected traffic
        o = 14
        if len(frame) < 19:
            raise HeaderError("LGData", "truncated tag", 14)
        if frame[14] >> 6:
            found = find_tag(frame, LGType.DATA)
            if found is None:
                return frame  # leading ACKs / notifications for a sender feature on this port
            o = found
        first = frame[o]
        # remove the tag: the EtherType in front of it becomes its next_type
        inner = None if first & DATA_DUMMY else frame[:o - 2] + frame[o + 3:]
        if not self.enabled:
            return self._passive(first, frame[o + 1] << 8 | frame[o + 2], inner)
        eng = self.engine
        out = eng.on_data(first, frame[o + 1] << 8 | frame[o + 2], inner, now_ns)
        if eng.actions:
            self._emit(now_ns)
        n = len(out)
        if n == 1:
            return out[0]
        if n == 0:
            return None
        # a repaired hole releases held frames: all but the last are forwarded here, in
        # order, and the last is returned for the switch to forward after them
        for f in out[:-1]:
            self._forward(f, now_ns)
        return out[-1]

    def on_egress(self, frame: bytes, cls: int, now_ns: int) -> bytes:
        if self.enabled:
            frame = self.engine.piggyback(frame)
            if self.sealer is not None:
                return self._seal(frame)
        return frame

    def idle_frame(self, now_ns: int) -> bytes | None:
        if not self.enabled:
            return None
        frame = self.engine.courier()
        if frame is not None and self.sealer is not None:
            return self._seal(frame)
        return frame

    def _seal(self, frame: bytes) -> bytes:
        span = control_span(frame)
        if not span:
            return frame  # nothing of ours in it: reverse traffic goes out as it is
        assert self.sealer is not None
        return frame + self.sealer.seal(frame[:span])[span:]

    def next_deadline(self) -> int | None:
        return self.engine.next_deadline() if self.enabled else None

    def on_timer(self, now_ns: int) -> None:
        out = self.engine.on_timer(now_ns)
        self._emit(now_ns)
        for f in out:
            self._forward(f, now_ns)

    # --------------------------------------------------------------------- control
    def enable(self, now_ns: int | None = None) -> None:
        self.attach()
        self.engine.set_params(self._engine_params(), now_ns)  # the port's rate may have changed
        link = self._keyed_link()
        self.sealer = self.switch.auth.sealer(PURPOSE_LG_LINK, link, self.port) if link else None
        self.enabled = True
        self._passive_seen.clear()

    def disable(self, now_ns: int | None = None) -> None:
        if not self.enabled:
            return
        self.enabled = False
        out = self.engine.release_all()
        self._emit(now_ns)
        for f in out:
            self._forward(f, now_ns)

    def set_params(self, params: LGParams) -> None:
        self.params = params
        self.engine.set_params(self._engine_params(), self.switch.now)
        self._emit(None)

    def _engine_params(self) -> LGParams:
        """The settings with ``recirc_rate_bps`` None resolved to the protected link's rate
        (a recirculation port as fast as the link, as on Tofino; unpaced port: at once)."""
        p = self.params
        if p.recirc_rate_bps is not None:
            return p
        return p.with_changes(recirc_rate_bps=self.switch.config.port(self.port).rate_bps or 0)

    def counters(self) -> dict[str, Any]:
        out = self.engine.counters()
        out["auth"] = self.sealer is not None
        out["auth_sealed"] = self.sealer.c.sealed if self.sealer is not None else 0
        out.update(asdict(self.c))
        return out

    # ------------------------------------------------------------------- internals
    def _forward(self, frame: bytes, now_ns: int | None) -> None:
        self.c.released_later += 1
        forward_as_received(self.switch, self.port, frame, now_ns, after=self)

    def _passive(self, first: int, seq: int, inner: bytes | None) -> bytes | None:
        """Disabled: strip tags still in flight and deliver as is, each retransmission once."""
        if inner is None:
            return None
        if first & DATA_RETX:
            key = (first & DATA_ERA) << 12 | seq
            seen = self._passive_seen
            if key in seen:
                self.c.passive_duplicates += 1
                return None
            seen[key] = None
            if len(seen) > PASSIVE_RECORD:
                del seen[next(iter(seen))]
        self.c.passive_stripped += 1
        return inner

    def _emit(self, now_ns: int | None) -> None:
        """Carry out the engine's actions: control frames on the highest class first (as the
        engine queued them), then the pause/resume transitions of the data classes."""
        actions = self.engine.actions
        if not actions:
            return
        sw, port = self.switch, self.port
        cls = self.params.retx_class
        for t in actions.take(Transmit):
            if not sw.enqueue(port, t.data, cls, now_ns):
                self.c.notifications_dropped += 1
        for b in actions.take(Backpressure):
            for c in self.params.data_classes:
                sw.pause_class(port, c, b.paused, now_ns)


# ------------------------------------------------------------------ daemon / CLI API
_FEATURES: weakref.WeakKeyDictionary[Switch, dict[tuple[str, str], _LGFeature]] = weakref.WeakKeyDictionary()


def _registry(switch: Switch) -> dict[tuple[str, str], _LGFeature]:
    reg = _FEATURES.get(switch)
    if reg is None:
        reg = _FEATURES[switch] = {}
    return reg


_F = TypeVar("_F", "LGSenderFeature", "LGReceiverFeature")


def _enable(cls: type[_F], switch: Switch, port: str, params: LGParams | dict[str, Any] | None,
            now_ns: int | None) -> _F:
    if isinstance(params, dict):
        params = LGParams.from_dict(params)
    reg = _registry(switch)
    key = (port, cls.role)
    found = reg.get(key)
    if found is None:
        feature = cls(switch, port, params)
        reg[key] = feature
    else:
        assert isinstance(found, cls)  # the registry keys by role, and a role has one class
        feature = found
        if params is not None and params != feature.params:
            feature.set_params(params)
    feature.enable(now_ns)
    return feature


def enable_sender(switch: Switch, port: str, params: LGParams | dict[str, Any] | None = None,
                  now_ns: int | None = None) -> LGSenderFeature:
    """Protect ``port``'s egress (the sender side), attaching the feature on first use.

    ``params`` (an :class:`LGParams` or its dict form) replaces the current settings;
    None keeps them (defaults on first use). Raises ConfigError on bad settings or port.
    """
    return _enable(LGSenderFeature, switch, port, params, now_ns)


def enable_receiver(switch: Switch, port: str, params: LGParams | dict[str, Any] | None = None,
                    now_ns: int | None = None) -> LGReceiverFeature:
    """Run the receiver side on ``port``'s ingress, attaching the feature on first use."""
    return _enable(LGReceiverFeature, switch, port, params, now_ns)


def disable(switch: Switch, port: str, role: str | None = None, now_ns: int | None = None) -> list[str]:
    """Disable LinkGuardian on ``port`` (one role or both); return the roles disabled.

    The features stay attached, passive, so that tags still in flight are stripped.
    """
    if role is not None and role not in ROLES:
        raise ConfigError("linkguardian.role", f"must be one of {', '.join(ROLES)}, got {role!r}")
    switch.config.port(port)
    done = []
    for r in (SENDER, RECEIVER):  # the sender first: no new seq_nos while the receiver lets go
        f = _registry(switch).get((port, r))
        if f is not None and (role is None or role == r) and f.enabled:
            f.disable(now_ns)
            done.append(r)
    return done


def detach(switch: Switch, port: str, role: str | None = None, now_ns: int | None = None) -> list[str]:
    """Disable and remove the features from ``port`` (one role or both); return the roles removed."""
    reg = _registry(switch)
    done = []
    for r in (SENDER, RECEIVER):
        f = reg.get((port, r))
        if f is not None and (role is None or role == r):
            f.detach(now_ns)
            del reg[(port, r)]
            done.append(r)
    return done


def features(switch: Switch, port: str | None = None) -> list[_LGFeature]:
    """The LinkGuardian features of ``switch`` (of one port when given)."""
    return [f for (p, _), f in _registry(switch).items() if port is None or p == port]


def status(switch: Switch, port: str | None = None) -> dict[str, dict[str, Any]]:
    """``{port: {role: feature.status()}}`` for ``lg status`` (JSON-able)."""
    out: dict[str, dict[str, Any]] = {}
    for (p, r), f in _registry(switch).items():
        if port is None or p == port:
            out.setdefault(p, {})[r] = f.status()
    return out


__all__ = [
    "RECEIVER",
    "ROLES",
    "SENDER",
    "LGReceiverFeature",
    "LGSenderFeature",
    "ReceiverFeatureCounters",
    "detach",
    "disable",
    "enable_receiver",
    "enable_sender",
    "features",
    "forward_as_received",
    "status",
]
