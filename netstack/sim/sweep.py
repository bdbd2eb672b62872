"""Independent runs in parallel: seeds x parameter points, on local processes or a Dask cluster.

Each run of a sweep is a :class:`~netstack.sim.scenario.RunSpec` (picklable) and shares nothing
with the others, so the runs scale out as they are:

- by default on this machine, through :class:`concurrent.futures.ProcessPoolExecutor`
  (``workers``: processes; 1 runs in this process, which is what tests and profilers want);
- given ``scheduler`` (``"tcp://host:8786"``, or a ``distributed`` ``LocalCluster``/``Client``),
  on a Dask distributed cluster, for sweeps that outgrow one machine. Dask is optional
  (``pip install 'netstack[dask]'``); nothing here schedules work itself. With no ``scheduler``
  given, the environment's ``NETSTACK_SIM_SCHEDULER`` names one: how ``netstack bench --scheduler``
  and ``netstack reproduce --scheduler`` reach every sweep of a benchmark without each passing it on.

Results come back in the order of the specs, whatever order the runs finish in. A run that
raises becomes a result with ``"error"`` (and the spec), so one bad point does not lose the
others. ``progress(done, total, result)`` is called as each run finishes.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, replace
from typing import Any

from .scenario import SCHEMA, RunSpec, ScenarioError, TopologyFile, run

#: the environment variable that names a Dask scheduler for every sweep that is given none
SCHEDULER_ENV = "NETSTACK_SIM_SCHEDULER"

Progress = Callable[[int, int, dict[str, Any]], None]


def run_safely(spec: RunSpec) -> dict[str, Any]:
    """:func:`run`, with any failure returned as a result (a worker must not lose the sweep)."""
    try:
        return run(spec)
    except Exception as exc:  # reported, not raised: the sweep's other runs stand
        return _failed(spec, exc)


def _failed(spec: RunSpec, exc: BaseException) -> dict[str, Any]:
    return {"schema": SCHEMA, "scenario": spec.scenario, "runtime": spec.runtime, "seed": spec.seed,
            "params": dict(spec.params), "error": f"{type(exc).__name__}: {exc}",
            "traceback": "".join(traceback.format_exception(exc, limit=8)), "spec": _spec_dict(spec)}


def _spec_dict(spec: RunSpec) -> dict[str, Any]:
    d = asdict(spec)
    d["params"] = dict(spec.params)
    if isinstance(spec.topology, TopologyFile):  # its path, not the whole file in every failed run
        d["topology"] = spec.topology.path
    d["files"] = sorted(spec.files)  # the same: their paths
    return d


def grid(base: RunSpec, seeds: Iterable[int], points: Mapping[str, Sequence[Any]] | None = None) -> list[RunSpec]:
    """Every combination of ``points`` (parameter -> values) for every seed, on ``base``."""
    points = dict(points or {})
    keys = sorted(points)
    out = []
    for values in itertools.product(*(points[k] for k in keys)):
        for seed in seeds:
            out.append(replace(base, seed=int(seed), params={**base.params, **dict(zip(keys, values, strict=True))}))
    return out


def sweep(specs: Sequence[RunSpec], *, workers: int | None = None, scheduler: Any = None,
          progress: Progress | None = None) -> list[dict[str, Any]]:
    """Run every spec; results in the same order (see the module docstring)."""
    specs = list(specs)
    if not specs:
        return []
    if scheduler is None:
        scheduler = os.environ.get(SCHEDULER_ENV) or None
    if scheduler is not None:
        return _dask(specs, scheduler, progress)
    if workers is not None and workers < 1:
        raise ScenarioError(f"workers must be >= 1, got {workers}")
    n = min(len(specs), workers or os.cpu_count() or 1)
    if n == 1:
        results = []
        for i, spec in enumerate(specs):
            results.append(run_safely(spec))
            if progress:
                progress(i + 1, len(specs), results[-1])
        return results
    out: list[dict[str, Any] | None] = [None] * len(specs)
    with ProcessPoolExecutor(max_workers=n, mp_context=_context()) as pool:
        futures = {pool.submit(run_safely, spec): i for i, spec in enumerate(specs)}
        for done, fut in enumerate(as_completed(futures), 1):
            out[futures[fut]] = fut.result()
            if progress:
                progress(done, len(specs), out[futures[fut]])  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


def _context() -> multiprocessing.context.BaseContext:
    """fork where it is safe (one thread: nothing to copy in a half-held lock; workers start at
    once and need no importable ``__main__``), else spawn (a clean interpreter per worker)."""
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _dask(specs: list[RunSpec], scheduler: Any, progress: Progress | None) -> list[dict[str, Any]]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise ScenarioError("--scheduler needs Dask's distributed scheduler: pip install 'netstack[dask]'") from None
    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    try:
        futures = client.map(run_safely, specs, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[dict[str, Any] | None] = [None] * len(specs)
        for done, fut in enumerate(dask_completed(futures), 1):
            try:
                out[index[fut.key]] = fut.result()
            except Exception as exc:  # the scheduler gave the run up (KilledWorker: its workers kept dying)
                out[index[fut.key]] = _failed(specs[index[fut.key]], exc)
            if progress:
                progress(done, len(specs), out[index[fut.key]])  # type: ignore[arg-type]
        return out  # type: ignore[return-value]
    finally:
        if own:
            client.close()


__all__ = ["grid", "run_safely", "sweep"]
