"""``netstack wireshark``: --print, --install (--dir), and clear errors."""

from __future__ import annotations

import subprocess
import sys

from netstack.cli import main
from netstack.wireshark import PLUGIN, personal_plugin_dir


def test_print_shows_the_plugin_in_the_package(capsys):
    assert main(["wireshark", "--print"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(PLUGIN) and PLUGIN.is_file() and PLUGIN.name == "netstack.lua"
    assert "Proto(" in PLUGIN.read_text()


def test_install_into_dir(tmp_path, capsys):
    target = tmp_path / "a" / "plugins"
    assert main(["wireshark", "--install", "--dir", str(target)]) == 0
    installed = target / "netstack.lua"
    assert installed.read_bytes() == PLUGIN.read_bytes()
    assert f"installed {installed}" in capsys.readouterr().out
    assert main(["wireshark", "--dir", str(target)]) == 0  # --dir alone installs; a second time updates
    assert f"updated {installed}" in capsys.readouterr().out


def test_install_defaults_to_the_personal_plugin_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert personal_plugin_dir() == tmp_path / ".local" / "lib" / "wireshark" / "plugins"
    assert main(["wireshark", "--install", "--print"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(PLUGIN)
    assert (tmp_path / ".local/lib/wireshark/plugins/netstack.lua").is_file()
    assert "installed" in out.err


def test_unwritable_dir_is_exit_1_without_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = subprocess.run([sys.executable, "-m", "netstack.cli", "wireshark", "--install", "--dir",
                           str(blocker / "plugins")], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("netstack wireshark: error: cannot install the plugin into")


def test_no_option_prints_usage(capsys):
    assert main(["wireshark"]) == 2
    out = capsys.readouterr().out
    assert "usage" in out and "--install" in out and str(PLUGIN) in out


def test_tshark_loads_the_installed_plugin_from_the_personal_folder(ts, monkeypatch, capsys):
    """End to end: `netstack wireshark --install` puts the plugin where tshark looks for it."""
    import os

    home = ts.dir / "home"
    home.mkdir()
    os.chmod(home, 0o755)
    monkeypatch.setenv("HOME", str(home))
    assert main(["wireshark", "--install"]) == 0
    for d in (home / ".local", home / ".local/lib", home / ".local/lib/wireshark", personal_plugin_dir()):
        os.chmod(d, 0o755)
    cmd = [ts.exe, "-G", "fields"]
    if os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)})
    assert done.returncode == 0, done.stderr
    names = {line.split("\t")[2] for line in done.stdout.splitlines() if line.startswith("F\t")}
    assert {"netstack_lg.seq_no", "netstack_dta.opcode", "netstack_1pipe.be_barrier", "netstack_tcsack.cum_ack",
            "netstack_tcd.mark", "netstack_auth.mac", "netstack_fcs.good"} <= names
