"""Every notebook in JupyterLab and headless Chromium, as a student on a laptop sees it.

One JupyterLab server (the project's settings, as `make lab` starts it) serves fresh copies of all
notebooks; a 1280x800 page per notebook, the file browser open, runs every cell (fast mode), then
drags / clicks one control of each explorer and waits for its figure's data to change (plotly
traces and images alike). Per notebook the test checks: every cell ran without an error, every
explorer the notebook builds is on the page and redraws, every plotly figure ends inside the
notebook's visible width, and no request left the machine (no CDN: plotly.js is JupyterLab's own).
The release-to-redraw latency of each explorer is printed (docs/benchmarks.md records it).

Marked ``lab``: it runs in `make test-browser` (about 4-7 min on 2 cores), not in `make test`, whose
tests/browser/test_lab_smoke.py runs one notebook the same way.
VLR_BROWSER_SHOTS=<folder> also saves a screenshot of every figure and explorer there;
VLR_BROWSER_NOTEBOOKS=05,09 runs only those notebooks.
Skips, saying why, only where Chromium or Playwright is missing.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import lab

pytestmark = [pytest.mark.browser, pytest.mark.lab]

# VLR_BROWSER_NOTEBOOKS=05,09 runs only the notebooks whose names start so (default: all).
ONLY = [p.strip() for p in os.environ.get("VLR_BROWSER_NOTEBOOKS", "").split(",") if p.strip()]
NAMES = sorted(p.stem for p in lab.NOTEBOOKS.glob("[0-9][0-9]_*.py") if not ONLY or p.stem.startswith(tuple(ONLY)))
WORKERS = 2  # pages at a time: the kernels share this machine's cores


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, lab.NotebookRun]:
    lab.require_browser()
    shots = os.environ.get("VLR_BROWSER_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
    results = lab.run_in_lab(tmp_path_factory.mktemp("lab"), NAMES, WORKERS, Path(shots) if shots else None)
    return {run.name: run for run in results}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_every_explorer_redraws(runs, name):
    run = runs[name]
    assert not run.failure, f"{name}: {run.failure}; errors: {run.errors}"
    assert run.all_ran and not run.errors, f"{name}: cells did not all run: {run.prompts}; errors: {run.errors}"
    assert run.explorers == run.expected_explorers, \
        f"{name}: {run.explorers} explorers on the page, the notebook builds {run.expected_explorers}"
    broken = [f"{m.explorer} ({m.control}): {m.error or 'the figure did not change'}"
              for m in run.moves if not m.changed]
    assert not broken, f"{name}: {broken}"


@pytest.mark.parametrize("name", NAMES)
def test_figures_fit_the_notebook_and_nothing_leaves_the_machine(runs, name):
    run = runs[name]
    assert not run.failure, f"{name}: {run.failure}"
    too_wide = [f"{f['title'][:50]!r} (cell {f['cell']}) ends at {f['right']:.0f} px, the notebook at "
                f"{f['panelRight']:.0f} px" for f in run.figures if f["right"] > f["panelRight"] + 1]
    assert not too_wide, f"{name}: {too_wide}"
    assert not run.outside, f"{name} requested outside the machine: {sorted(set(run.outside))[:5]}"
