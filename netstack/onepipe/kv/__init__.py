"""A transactional key-value store on 1Pipe, its two-phase-commit baseline, a YCSB+T-style
workload and a strict-serializability checker (issue 32; 1Pipe §7.3; docs/onepipe-kv.md).

- :mod:`.wire`: the messages; :mod:`.shard` / :mod:`.client`: the 1Pipe store's engines (sans-IO);
- :mod:`.twopc`: lock-based two-phase commit over plain UDP, the baseline (sans-IO);
- :mod:`.workload`: keys, contention, mixes; :mod:`.checker`: strict serializability of a history;
- :mod:`.simkv` / :mod:`.scenario`: the ``onepipe-kv`` scenario in virtual time.
"""
