"""The tshark fixtures of the plugin tests (tests/wireshark/tshark.py has the helpers)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .tshark import TShark, fields_of, install_tshark

__all__ = ["fields_of"]


@pytest.fixture(scope="session")
def tshark() -> str:
    return shutil.which("tshark") or install_tshark()


@pytest.fixture(scope="session")
def ts(tshark: str) -> Iterator[TShark]:
    workdir = Path(tempfile.mkdtemp(prefix="netstack-tshark-"))
    os.chmod(workdir, 0o755)
    try:
        yield TShark(tshark, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


