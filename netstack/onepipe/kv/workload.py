"""The YCSB+T-style workload of the key-value runs (1Pipe §7.3: YCSB+T transactions of 2 ops,
keys uniform or YCSB's Zipf), the same for the 1Pipe store and for the 2PC baseline.

- ``ops`` keys a transaction, distinct, drawn so that they fall on distinct shards when there are
  enough shards (a transaction across shards is the point);
- **contention**: the fraction of transactions whose keys all come from a small hot set
  (``hot`` keys, the lowest ones); the others draw from the rest, uniformly or by Zipf
  (``theta``, YCSB's 0.99);
- **mix**: ``ro`` (every op a READ), ``wo`` (WRITEs), ``rmw`` (read-modify-writes), ``mixed``
  (each transaction one of the three, equally likely), ``ycsb`` (each op a WRITE with probability
  ``writes``, else a READ: the x axis of 1Pipe §7.3's latency figure, "percentage of write ops";
  a transaction is RO, WO or WR, the paper's classes, by what it drew).

Written values are unique in a run (the uid and the op's index), so a read names its writer.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field

from .wire import Op, OpKind

MIXES = ("ro", "wo", "rmw", "mixed", "ycsb")
DISTS = ("uniform", "zipf")


def txn_class(ops: tuple[Op, ...]) -> str:
    """The paper's classes: RO (only reads), WO (only writes), WR (anything else)."""
    kinds = {o.kind for o in ops}
    if kinds == {OpKind.READ}:
        return "RO"
    if kinds == {OpKind.WRITE}:
        return "WO"
    return "WR"


@dataclass
class Workload:
    keys: int = 10_000
    shards: int = 2
    ops: int = 2
    contention: float = 0.0
    hot: int = 4
    dist: str = "uniform"
    mix: str = "mixed"
    theta: float = 0.99
    writes: float = 0.5
    _cdf: list[float] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.mix not in MIXES:
            raise ValueError(f"mix {self.mix!r}: one of {', '.join(MIXES)}")
        if self.dist not in DISTS:
            raise ValueError(f"dist {self.dist!r}: one of {', '.join(DISTS)}")
        if not 0 <= self.contention <= 1:
            raise ValueError("contention is a fraction in [0, 1]")
        if self.ops < 1 or self.hot < self.ops or self.keys < self.hot + 10 * self.ops:
            raise ValueError("need ops >= 1, hot >= ops and many more keys than hot ones")
        if self.dist == "zipf":
            w = [1.0 / (i + 1) ** self.theta for i in range(self.keys - self.hot)]
            total = 0.0
            for x in w:
                total += x
                self._cdf.append(total)

    def _cold(self, rng: random.Random) -> int:
        if self.dist == "zipf":
            i = bisect.bisect_left(self._cdf, rng.random() * self._cdf[-1])
            return self.hot + min(i, self.keys - self.hot - 1)
        return rng.randrange(self.hot, self.keys)

    def keys_of(self, rng: random.Random) -> list[int]:
        hot = rng.random() < self.contention
        out: list[int] = []
        shards: set[int] = set()
        for _ in range(1000):
            if len(out) == self.ops:
                break
            k = rng.randrange(self.hot) if hot else self._cold(rng)
            if k in out or (len(shards) < min(self.shards, self.ops) and k % self.shards in shards
                            and len(out) < self.shards):
                continue
            out.append(k)
            shards.add(k % self.shards)
        while len(out) < self.ops:  # a tiny key space: take what is left
            k = next(x for x in range(self.keys) if x not in out)
            out.append(k)
        return out

    def txn(self, rng: random.Random, uid: int) -> tuple[Op, ...]:
        """The next transaction (``uid`` makes its written values unique)."""
        keys = self.keys_of(rng)
        if self.mix == "ycsb":
            kinds = [OpKind.WRITE if rng.random() < self.writes else OpKind.READ for _ in keys]
        else:
            mix = self.mix if self.mix != "mixed" else rng.choice(("ro", "wo", "rmw"))
            kinds = [{"ro": OpKind.READ, "wo": OpKind.WRITE, "rmw": OpKind.RMW}[mix]] * len(keys)
        return tuple(Op(kind, k, 0 if kind is OpKind.READ else (uid << 4 | i) + 1)
                     for i, (kind, k) in enumerate(zip(kinds, keys, strict=True)))


__all__ = ["DISTS", "MIXES", "Workload", "txn_class"]
