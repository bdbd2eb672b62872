"""Kernel-injected link impairment: random loss and corruption on the egress of a veth.

Two backends do the same job:

``netem``
    ``tc qdisc replace dev IF root netem loss random Q% corrupt P%``. netem flips one random
    bit at a random position of the frame. Stock Debian/Ubuntu kernels have it; this project's
    development and CI kernels do not (``CONFIG_NET_SCH_NETEM`` is not set).

``nft``
    A ``netdev`` table per namespace, ``netstack_<prefix>``, with one chain per impaired
    interface on the netdev **egress** hook (kernel >= 5.16, nft >= 1.0.1)::

        chain egress_IF {                    # type filter hook egress device "IF" priority 0
            numgen random mod 1000000 < L counter drop                      # loss
            numgen random mod 1000000 < C counter jump corrupt_IF           # corruption
        }
        chain corrupt_IF {
            @ll,OFF*8,8 0x55 @ll,OFF*8,8 set 0xaa counter return
            @ll,OFF*8,8 set 0x55 counter
        }

    nft has no xor on payload, so "overwrite a byte" would leave a frame intact whenever the
    byte already held the value written. The two rules make the change certain: a byte that
    is 0x55 becomes 0xaa, any other byte becomes 0x55. So every frame selected by the random
    draw is really corrupted and the effective corruption rate is exactly C / 1e6 for every
    frame longer than OFF bytes (shorter frames pass untouched: the payload write fails and
    nft skips the rule). The probability resolution is 1e-6; anything finer needs netem or
    the switch's own loss model. Loss and corruption draw independently; corruption applies
    to the frames that survived loss (netem does the same).

    The corrupted byte is at a fixed offset, ``DEFAULT_CORRUPT_OFFSET`` = 22 from the start of
    the Ethernet header: inside every frame netstack sends (a LinkGuardian ACK without padding
    is 23 bytes with its FCS) and covered by the software FCS, so the receiving switch sees an
    FCS failure -- corruption becomes corruption *loss*, as with a real MAC. On a plain IPv4
    frame byte 22 is the TTL, so a kernel receiver drops it as an IP header checksum error
    (``IpExt InCsumErrors``). On links without the software FCS, a corrupted ARP frame has a
    wrong sender MAC and is *accepted* by the kernel; impair such links with care.

Both backends run the ``nft``/``tc`` binaries inside the namespace with ``ip netns exec``
(pyroute2 has no nftables support for payload mangling and its netem lacks ``corrupt``).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NetstackError
from .model import MAX_DELAY_NS, Backend, netns_name
from .nsenter import iproute, netns_exec_argv, netns_path

#: The nft backend's probability denominator (``numgen random mod NFT_MODULUS``).
NFT_MODULUS = 1_000_000
#: Byte offset (from the first byte of the Ethernet header) the nft backend corrupts.
DEFAULT_CORRUPT_OFFSET = 22
#: Every nft table netstack creates starts with this, then the topology prefix.
NFT_TABLE_PREFIX = "netstack_"
_MARK_VALUE = 0x55
_ALT_VALUE = 0xAA
_COMMENT_RE = re.compile(r"^netstack (loss|corrupt) (\d+)/(\d+)(?: offset (\d+))?$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$")


class ImpairmentError(NetstackError, RuntimeError):
    """An impairment could not be applied, read or removed (the message says which and why)."""


# --------------------------------------------------------------------------- pure helpers


def nft_table_name(prefix: str) -> str:
    return f"{NFT_TABLE_PREFIX}{prefix}"


def nft_threshold(p: float, what: str = "probability") -> int:
    """``K`` such that ``numgen random mod 1000000 < K`` fires with probability ``p`` (rounded)."""
    if not 0.0 <= p <= 1.0:
        raise ImpairmentError(f"{what} {p!r} is not in [0, 1]")
    k = round(p * NFT_MODULUS)
    if p > 0 and k == 0:
        raise ImpairmentError(
            f"{what} {p:g} is below the nft backend's resolution of {1 / NFT_MODULUS:g}; "
            "use the netem backend on a kernel that has it, or the switch's own loss model"
        )
    return k


def _check_ifname(iface: str) -> None:
    if not isinstance(iface, str) or not _IFNAME_RE.match(iface):
        raise ImpairmentError(f"{iface!r} is not an interface name")


def nft_script(prefix: str, iface: str, corrupt: float = 0.0, loss: float = 0.0,
               corrupt_offset: int = DEFAULT_CORRUPT_OFFSET) -> str:
    """The nft transaction that (re)places the impairment on ``iface``. Atomic: one ``nft -f``."""
    _check_ifname(iface)
    if not 0 <= corrupt_offset <= 1500:
        raise ImpairmentError(f"corrupt_offset {corrupt_offset} is not a byte offset in a frame")
    k_loss = nft_threshold(loss, "loss")
    k_corrupt = nft_threshold(corrupt, "corrupt")
    t = nft_table_name(prefix)
    egress, corrupt_chain = f"egress_{iface}", f"corrupt_{iface}"
    bits = f"@ll,{corrupt_offset * 8},8"
    lines = [
        f"add table netdev {t}",
        f'add chain netdev {t} {egress} {{ type filter hook egress device "{iface}" priority 0 ; policy accept ; }}',
        f"flush chain netdev {t} {egress}",
        f"add chain netdev {t} {corrupt_chain}",
        f"flush chain netdev {t} {corrupt_chain}",
    ]
    if k_loss:
        lines.append(
            f"add rule netdev {t} {egress} {_draw(k_loss)}counter drop "
            f'comment "netstack loss {k_loss}/{NFT_MODULUS}"'
        )
    if k_corrupt:
        lines += [
            f"add rule netdev {t} {corrupt_chain} {bits} {_MARK_VALUE:#04x} "
            f"{bits} set {_ALT_VALUE:#04x} counter return",
            f"add rule netdev {t} {corrupt_chain} {bits} set {_MARK_VALUE:#04x} counter",
            f"add rule netdev {t} {egress} {_draw(k_corrupt)}counter "
            f'jump {corrupt_chain} comment "netstack corrupt {k_corrupt}/{NFT_MODULUS} offset {corrupt_offset}"',
        ]
    return "\n".join(lines) + "\n"


def _draw(k: int) -> str:
    # The numgen value is typed 0..999999, so "< 1000000" does not parse: probability 1 is
    # simply no condition.
    return "" if k >= NFT_MODULUS else f"numgen random mod {NFT_MODULUS} < {k} "


def _percent(p: float) -> str:
    return f"{p * 100:.10g}%"


@dataclass(frozen=True)
class Shaping:
    """Delay, jitter, duplication and reordering of a link's egress, as tc-netem(8) does them
    (the switch backend's model does the same: netstack.switch.ImpairmentConfig). nft cannot
    hold or copy a frame, so only netem and the switch backend shape."""

    delay_ns: int = 0
    jitter_ns: int = 0
    duplicate: float = 0.0
    reorder: float = 0.0

    def __post_init__(self) -> None:
        for what, t in (("delay", self.delay_ns), ("jitter", self.jitter_ns)):
            if not isinstance(t, int) or t < 0:
                raise ImpairmentError(f"{what} {t!r} ns is not a time (integer ns >= 0)")
            if t > MAX_DELAY_NS:
                raise ImpairmentError(f"{what} {t / 1e9:g} s is above the limit of an hour (a typo?)")
        for what, p in (("duplicate", self.duplicate), ("reorder", self.reorder)):
            if not 0.0 <= p <= 1.0:
                raise ImpairmentError(f"{what} {p!r} is not a probability in [0, 1]")
        if self.reorder and not self.delay_ns:
            raise ImpairmentError("reorder needs a delay to reorder against (netem sends the reordered frames "
                                  "at once and delays the others)")

    def __bool__(self) -> bool:
        return bool(self.delay_ns or self.jitter_ns or self.duplicate or self.reorder)

    def model(self) -> dict[str, Any]:
        """The switch model's fields (``ImpairmentConfig``) for this shaping."""
        return {"delay_ns": self.delay_ns, "jitter_ns": self.jitter_ns, "duplicate": self.duplicate,
                "reorder": self.reorder}


NO_SHAPING = Shaping()


def netem_argv(iface: str, corrupt: float = 0.0, loss: float = 0.0, shaping: Shaping = NO_SHAPING) -> list[str]:
    """``tc`` command placing a netem root qdisc with the given loss/corruption/shaping on ``iface``."""
    _check_ifname(iface)
    for what, p in (("corrupt", corrupt), ("loss", loss)):
        if not 0.0 <= p <= 1.0:
            raise ImpairmentError(f"{what} {p!r} is not in [0, 1]")
    argv = ["tc", "qdisc", "replace", "dev", iface, "root", "netem"]
    if shaping.delay_ns or shaping.jitter_ns:
        argv += ["delay", f"{shaping.delay_ns / 1000:.10g}us"]
        if shaping.jitter_ns:
            argv.append(f"{shaping.jitter_ns / 1000:.10g}us")
    if loss > 0:
        argv += ["loss", "random", _percent(loss)]
    if corrupt > 0:
        argv += ["corrupt", _percent(corrupt)]
    if shaping.duplicate > 0:
        argv += ["duplicate", _percent(shaping.duplicate)]
    if shaping.reorder > 0:
        argv += ["reorder", _percent(shaping.reorder)]
    return argv


def netem_clear_argv(iface: str) -> list[str]:
    _check_ifname(iface)
    return ["tc", "qdisc", "del", "dev", iface, "root"]


def parse_netem_qdiscs(tc_json: str | list[dict[str, Any]]) -> dict[str, Any] | None:
    """The impairment a ``tc -s -j qdisc show dev IF`` listing describes, or None without a root netem.

    iproute2 prints netem probabilities in JSON as fractions (0.01 = 1 %).
    """
    qdiscs = json.loads(tc_json) if isinstance(tc_json, str) else tc_json
    for q in qdiscs or []:
        if q.get("kind") != "netem" or not q.get("root", False):
            continue
        opts = q.get("options", {}) or {}
        loss = float((opts.get("loss-random") or {}).get("loss", 0.0))
        corrupt = float((opts.get("corrupt") or {}).get("corrupt", 0.0))
        delay = opts.get("delay") or {}  # seconds, as iproute2 prints times in JSON
        return {
            "backend": "netem",
            "corrupt": corrupt,
            "loss": loss,
            "delay_ns": round(float(delay.get("delay", 0.0)) * 1e9),
            "jitter_ns": round(float(delay.get("jitter", 0.0)) * 1e9),
            "duplicate": float((opts.get("duplicate") or {}).get("duplicate", 0.0)),
            "reorder": float((opts.get("reorder") or {}).get("reorder", 0.0)),
            "dropped": int(q.get("drops", 0)),
            "corrupted": None,  # netem does not count the frames it corrupts
            "sent": int(q.get("packets", 0)),
        }
    return None


def parse_nft_table(nft_json: str | dict[str, Any], iface: str) -> dict[str, Any] | None:
    """The impairment an ``nft -j list table`` listing holds for ``iface``, or None."""
    doc = json.loads(nft_json) if isinstance(nft_json, str) else nft_json
    egress = f"egress_{iface}"
    found_chain = False
    result: dict[str, Any] = {"backend": "nft", "corrupt": 0.0, "loss": 0.0, "corrupt_offset": None,
                              "dropped": 0, "corrupted": 0}
    for item in doc.get("nftables", []):
        if "chain" in item and item["chain"].get("name") == egress:
            found_chain = True
        rule = item.get("rule")
        if not rule or rule.get("chain") != egress:
            continue
        m = _COMMENT_RE.match(rule.get("comment", ""))
        if not m:
            continue
        kind, k, mod, offset = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        packets = 0
        for expr in rule.get("expr", []):
            if "counter" in expr:
                packets = int(expr["counter"].get("packets", 0))
        if kind == "loss":
            result["loss"] = k / mod
            result["dropped"] = packets
        else:
            result["corrupt"] = k / mod
            result["corrupted"] = packets
            result["corrupt_offset"] = int(offset) if offset is not None else None
    if not found_chain or (result["loss"] == 0 and result["corrupt"] == 0):
        return None
    return result


# --------------------------------------------------------------------------- running tools


def _resolve_ns(prefix: str, iface_ns: str | None) -> str | None:
    """``None`` is the root namespace; a bare node name ``sw1`` means ``<prefix>-sw1``."""
    if iface_ns is None:
        return None
    if "-" in iface_ns or "/" in iface_ns:
        return iface_ns
    return netns_name(prefix, iface_ns)


def _ns_argv(ns: str | None, argv: list[str]) -> list[str]:
    return argv if ns is None else netns_exec_argv(ns, argv)


def _ns_exists(ns: str) -> bool:
    return os.path.exists(netns_path(ns))


def need_program(binary: str, package: str) -> None:
    """Raise :class:`ImpairmentError` naming the package to install if ``binary`` is not on PATH."""
    if shutil.which(binary) is None:
        raise ImpairmentError(f"the {binary!r} program is needed (apt-get install {package})")


def _run(ns: str | None, argv: list[str], stdin: str | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    if ns is not None:
        need_program("nsenter" if ns.startswith("/") else "ip", "util-linux" if ns.startswith("/") else "iproute2")
        if not _ns_exists(ns):
            raise ImpairmentError(f"network namespace {ns!r} does not exist")
    full = _ns_argv(ns, argv)
    proc = subprocess.run(full, input=stdin, capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        where = f" in namespace {ns}" if ns else ""
        detail = (proc.stderr or proc.stdout).strip()
        raise ImpairmentError(f"{' '.join(argv)}{where} failed (exit {proc.returncode}): {detail}")
    return proc


def _nft_table_json(ns: str | None, prefix: str) -> dict[str, Any] | None:
    if shutil.which("nft") is None:
        return None
    proc = _run(ns, ["nft", "-j", "list", "table", "netdev", nft_table_name(prefix)], check=False)
    if proc.returncode != 0:
        return None  # no such table
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ImpairmentError(f"cannot parse `nft -j` output: {exc}") from None


def _netem_json(ns: str | None, iface: str) -> list[dict[str, Any]] | None:
    if shutil.which("tc") is None:
        return None
    proc = _run(ns, ["tc", "-s", "-j", "qdisc", "show", "dev", iface], check=False)
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        return None


def _drop_table_if_empty(ns: str | None, prefix: str) -> None:
    doc = _nft_table_json(ns, prefix)
    if doc is not None and not any("chain" in item for item in doc.get("nftables", [])):
        _run(ns, ["nft", "delete", "table", "netdev", nft_table_name(prefix)], check=False)


# --------------------------------------------------------------------------- netem probe

_netem_cache: bool | None = None


def _netem_from_kernel_config() -> bool | None:
    """True/False when /proc/config.gz settles it, None when it does not (module or no config)."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith("CONFIG_NET_SCH_NETEM="):
                    return True if line.strip().endswith("=y") else None
                if line.startswith("# CONFIG_NET_SCH_NETEM is not set"):
                    return False
    except OSError:
        return None
    return False  # a config without the option at all: built without netem support


def _netem_module_present() -> bool:
    if Path("/sys/module/sch_netem").exists():
        return True
    moddir = Path("/lib/modules") / platform.release()
    if not moddir.is_dir():
        return False
    return any(moddir.rglob("sch_netem.ko*"))


def _netem_live_probe() -> bool:
    """Try to attach netem to a veth in a scratch namespace (needs root); leaves nothing behind."""
    if os.geteuid() != 0:
        return False
    from pyroute2 import IPRoute, NetlinkError, netns

    scratch = f"netstack-probe-{os.getpid()}"
    try:
        netns.create(scratch)
    except OSError:
        return False
    try:
        with IPRoute(netns=scratch, flags=0) as ipr:
            ipr.link("add", ifname="probe0", kind="veth", peer="probe1")
            idx = ipr.link_lookup(ifname="probe0")[0]
            try:
                ipr.tc("add", "netem", index=idx, handle="1:")
            except NetlinkError as exc:
                # ENOENT is the kernel's "unknown qdisc kind"; any other refusal means the
                # kind exists and only the (empty) parameters displeased it.
                return exc.code != errno.ENOENT
            return True
    except Exception:
        return False
    finally:
        with contextlib.suppress(OSError):
            netns.remove(scratch)


def netem_available(refresh: bool = False) -> bool:
    """Whether this kernel can run the netem qdisc. No side effects (a live probe cleans up).

    Order: the kernel config (``CONFIG_NET_SCH_NETEM``) when it is definite; else a loaded or
    installed ``sch_netem`` module; else (as root) a real netem qdisc on a veth in a scratch
    namespace that is removed again. The answer is cached per process.
    """
    global _netem_cache
    if _netem_cache is not None and not refresh:
        return _netem_cache
    verdict = _netem_from_kernel_config()
    if verdict is None:
        verdict = True if _netem_module_present() else _netem_live_probe()
    _netem_cache = verdict
    return verdict


def resolve_backend(backend: str | Backend = "auto") -> Backend:
    """``auto`` -> netem where the kernel has it, else nft."""
    try:
        b = Backend(backend)
    except ValueError:
        raise ImpairmentError(f"{backend!r} is not a backend (one of: auto, netem, nft)") from None
    if b is Backend.SWITCH:
        raise ImpairmentError("the 'switch' backend is the switch daemon's own model, not the kernel's: it is set "
                              "on the sending switch port (netstack impair --backend switch, or a topology file)")
    if b is Backend.AUTO:
        return Backend.NETEM if netem_available() else Backend.NFT
    return b


def choose_backend(requested: str | Backend, *, shapes: bool, sender_is_switch: bool) -> Backend:
    """The backend that impairs a link end: ``auto`` is netem where the kernel has it; else the
    switch's own model when the link is shaped (nft cannot delay, copy or reorder) and a switch
    sends, else nft. Raises ImpairmentError when nothing here can do what is asked."""
    try:
        b = Backend(requested)
    except ValueError:
        raise ImpairmentError(f"{requested!r} is not a backend (one of: auto, netem, nft, switch)") from None
    if b is Backend.SWITCH:
        if not sender_is_switch:
            raise ImpairmentError("the switch backend needs a switch at the sending end (use netem or nft)")
        return b
    if b is Backend.AUTO:
        if netem_available():
            return Backend.NETEM
        if not shapes:
            return Backend.NFT
        if sender_is_switch:
            return Backend.SWITCH
        raise ImpairmentError("delay, jitter, duplicate and reorder need netem, which this kernel lacks, or a "
                              "switch at the sending end (its own model shapes its egress): impair the "
                              "other direction, or run on a kernel with sch_netem")
    if b is Backend.NFT and shapes:
        raise ImpairmentError("nft cannot delay, jitter, duplicate or reorder frames: use backend netem (a kernel "
                              "with sch_netem) or switch (a switch at the sending end)")
    return b


# --------------------------------------------------------------------------- public API


def apply_impairment(prefix: str, iface_ns: str | None, iface: str, corrupt: float = 0.0, loss: float = 0.0,
                     backend: str | Backend = "auto", *, shaping: Shaping = NO_SHAPING,
                     corrupt_offset: int = DEFAULT_CORRUPT_OFFSET) -> Backend | None:
    """Impair the egress of ``iface`` in namespace ``iface_ns``; replaces any earlier impairment.

    ``iface_ns`` is a namespace name (``ns-sw1``), a bare node name (``sw1``, meaning
    ``<prefix>-sw1``; node names never contain '-') or None for the caller's own namespace
    (normally the root namespace). ``prefix`` names the nft table
    (``netstack_<prefix>``) so that ``teardown(prefix)`` finds it. ``corrupt``/``loss`` are
    per-frame probabilities; ``shaping`` (delay, jitter, duplicate, reorder) needs netem. Returns
    the backend used, or None when nothing is asked (a clear).
    """
    _check_ifname(iface)
    ns = _resolve_ns(prefix, iface_ns)
    for what, p in (("corrupt", corrupt), ("loss", loss)):
        if not isinstance(p, int | float) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
            raise ImpairmentError(f"{what} {p!r} is not a probability in [0, 1]")
    chosen = resolve_backend(backend)
    if shaping and chosen is Backend.NFT:
        raise ImpairmentError("nft cannot delay, jitter, duplicate or reorder frames"
                              + ("; this kernel has no netem" if not netem_available() else "")
                              + ": use netem, or the switch backend at a switch's egress")
    _check_iface_exists(ns, iface)
    if corrupt == 0 and loss == 0 and not shaping:
        clear_impairment(prefix, iface_ns, iface)
        return None
    if chosen is Backend.NFT:
        need_program("nft", "nftables")
        script = nft_script(prefix, iface, corrupt, loss, corrupt_offset)
        _clear_netem(ns, iface)
        try:
            _run(ns, ["nft", "-f", "-"], stdin=script)
        except ImpairmentError as exc:
            raise ImpairmentError(
                f"nft impairment on {iface} failed; this needs the netdev egress hook "
                f"(kernel >= 5.16, nft >= 1.0.1): {exc}"
            ) from None
    else:
        if not netem_available():
            raise ImpairmentError("this kernel has no netem (CONFIG_NET_SCH_NETEM); use backend='nft'")
        need_program("tc", "iproute2")
        _clear_nft(ns, prefix, iface)
        _run(ns, netem_argv(iface, corrupt, loss, shaping))
    return chosen


def _check_iface_exists(ns: str | None, iface: str) -> None:
    # Recent kernels accept a netdev hook on a device that does not exist (yet) and the
    # chain then silently does nothing: refuse a misspelt interface here instead.
    if ns is not None and not _ns_exists(ns):
        raise ImpairmentError(f"network namespace {ns!r} does not exist")
    with iproute(ns) as ipr:
        if not ipr.link_lookup(ifname=iface):
            where = f"namespace {ns}" if ns else "the root namespace"
            raise ImpairmentError(f"no interface {iface!r} in {where}")


def _clear_nft(ns: str | None, prefix: str, iface: str) -> bool:
    doc = _nft_table_json(ns, prefix)
    if doc is None:
        return False
    names = {item["chain"]["name"] for item in doc.get("nftables", []) if "chain" in item}
    script = "".join(
        f"delete chain netdev {nft_table_name(prefix)} {chain}\n"
        for chain in (f"egress_{iface}", f"corrupt_{iface}")
        if chain in names
    )
    if script:
        _run(ns, ["nft", "-f", "-"], stdin=script)
    _drop_table_if_empty(ns, prefix)
    return bool(script)


def _clear_netem(ns: str | None, iface: str) -> bool:
    qdiscs = _netem_json(ns, iface)
    if qdiscs is None or parse_netem_qdiscs(qdiscs) is None:
        return False
    _run(ns, netem_clear_argv(iface))
    return True


def clear_impairment(prefix: str, iface_ns: str | None, iface: str) -> bool:
    """Remove whatever impairment (either backend) is on ``iface``. True if there was one."""
    _check_ifname(iface)
    ns = _resolve_ns(prefix, iface_ns)
    removed_nft = _clear_nft(ns, prefix, iface)
    removed_netem = _clear_netem(ns, iface)
    return removed_nft or removed_netem


def active_impairment(prefix: str, iface_ns: str | None, iface: str) -> dict[str, Any] | None:
    """The impairment on ``iface``, or None.

    ``{"backend": "nft"|"netem", "corrupt": p, "loss": p, "dropped": frames dropped so far,
    "corrupted": frames corrupted so far (None for netem), ...}``; nft also gives
    ``corrupt_offset``. The counters are the kernel's, so they are exact: LinkGuardian's
    "actual loss" on a link is ``dropped + corrupted`` over the frames sent.
    """
    _check_ifname(iface)
    ns = _resolve_ns(prefix, iface_ns)
    doc = _nft_table_json(ns, prefix)
    if doc is not None:
        found = parse_nft_table(doc, iface)
        if found is not None:
            return found
    qdiscs = _netem_json(ns, iface)
    if qdiscs is not None:
        return parse_netem_qdiscs(qdiscs)
    return None


def delete_nft_table(prefix: str, iface_ns: str | None = None) -> bool:
    """Delete the whole ``netstack_<prefix>`` table in a namespace (root by default). True if it existed."""
    if shutil.which("nft") is None:
        return False
    ns = _resolve_ns(prefix, iface_ns)
    if _nft_table_json(ns, prefix) is None:
        return False
    _run(ns, ["nft", "delete", "table", "netdev", nft_table_name(prefix)])
    return True


def list_nft_tables(iface_ns: str | None = None) -> list[str]:
    """Names of the netstack nft tables in a namespace (root by default)."""
    if shutil.which("nft") is None:
        return []
    proc = _run(iface_ns, ["nft", "-j", "list", "tables", "netdev"], check=False)
    if proc.returncode != 0:
        return []
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return []
    return sorted(
        item["table"]["name"]
        for item in doc.get("nftables", [])
        if "table" in item and item["table"].get("name", "").startswith(NFT_TABLE_PREFIX)
    )
