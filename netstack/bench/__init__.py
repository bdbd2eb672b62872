"""Benchmarks: ``netstack bench ...``. Each writes JSON and prints a table, with its
baseline measured in the same run. Benchmarks measure; tests assert behaviour.

Layout. A benchmark with several parts - a live testbed, helper processes, more than one
figure, its own tables and plots - is a package whose ``__init__`` says what it measures and
holds ``main``, with one module per part: ``linkguardian/``, ``dta/`` and ``forwarding/`` (the
last two also run their helper processes as ``python -m netstack.bench.<name> --role ...``).
A benchmark that is one concern in a few hundred lines stays one module: ``headers``,
``tcsack``, ``sim`` (``cases/`` holds the header cases ``headers`` measures).

Shared helpers live in one place each: ``output`` (progress, Markdown tables, result files,
load average), ``proc`` (helper processes: start, wait for ``ready``, read the last JSON line,
kill; CPU pinning; unwinding on SIGTERM), ``plot`` (matplotlib on the Agg backend, or None),
``common`` (the header cases' rate measurement, ``--sizes`` parsing, and the names code
outside the benchmarks has always imported from ``netstack.bench.common``).
"""
