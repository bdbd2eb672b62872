"""A cycle in a directed graph: the one search the order checker (ties between senders) and the
topology check (up/down logical switches, design topic §3 in docs/papers.md) both need."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def find_cycle(graph: Mapping[N, Iterable[N]]) -> list[N]:
    """A cycle in ``graph`` as its nodes in order (empty if there is none), found by an iterative
    depth-first search in the graph's own order (sort it first for a deterministic answer)."""
    state: dict[N, int] = {}  # 1: on the current path, 2: done
    for root in graph:
        if root in state:
            continue
        path: list[N] = [root]
        stack: list[Iterator[N]] = [iter(graph.get(root, ()))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph.get(nxt, ())))
    return []


__all__ = ["find_cycle"]
