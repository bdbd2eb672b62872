"""The benchmarks' matplotlib set-up: a headless backend, and no plots (not a crash) where
matplotlib cannot be imported."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from .output import say

#: what a benchmark says (once) when it cannot plot
NO_MATPLOTLIB = ("matplotlib is not installed: no plots, the JSON and tables are written as usual "
                 "(pip install 'netstack[plots]', or scripts/install.sh)")


@functools.cache
def _say_no_plots() -> None:
    say(NO_MATPLOTLIB)  # once per process: a benchmark asks for pyplot once per figure


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed), or None when
    matplotlib is not installed (an optional dependency, the ``plots`` extra: the benchmark then
    writes its numbers without plots, and says so once)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _say_no_plots()
        return None
    return plt


def save(plt: Any, fig: Any, path: Path, dpi: int) -> None:
    """Lay ``fig`` out, write it to ``path`` and free it (pyplot keeps every open figure)."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
