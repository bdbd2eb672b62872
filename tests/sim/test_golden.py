"""The same topology, scenario, parameters and seed give the results they gave when the file
``golden.json`` was written, byte for byte (``canonical_json``, the checkout's path taken out): a
refactoring of the simulator or of a protocol's simulated hosts must not change a single event.

A deliberate change of behaviour or of the results' fields rewrites the fingerprints:
``NETSTACK_GOLDEN=update .venv/bin/python -m pytest tests/sim/test_golden.py`` (then say why in
the commit)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from netstack.sim.scenario import RunSpec, canonical_json, run

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("golden.json")
#: (scenario, topology, params): each protocol's simulated hosts and the generic ones, about 4 s in all
CASES: list[tuple[str, str | None, dict[str, Any]]] = [
    ("tcd", "tcd-single", {"kind": "single"}),
    ("tcd-fct", "tcd-single", {"flows": 40}),
    ("tcsack-transfer", "lg-testbed", {"proto": "tcsack", "bytes": 500_000}),
    ("tcsack-transfer", "lg-testbed", {"proto": "gbn", "bytes": 500_000}),
    ("tcsack-transfer", None, {"proto": "tcp", "bytes": 500_000}),
    ("lg-stream", "lg-testbed", {"count": 3000}),
    ("onepipe", "onepipe", {"procs": 4}),
    ("udp-stream", "default", {"count": 2000}),
]
SEED = 3


def _key(scenario: str, topology: str | None, params: dict[str, Any]) -> str:
    return f"{scenario} {topology or '-'} {json.dumps(params, sort_keys=True)}"


def fingerprint(scenario: str, topology: str | None, params: dict[str, Any]) -> dict[str, Any]:
    result = run(RunSpec(scenario, topology, SEED, None, params))
    text = canonical_json(result).replace(f"{ROOT}/", "")  # the topology file's path, wherever the checkout is
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "events": result["engine"]["events"],
            "frames": result["engine"].get("frames")}


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    if os.environ.get("NETSTACK_GOLDEN") == "update":
        GOLDEN.write_text(json.dumps({_key(*c): fingerprint(*c) for c in CASES}, indent=1, sort_keys=True) + "\n")
    return dict(json.loads(GOLDEN.read_text()))


@pytest.mark.parametrize("case", CASES, ids=[_key(*c) for c in CASES])
def test_a_run_gives_the_results_it_gave_before(case, golden):
    assert fingerprint(*case) == golden[_key(*case)]
