"""Benchmarks: ``netstack bench ...``. Each writes JSON and prints a table, with its
baseline measured in the same run. Benchmarks measure; tests assert behaviour."""
