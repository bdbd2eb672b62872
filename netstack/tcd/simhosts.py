"""TCD's receiver and NP (:class:`netstack.tcd.np.TcdReceiver`), unchanged, as a simulated host app
on the skeleton of ``netstack.sim.transport``; TCD's senders (DCQCN's
``netstack.tcd.dcqcn.RateSender`` and TIMELY's ``netstack.tcd.timely.TimelySender``, picked by
``netstack.tcd.cc.make_sender``) run on its :class:`~netstack.sim.transport.EngineSender` as they
are (with ``honour_pfc``: a RoCE NIC), :func:`sender_app`."""

from __future__ import annotations

from typing import Any

from headers.errors import HeaderError
from headers.registry import UdpPort

from ..engine import SendTo
from ..sim.hosts import Host
from ..sim.packets import UDP_HEADERS, ip_payload_end
from ..sim.transport import EngineSender, EngineTimer, SenderEngine
from .np import TcdReceiver

#: the IP TOS of TCD data: ECT(0), so that switches can mark it
DATA_TOS = 0x02


class TcdReceiverApp(EngineTimer):
    """TCD's receiver and NP (``netstack.tcd.np.TcdReceiver``) on ``host``'s UDP ``port``: each data
    packet goes to the engine with its source (ip bytes, port) and its IP ECN bits; the CNPs and
    TIMELY's ACKs (its ``SendTo`` actions) go from ``port`` to the flow's source address and port,
    with IP TOS ``cnp_tos``, as the live receiver sends them."""

    def __init__(self, host: Host, receiver: TcdReceiver, port: int = int(UdpPort.TCD), cnp_tos: int = 0) -> None:
        self.host = host
        self.engine = receiver
        self.port = port
        self.cnp_tos = cnp_tos
        self.malformed = 0
        self._timer: int | None = None
        host.bind_udp(port, self.on_frame)
        host.add(self)

    def on_frame(self, frame: bytes) -> None:
        src = (frame[26:30], frame[34] << 8 | frame[35])
        try:
            self.engine.receive(frame[UDP_HEADERS:ip_payload_end(frame)], self.host.loop.now, src, frame[15] & 3)
        except HeaderError:
            self.malformed += 1
            return
        self._flush()


    def _flush(self) -> None:
        eng, host = self.engine, self.host
        if eng.actions:
            for act in eng.actions.take_all():
                if isinstance(act, SendTo):  # CNPs and ACKs: the receiver's only actions
                    ip, sport = act.dst
                    host.send(host.flow(ip, tos=self.cnp_tos).udp(self.port, sport, act.data))
        self._arm_timer()

    def result(self) -> dict[str, Any]:
        return {"flows": {str(k): v for k, v in self.engine.flows().items()}, **self.engine.counters(),
                "malformed": self.malformed}


def sender_app(host: Host, dst: str, engine: SenderEngine, *, honour_pfc: bool = True,
               port: int = int(UdpPort.TCD), tos: int = DATA_TOS) -> EngineSender:
    """A TCD sender engine (DCQCN's or TIMELY's, ``netstack.tcd.cc.make_sender``) on ``host``, to
    ``dst``'s UDP ``port`` from an ephemeral port, its data with IP TOS ``tos`` (ECT(0)); with
    ``honour_pfc`` it holds while its host is paused, as a RoCE NIC. Its CNPs and ACKs come back
    to that port."""
    return EngineSender(host, dst, engine, port, tos=tos, honour_pfc=honour_pfc)


__all__ = ["DATA_TOS", "TcdReceiverApp", "sender_app"]
