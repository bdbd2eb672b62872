"""The campaign's report: the table ``netstack fuzz`` prints, and the JSON it saves."""

from __future__ import annotations

import json
from pathlib import Path

from .campaign import Result


def table(res: Result) -> str:
    lines = [f"netstack fuzz {res.target}: {res.sent} frames in {res.duration_s:.1f} s "
             f"({res.sent / res.duration_s if res.duration_s else 0:,.0f}/s), seed {res.seed}, prefix {res.prefix}"]
    for name, i in res.injectors.items():
        fates = ", ".join(f"{k} {v}" for k, v in sorted(i["fates"].items()))
        lines.append(f"  {name}: {i['sent']} sent from {i['from']} to {i['port']} ({fates}); refused {i['refused']}")
    width = max((len(c["where"]) for c in res.checks), default=5)
    cw = max((len(c["check"]) for c in res.checks), default=5)
    for c in res.checks:
        lines.append(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['where']:<{width}}  {c['check']:<{cw}}  {c['detail']}")
    lines += [f"  note: {n}" for n in res.notes]
    failed = [f"{c['where']} {c['check']}" for c in res.checks if not c["ok"]]
    lines.append(f"verdict: {'PASS' if res.ok else 'FAIL'}: " + (
        f"{len(res.checks)} checks passed, no daemon crashed" if res.ok else f"failed: {'; '.join(failed)}"))
    return "\n".join(lines)


def save(res: Result, path: Path) -> None:
    path.write_text(json.dumps(res.to_dict(), indent=2))
