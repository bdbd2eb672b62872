"""Scenarios: one named workload and measurement that runs on a topology, in either runtime.

A scenario is the unit ``netstack sim TOPOLOGY --scenario NAME`` runs, a benchmark sweeps and a
sweep worker executes. It takes a topology (the same TOML ``netstack up`` reads), a seed, an
optional duration and its own parameters, and returns a JSON-able result. Scenarios that make
sense live as well implement both:

- ``run_sim(net, ctx)``: on :class:`~netstack.sim.network.Network` in virtual time;
- ``run_live(ctx)``: on the real testbed (namespaces, switch daemons, kernel traffic tools).

Both return the same fields, and :func:`run` wraps them in one schema (:data:`SCHEMA`)::

    {"schema": "netstack.run/1", "scenario": ..., "runtime": "sim" | "live", "seed": ...,
     "topology": {"name", "source"}, "params": {...}, "duration_ns": ..., "time_scale": ...,
     "result": {...}, "engine": {...}}

``time_scale`` says how many times slower than the papers' links the topology runs (docs/architecture.md
"Time and scale": rates / scale, times x scale, bytes unchanged): the papers' reference rate
(``PAPER_RATE_BPS``, 100 Gbit/s, unless a scenario says otherwise) over the topology's fastest
switch-to-switch link; 1 means paper speed. ``engine`` holds what the runtime itself measured:
for the simulator its events, events/s, wall time and cost per simulated frame; for live runs
the wall time.

Scenarios are registered by modules listed in :data:`SCENARIO_MODULES` (each exposes
``SCENARIOS``: a list of :class:`Scenario`): a protocol names its module in ``netstack.protocols``
and adds its scenarios without touching this one.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import protocols
from ..topo.model import (
    NodeKind,
    Topology,
    TopologyError,
    load_topology,
    loads_topology,
    read_topology_text,
    shipped_topologies,
    topology_from_dict,
)
from .workload import carrying

SCHEMA = "netstack.run/1"
RUNTIMES = ("sim", "live")
#: The papers' datacenter link rate (LinkGuardian §4: 100G; TCD: 40G scenarios say so themselves).
PAPER_RATE_BPS = 100_000_000_000
#: Modules whose ``SCENARIOS`` list is registered: the simulator's generic ones and each
#: protocol's (``netstack.protocols``).
SCENARIO_MODULES = protocols.scenario_modules()


class ScenarioError(ValueError):
    """A scenario, its parameters or its topology cannot run: the message says why."""


@dataclass
class Context:
    """What a scenario run gets: its topology, seed, duration (ns, or None: the scenario's own
    end), checked parameters, and for live runs the namespace prefix and a progress callback."""

    topology: Topology
    seed: int
    duration_ns: int | None
    params: dict[str, Any]
    prefix: str | None = None
    progress: Callable[[str], None] = field(default=lambda msg: None)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    #: parameter -> default (a parameter's type is its default's; None defaults accept int/float/str)
    params: Mapping[str, Any]
    run_sim: Callable[[Any, Context], dict[str, Any]] | None = None
    run_live: Callable[[Context], dict[str, Any]] | None = None
    #: the papers' rate this scenario's time scale is relative to
    paper_rate_bps: int = PAPER_RATE_BPS

    @property
    def runtimes(self) -> tuple[str, ...]:
        return tuple(r for r, f in (("sim", self.run_sim), ("live", self.run_live)) if f is not None)

    def check_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overlaid with ``given``, each converted to its default's type."""
        out = dict(self.params)
        for key, value in given.items():
            if key not in self.params:
                known = ", ".join(sorted(self.params)) or "none"
                raise ScenarioError(f"scenario {self.name}: unknown parameter {key!r} (known: {known})")
            out[key] = _convert(self.name, key, value, self.params[key])
        return out


