"""Reaching into a network namespace from the calling thread: :func:`in_netns` and :func:`iproute`.

Both the builder (``netstack.topo.netns``) and the impairment code (``netstack.topo.impair``)
need these. They live here, importing nothing from the rest of the package, because the
builder applies impairments and so imports ``impair``: were they in ``netns``, ``impair``
would have to import it back, a cycle.

Must run before any uvloop policy is installed (docs/architecture.md "The live runtime":
uvloop breaks pyroute2), as root.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")

NETNS_DIR = "/run/netns"
_CLONE_NEWNET = 0x40000000

_libc: ctypes.CDLL | None = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


#: Set by a container's node runner (netstack.container.node): the namespace name the node
#: would have under ``netstack up``, which is the process's own namespace there.
SELF_NETNS_ENV = "NETSTACK_SELF_NETNS"


def netns_path(ns: str) -> str:
    """The file of namespace ``ns``: a name under /run/netns, or a path as it is (a container's
    ``/proc/<pid>/ns/net``, netstack.container.discover)."""
    return ns if ns.startswith("/") else os.path.join(NETNS_DIR, ns)


def netns_exec_argv(ns: str, argv: list[str]) -> list[str]:
    """argv that runs ``argv`` in namespace ``ns``: ``ip netns exec`` for a named namespace,
    ``nsenter --net=`` for a path; as is in the namespace the process already is in."""
    if ns == os.environ.get(SELF_NETNS_ENV):
        return list(argv)
    if ns.startswith("/"):
        return ["nsenter", f"--net={ns}", "--", *argv]
    return ["ip", "netns", "exec", ns, *argv]


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the body with the *calling thread* in network namespace ``name``.

    Sockets created inside stay in that namespace after the block; other threads are not
    affected. Use it to open sockets or netlink handles in a node from a root-namespace process.
    """
    target = os.open(netns_path(name), os.O_RDONLY)
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(back)
    finally:
        os.close(target)
        os.close(back)


class NamespaceThreadError(RuntimeError):
    """:func:`call_in_netns` could not start its thread: nothing was looked at, so nothing may be
    concluded about the namespace (a caller that reads "not readable" as "not ours" re-raises it)."""


def call_in_netns(name: str, fn: Callable[[], _T]) -> _T:
    """``fn()`` run in network namespace ``name`` on a short-lived thread of its own: its result,
    or its exception raised here.

    For a look into a namespace that is not the caller's to keep (another testbed's, another
    user's). ``netstack down`` finds the processes to stop by ``/proc/<pid>/ns/net``, which is the
    namespace of the process's *main* thread: a process whose main thread is inside one of the
    testbed's namespaces at that moment is taken for a daemon living there and gets SIGTERM.
    :func:`in_netns` on the main thread of, say, ``netstack ls`` (which reads every testbed's
    marker) was found there in 30 % of samples taken while it listed; on a thread of its own,
    never. The thread has no asyncio loop running either, which pyroute2's synchronous handle
    needs (inside a running loop it fails: "This event loop is already running"). The body must
    do all its work inside: a pyroute2 handle made on the thread answers for the caller's
    namespace when used from another thread."""
    got: dict[str, Any] = {}

    def body() -> None:
        try:
            with in_netns(name):
                got["value"] = fn()
        except BaseException as exc:  # (handed to the caller, whatever it is)
            got["error"] = exc

    worker = threading.Thread(target=body, name=f"netns {name}", daemon=True)
    try:
        worker.start()
    except RuntimeError as exc:  # ("can't start new thread": a pids or memory limit)
        raise NamespaceThreadError(f"cannot start a thread to look into namespace {name!r}: {exc}") from exc
    worker.join()
    if "error" in got:
        raise got["error"]
    return got["value"]  # type: ignore[no-any-return]


@contextlib.contextmanager
def iproute(ns: str | None) -> Iterator[Any]:
    """A pyroute2 ``IPRoute`` netlink handle in namespace ``ns`` (None: the caller's own), closed on exit."""
    from pyroute2 import IPRoute

    if ns is None:
        ipr = IPRoute()
    else:
        with in_netns(ns):
            ipr = IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


def loopback_links(ns: str) -> list[Any]:
    """pyroute2's messages for ``lo`` in namespace ``ns`` (where netstack's and a lab's ownership
    markers are: the interface alias), read as :func:`call_in_netns` reads: the namespace may
    be someone else's."""

    def read() -> list[Any]:
        with iproute(None) as ipr:
            return list(ipr.get_links(ifname="lo"))

    return call_in_netns(ns, read)
