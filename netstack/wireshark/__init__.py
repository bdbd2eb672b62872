"""The Wireshark Lua plugin that dissects netstack's headers (docs/wireshark.md).

``netstack.lua`` in this package is the plugin; ``netstack wireshark`` prints its path or copies
it into the personal Lua plugin folder of Wireshark 3.x and later.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the plugin, shipped as package data
PLUGIN = Path(__file__).resolve().with_name("netstack.lua")


def personal_plugin_dir(env: dict[str, str] | None = None) -> Path:
    """Wireshark's personal plugin folder on Linux and macOS: ``~/.local/lib/wireshark/plugins``
    (Wireshark >= 2.5; it resolves ``~`` from ``$HOME``). Lua plugins may sit directly in it.
    Wireshark takes no XDG variable for this folder (``$XDG_CONFIG_HOME`` only moves its
    configuration files) and ``WIRESHARK_PLUGIN_DIR`` names the *global* folder, so neither is used."""
    home = (env if env is not None else os.environ).get("HOME") or str(Path.home())
    return Path(home) / ".local" / "lib" / "wireshark" / "plugins"
