"""`make test`'s JupyterLab check: the workbook's JupyterLab, one notebook run in it, one explorer moved.

The project's JupyterLab (its settings, as `make lab` starts it) serves a fresh copy of the notebook
`make lab` opens first, 00_orientation; a 1280x800 page in headless Chromium runs every cell (fast
mode), then drags the first control of its first explorer and waits for the explorer's figure to
change. About 20-35 s on 2 cores. The same machinery (tests/browser/lab.py) runs every notebook and
every explorer in tests/browser/test_jupyterlab.py, marked ``lab``: `make test-browser`.
Skips, saying why, only where Chromium or Playwright is missing.
"""
from __future__ import annotations

import pytest

from tests.browser import lab

pytestmark = pytest.mark.browser

# The lightest notebooks with an explorer (00, 01, 02) cost the same here, 12-17 s of CPU each
# (docs/benchmarks.md); 00 is the one a student opens first.
NOTEBOOK = "00_orientation"


def test_a_notebook_runs_in_jupyterlab_and_an_explorer_redraws(tmp_path):
    lab.require_browser()
    [run] = lab.run_in_lab(tmp_path, [NOTEBOOK], workers=1, max_moves=1)
    assert not run.failure, f"{NOTEBOOK}: {run.failure}; errors: {run.errors}"
    assert run.all_ran and not run.errors, f"{NOTEBOOK}: cells did not all run: {run.prompts}; errors: {run.errors}"
    assert run.explorers == run.expected_explorers >= 1, \
        f"{NOTEBOOK}: {run.explorers} explorers on the page, the notebook builds {run.expected_explorers}"
    [move] = run.moves
    assert move.changed, f"{NOTEBOOK}: {move.explorer} ({move.control}): {move.error or 'the figure did not change'}"
