"""tshark for the tests (the plugin's and the capture's): Debian's package, installed when missing
(we run as root in CI).

Wireshark refuses to run user Lua scripts (``-X lua_script:``) for root, so as root tshark runs
as ``nobody`` (``setpriv``), on files copied into a directory it can read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from scapy.utils import wrpcap

from netstack.wireshark import PLUGIN

NOBODY = 65534
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "NEEDRESTART_MODE": "a"}


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=300", *args], env={**os.environ, **APT_ENV},
                          capture_output=True, text=True, timeout=900, check=False)


def install_tshark() -> str:
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("tshark is not installed, and installing it needs root and apt-get")
    # wireshark-common asks whether non-root users may capture: answer no, without a dialog
    subprocess.run(["debconf-set-selections"], input="wireshark-common wireshark-common/install-setuid boolean false\n",
                   text=True, capture_output=True, check=False)
    args = ("install", "-y", "--no-install-recommends", "tshark")
    done = _apt(*args)
    if done.returncode != 0:  # a fresh machine may have no package lists yet
        _apt("update")
        done = _apt(*args)
    path = shutil.which("tshark")
    if done.returncode != 0 or path is None:
        pytest.fail(f"apt-get install tshark failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return path


class TShark:
    """Runs tshark with the plugin on pcaps written into a private, world-readable directory."""

    def __init__(self, exe: str, workdir: Path) -> None:
        self.exe = exe
        self.dir = workdir
        self.plugin = workdir / PLUGIN.name
        shutil.copyfile(PLUGIN, self.plugin)
        os.chmod(self.plugin, 0o644)
        self._n = 0

    def write(self, frames: Sequence[bytes]) -> Path:
        self._n += 1
        path = self.dir / f"capture-{self._n}.pcap"
        wrpcap(str(path), [bytes(f) for f in frames], linktype=1)  # DLT_EN10MB
        os.chmod(path, 0o644)
        return path

    def run(self, pcap: Path, *args: str, prefs: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
        cmd = [self.exe, "-n", "-X", f"lua_script:{self.plugin}", "-r", str(pcap)]
        for p in prefs:
            cmd += ["-o", p]
        cmd += list(args)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.dir), "LANG": "C.UTF-8"}
        if os.geteuid() == 0:
            cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0, f"{cmd}\n{done.stderr}"
        return done

    def json(self, pcap: Path, prefs: Sequence[str] = ()) -> tuple[list[dict[str, object]], str]:
        done = self.run(pcap, "-T", "json", "--no-duplicate-keys", prefs=prefs)
        return json.loads(done.stdout), done.stdout + done.stderr


def fields_of(packet: dict[str, object]) -> dict[str, list[str]]:
    """Every field of one packet of ``tshark -T json --no-duplicate-keys``, in tree order: abbrev -> values."""
    out: dict[str, list[str]] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str):
                    out.setdefault(key, []).append(value)
                elif isinstance(value, list):
                    for item in value:
                        if isinstance(item, str):
                            out.setdefault(key, []).append(item)
                        else:
                            walk(item)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(packet["_source"]["layers"])  # type: ignore[index]
    return out