def _convert(scenario: str, key: str, value: Any, default: Any) -> Any:
    """``value`` (often text from the command line) as the type of ``default``."""
    where = f"scenario {scenario}: parameter {key}"
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.lower() in ("1", "true", "yes", "on")
        raise ScenarioError(f"{where}: {value!r} is not true/false")
    if isinstance(default, int):
        try:
            f = float(value)
        except (TypeError, ValueError):
            raise ScenarioError(f"{where}: {value!r} is not a number") from None
        if isinstance(value, bool) or f != int(f):
            raise ScenarioError(f"{where}: {value!r} is not a whole number")
        return int(f)
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ScenarioError(f"{where}: {value!r} is not a number") from None
    if isinstance(default, str):
        return str(value)
    if default is None and isinstance(value, str):
        if value.lower() in ("none", "null", ""):
            return None
        for conv in (int, float):
            try:
                return conv(value)
            except ValueError:
                pass
    return value


_REGISTRY: dict[str, Scenario] | None = None


def scenarios() -> dict[str, Scenario]:
    """Every registered scenario by name."""
    global _REGISTRY
    if _REGISTRY is None:
        reg: dict[str, Scenario] = {}
        for mod in SCENARIO_MODULES:
            for sc in importlib.import_module(mod).SCENARIOS:
                if sc.name in reg:
                    raise RuntimeError(f"scenario {sc.name!r} registered twice ({mod})")
                reg[sc.name] = sc
        _REGISTRY = reg
    return _REGISTRY


def get(name: str) -> Scenario:
    reg = scenarios()
    if name not in reg:
        raise ScenarioError(f"no scenario {name!r} (scenarios: {', '.join(sorted(reg))})")
    return reg[name]


# ----------------------------------------------------------------------------- topologies
def examples() -> dict[str, Path]:
    """Shipped topologies by name (``default`` is the live testbed's own): the loader's list."""
    return shipped_topologies()


@dataclass(frozen=True)
class TopologyFile:
    """A topology file's text with its path, as a run carries it: a sweep's worker on another
    machine (a Dask cluster's, docs/sim.md) then needs no copy of the file, and its run reads as if
    it had read the file there (``topology.source`` is ``path``)."""

    path: str
    text: str

    @classmethod
    def read(cls, path: str | Path) -> TopologyFile:
        p = Path(path).absolute()
        return cls(str(p), read_topology_text(p))


def resolve_topology(spec: str | Path | Mapping[str, Any] | Topology | TopologyFile | None) -> Topology:
    """A topology from a file path, a shipped name (``lg-testbed``), a parsed TOML document (a
    dict, as benchmarks build them), a file's text (:class:`TopologyFile`), a :class:`Topology`,
    or None (the default)."""
    if spec is None or isinstance(spec, Topology):
        return spec if spec is not None else load_topology(None)
    if isinstance(spec, TopologyFile):
        return loads_topology(spec.text, spec.path)
    if isinstance(spec, Mapping):
        return topology_from_dict(spec, "<generated topology>")
    path = Path(spec)
    if not path.exists() and str(spec) in examples():
        path = examples()[str(spec)]
    if not path.exists():
        names = ", ".join(sorted(examples()))
        raise TopologyError([("", f"no such file (shipped topologies: {names})")], str(spec))
    return load_topology(path)


def time_scale(topology: Topology, paper_rate_bps: int = PAPER_RATE_BPS) -> float:
    """The paper's rate (the topology's ``paper_rate`` when it names one) over the topology's
    fastest switch-to-switch link (all links if none)."""
    if topology.paper_rate_bps:
        paper_rate_bps = topology.paper_rate_bps
    kinds = {n.name: n.kind for n in topology.nodes}
    core = [lk.rate_bps for lk in topology.links
            if kinds[lk.a.node] is NodeKind.SWITCH and kinds[lk.b.node] is NodeKind.SWITCH]
    rates = core or [lk.rate_bps for lk in topology.links]
    return paper_rate_bps / max(rates) if rates else 1.0


# ----------------------------------------------------------------------------------- run
@dataclass(frozen=True)
class RunSpec:
    """One run, picklable (sent to sweep workers as is)."""

    scenario: str
    topology: str | dict[str, Any] | TopologyFile | None = None
    seed: int = 1
    duration_ns: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    runtime: str = "sim"
    prefix: str | None = None
    #: files the run's parameters name (a flow-size CDF), path -> text: sent with the run, so that a
    #: worker on another machine needs no copy (netstack.sim.workload.carrying)
    files: Mapping[str, str] = field(default_factory=dict)

    def label(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.scenario} seed={self.seed}" + (f" {extra}" if extra else "")


