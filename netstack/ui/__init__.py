"""``netstack ui``: a live web view of a running testbed (docs/ui.md).

A local aiohttp server (the optional extra ``netstack[ui]``) draws the topology as a graph and
shows, at least once a second, every link's state and every switch port's counters, with each
protocol's own view of the port. It reads the daemons' control sockets, one poller for all
clients, and changes state (link down/up, impairments, a protocol's link actions) only for a
request that carries the token.

The package, by job (each module imports only those before it in this list):

- ``layout``: the graph: nodes, links and ports of a run state, in layers (hosts, switch tiers,
  other node kinds), with positions;
- ``views``: the protocols' per-port views, found through the registry (``netstack.protocols``,
  ``ProtocolPlugin.ui``), and the checks every view passes before it reaches a page;
- ``snapshot``: one poll of the testbed: each daemon's status and views, link states,
  impairments (blocking; run in a thread);
- ``history``: what one snapshot cannot say alone: rates of cumulative counters and the last
  minute of every view's state (TCD's ternary state, a timeline);
- ``actions``: the requests that change state, checked (:class:`UIInputError`: a 400) and
  carried out through the library functions the CLI uses;
- ``server``: the aiohttp application: routes, the token, the poller task, static files and
  the reports directory.

**A protocol's view** (its ``ui`` module): ``port_views(kind, status, ask)`` gets one daemon's
kind (``"switch"``, or a node kind a protocol registers), its answer to ``status``, and
``ask(cmd, **args)``, which sends another control request to the same daemon; it returns
``{port: [view, ...]}`` for the ports it has something to say about (``""``: the node as a whole).
A view is a JSON object:

- ``title`` (required): what it is ("LinkGuardian sender", "TCD");
- ``rows``: ``[[label, value], ...]``, shown as they are;
- ``rates``: ``{label: cumulative count}``: the page shows the count per second between polls;
- ``state``: ``{"value", "label"?, "tone": "ok" | "warn" | "bad" | "off"}``: a discrete state,
  coloured by its tone, with a timeline of the last minute;
- ``gauge``: ``{"label", "value", "max", "unit"?}``: an occupancy (a buffer, a window);
- ``link``: ``"protected"`` marks the port's link as protected by this protocol.

Optionally ``link_actions(state, link) -> {action: button label}`` (what it can do to that link of
the run state) and ``link_action(prefix, link, action) -> dict`` (do it). A view module never
raises for a daemon it has nothing to say about: it returns ``{}``.
"""

from __future__ import annotations

from ..errors import NetstackError

#: the message when aiohttp is missing (pyproject's optional extra ``ui``)
INSTALL_HINT = "netstack ui needs aiohttp: pip install 'netstack[ui]' (scripts/install.sh installs it)"


class UIError(NetstackError):
    """``netstack ui`` cannot start or serve as asked; the message says what to do."""


class UIInputError(UIError):
    """A request to the server that is not well formed (a 400 with this message)."""


def require_aiohttp() -> None:
    """UIError with :data:`INSTALL_HINT` when aiohttp cannot be imported."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise UIError(INSTALL_HINT) from None


__all__ = ["INSTALL_HINT", "UIError", "UIInputError", "require_aiohttp"]
