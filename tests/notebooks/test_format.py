"""The code of every notebook, 00-13, fits the book's text column: formatted with ruff format at 88
characters (`ruff format --line-length 88 notebooks/*.py`), and no code line, comment or string longer than
that (the book's 688 px column shows 88 characters of code; a longer line was clipped there)."""
from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

LIMIT = 88
NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_lines_fit_the_column(py):
    long = [f"cell {i}: {line[:60]}... ({len(line)} characters)"
            for i, cell in enumerate(jupytext.read(py).cells) if cell.cell_type == "code"
            for line in cell.source.splitlines() if len(line) > LIMIT]
    assert long == [], "\n".join(long[:5])
