"""The benchmarks' matplotlib set-up: a headless backend, and no plots (not a crash) where
matplotlib cannot be imported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .output import say


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed), or None when
    matplotlib is not installed (the benchmark then writes its numbers without plots)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("matplotlib is not installed: no plots (pip install matplotlib)")
        return None
    return plt


def save(plt: Any, fig: Any, path: Path, dpi: int) -> None:
    """Lay ``fig`` out, write it to ``path`` and free it (pyplot keeps every open figure)."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
