"""Running the unit tests on parallel workers (pytest-xdist, `make test-unit` runs ``-n 2 --dist loadgroup``).

Two things make the suite safe and quick on two workers:

- **One intra-op thread per worker.** Two workers on a 2-core machine already fill the cores; a second
  torch thread per worker only spins (OpenMP busy-waits), and runs several times slower on a shared machine.
  The child processes the tests start set ``OMP_NUM_THREADS=1`` themselves (tests/cli/helpers.py), and the
  notebooks' fast mode runs single-threaded; the shipped records were made with one thread (``make record``).
- **Modules whose module-scoped fixture is expensive stay on one worker** (:data:`GROUPS`). Under
  ``--dist loadgroup`` every other test is scheduled on its own, so a module's fixture may be built once per
  worker; for these modules that would double minutes of work (JupyterLab running every notebook, two
  spawned ranks, a Chromium). A group is scheduled as one unit, the largest first, so the long JupyterLab
  run starts at once and the rest of the suite fills the other worker around it.

Without xdist (``-n 0``, or xdist not installed) nothing here changes anything.
"""
from __future__ import annotations

import os

import pytest

# module path (relative to the repository root) -> xdist group; why each is grouped is the module's
# module-scoped fixture, named here.
GROUPS = {
    "tests/browser/test_jupyterlab.py": "jupyterlab",  # `runs`: one JupyterLab server runs every notebook
    "tests/browser/test_figure_layout.py": "chromium",  # `page`: one Chromium measures every figure
    "tests/train/test_distributed.py": "two-ranks",  # `two_ranks`: two spawned processes train once
}


def _worker() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")


def pytest_configure(config):
    # registered here as well, so that --strict-markers accepts the mark when xdist is absent or disabled (-p no:xdist)
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker (loadgroup)")
    if _worker() is not None:
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    for item in items:
        group = GROUPS.get(item.nodeid.split("::", 1)[0])
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