def run(spec: RunSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one scenario; the result in the common schema (module docstring)."""
    sc = get(spec.scenario)
    if spec.runtime not in RUNTIMES:
        raise ScenarioError(f"runtime {spec.runtime!r}: use one of {', '.join(RUNTIMES)}")
    if spec.runtime not in sc.runtimes:
        raise ScenarioError(f"scenario {sc.name} runs on {', '.join(sc.runtimes)}, not {spec.runtime}")
    if spec.duration_ns is not None and spec.duration_ns <= 0:
        raise ScenarioError(f"duration must be positive, got {spec.duration_ns} ns")
    topology = resolve_topology(spec.topology)
    params = sc.check_params(spec.params)
    ctx = Context(topology, int(spec.seed), spec.duration_ns, params, spec.prefix, progress or (lambda m: None))
    with carrying(spec.files):
        return _run(sc, spec, ctx, topology)


def _run(sc: Scenario, spec: RunSpec, ctx: Context, topology: Topology) -> dict[str, Any]:
    """:func:`run` once its context is made: the scenario in its runtime, timed, as a document."""
    wall0 = time.perf_counter()
    cpu0 = time.process_time()
    if spec.runtime == "sim":
        from .network import Network

        net = Network(topology, seed=ctx.seed)
        result = sc.run_sim(net, ctx)  # type: ignore[misc]
        wall = time.perf_counter() - wall0
        frames = sum(ch.delivered for ch in net.channels)
        events = net.loop.events
        engine: dict[str, Any] = {
            "wall_s": round(wall, 4), "cpu_s": round(time.process_time() - cpu0, 4), "events": events,
            "events_per_s": round(events / wall) if wall > 0 else None, "virtual_ns": net.now,
            "frames": frames, "us_per_frame": round(wall * 1e6 / frames, 3) if frames else None,
            "events_per_frame": round(events / frames, 3) if frames else None,
        }
    else:
        result = sc.run_live(ctx)  # type: ignore[misc]
        engine = {"wall_s": round(time.perf_counter() - wall0, 3)}
    return document(sc, spec.runtime, ctx, result, engine)


def _validity(runtime: str, result: dict[str, Any]) -> dict[str, Any]:
    """The run's verdict (netstack.validity) for the document's top level: a live scenario's own
    checks; virtual time cannot be starved or fall behind its plan, so its runs are valid."""
    if "valid" in result:
        return {"valid": result.pop("valid"), "checks": result.pop("checks", [])}
    if runtime == "sim":
        return {"valid": True, "checks": []}
    return {"valid": True, "checks": [{"name": "checks", "expected": "declared by the scenario",
                                       "measured": "none declared", "ok": True}]}


def document(sc: Scenario, runtime: str, ctx: Context, result: dict[str, Any],
             engine: dict[str, Any]) -> dict[str, Any]:
    """One run in the common schema (for runs driven outside :func:`run`, e.g. several live runs
    on one testbed)."""
    # a scenario that knows its scale better (LinkGuardian: its parameters' own) reports it
    scale = result.pop("time_scale", None) or time_scale(ctx.topology, sc.paper_rate_bps)
    return {
        "schema": SCHEMA, "scenario": sc.name, "runtime": runtime, "seed": ctx.seed,
        "topology": {"name": ctx.topology.name, "source": ctx.topology.source}, "params": ctx.params,
        "duration_ns": ctx.duration_ns, "time_scale": scale, **_validity(runtime, result), "result": result,
        "engine": engine,
    }


def canonical_json(result: dict[str, Any]) -> str:
    """The run's JSON without what differs between identical runs (the engine's wall clock):
    byte-identical for the same topology, scenario, parameters and seed."""
    stable = {k: v for k, v in result.items() if k != "engine"}
    eng = result.get("engine", {})
    stable["engine"] = {k: eng[k] for k in ("events", "virtual_ns", "frames") if k in eng}
    return json.dumps(stable, sort_keys=True, default=_jsonable)


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-able")


__all__ = ["PAPER_RATE_BPS", "RUNTIMES", "SCHEMA", "Context", "RunSpec", "Scenario", "ScenarioError", "TopologyFile",
           "canonical_json", "document", "examples", "get", "resolve_topology", "run", "scenarios", "time_scale"]
