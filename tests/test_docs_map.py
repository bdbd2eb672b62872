"""docs/README.md maps every page of docs/ (a page nobody can find is a page nobody reads)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_doc_page_is_on_the_map():
    linked = set(re.findall(r"\]\(([\w.-]+\.md)(?:#[^)]*)?\)", (DOCS / "README.md").read_text()))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages - linked == set()
