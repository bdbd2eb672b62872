"""``netstack wireshark``: where the Lua dissector plugin is, and installing it (docs/wireshark.md)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..errors import NotFound

DESCRIPTION = """\
Wireshark/tshark dissectors for netstack's headers (LinkGuardian tags, DTA reports and NACKs,
1Pipe, T/C-SACK, TCD data/CNPs and marks, the authentication and software-FCS trailers), as one
Lua plugin shipped in the package. --print shows its path; --install copies it into Wireshark's
personal Lua plugin folder (~/.local/lib/wireshark/plugins for Wireshark 3.x and later, from
$HOME), or into --dir. Without installing: tshark -X lua_script:$(netstack wireshark --print) -r FILE"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("wireshark", help="the Wireshark/tshark Lua dissector plugin: print its path or install it",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--print", dest="print_path", action="store_true", help="print the plugin's path in the package")
    p.add_argument("--install", action="store_true",
                   help="copy the plugin into the personal Lua plugin folder (or --dir)")
    p.add_argument("--dir", type=Path, default=None,
                   help="install into this folder instead of ~/.local/lib/wireshark/plugins (implies --install)")
    p.set_defaults(func=run, parser=p)


def _fail(message: str) -> int:
    print(f"netstack wireshark: error: {message}", file=sys.stderr)
    return 1


def install(plugin: Path, folder: Path) -> Path:
    """Copy ``plugin`` into ``folder`` (created if missing); return the installed file. OSError on failure."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / plugin.name
    shutil.copyfile(plugin, target)
    return target


def run(args: argparse.Namespace) -> int:
    from ..wireshark import PLUGIN, personal_plugin_dir

    if not (args.print_path or args.install or args.dir is not None):
        args.parser.print_help()
        print(f"\nplugin: {PLUGIN}")
        return 2
    if not PLUGIN.is_file():  # exit 1, as before: something asked for is not there
        raise NotFound(f"the plugin is missing from the package ({PLUGIN}); reinstall netstack")
    if args.print_path:
        print(PLUGIN)
    if args.install or args.dir is not None:
        folder = args.dir if args.dir is not None else personal_plugin_dir()
        existed = (folder / PLUGIN.name).exists()
        try:
            target = install(PLUGIN, folder.expanduser())
        except OSError as exc:
            reason = exc.strerror or str(exc)
            return _fail(f"cannot install the plugin into {folder}: {reason}")
        verb = "updated" if existed else "installed"
        print(f"{verb} {target}", file=sys.stderr if args.print_path else sys.stdout)
        print("restart Wireshark (or Analyze > Reload Lua Plugins); tshark picks it up on its next run",
              file=sys.stderr if args.print_path else sys.stdout)
    return 0
