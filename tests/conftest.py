"""Running the tests on parallel workers (pytest-xdist; `make test`, `make test-unit` and `make test-browser` run
``-n auto --dist loadgroup``, the first two without the tests marked ``lab``, the last only those; `make test`
with nbval over the notebooks).

Two things make the suite safe and quick on two workers:

- **One intra-op thread per worker.** Two workers on a 2-core machine already fill the cores; a second
  torch thread per worker only spins (OpenMP busy-waits), and runs several times slower on a shared machine.
  The child processes the tests start set ``OMP_NUM_THREADS=1`` themselves (tests/cli/helpers.py), and the
  notebooks' fast mode runs single-threaded; the shipped records were made with one thread (``make record``).
- **Modules whose module-scoped fixture is expensive stay on one worker** (:data:`GROUPS`). Every other test
  is scheduled on its own, so a module's fixture may be built once per worker; for these modules that would
  double minutes of work (JupyterLab running every notebook, a Chromium, two spawned ranks). A group is
  scheduled as one unit, the largest first, so a long one starts at once and the rest of the run fills the
  other worker around it. (The JupyterLab smoke test of `make test`, tests/browser/test_lab_smoke.py, is one
  test with its own server: nothing to group.)

  xdist's own ``xdist_group`` mark does not group under pytest 9.2 (xdist 3.8 renames ``item._nodeid``, which
  pytest 9.2 no longer reads), so :func:`pytest_xdist_make_scheduler` gives ``--dist loadgroup`` a scheduler
  that groups by module path instead; it needs nothing from the workers but the test ids.

- **A notebook is one unit too.** `make test` runs nbval over the notebooks in the unit tests' session, on the
  same workers (one start, and neither part waits for the other's last test); each notebook's cells run in order
  in one kernel, so its cells stay together on one worker.

Without xdist (``-n 0``, or xdist not installed) nothing here changes anything.
"""
from __future__ import annotations

import os

# modules (paths from the repository root) kept on one worker, for the module-scoped fixture named
GROUPS = {
    "tests/browser/test_jupyterlab.py",  # `runs`: one JupyterLab server runs every notebook (make test-browser)
    "tests/browser/test_figure_layout.py",  # `page`: one Chromium measures every figure
    "tests/train/test_distributed.py",  # `two_ranks`: two spawned processes train once
    "tests/browser/test_student_lab.py",  # `sealed`, `paired`: one JupyterLab opens every student notebook
    "tests/book/test_student_bundle.py",  # `bundle`, `student_python`: the wheel built, a fresh venv made once
}


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        import torch

        torch.set_num_threads(1)


def group_of(nodeid: str) -> str:
    """The unit of work a test is scheduled in: its module for a module of GROUPS or a notebook (nbval runs its cells
    one after another in one kernel), else the test itself."""
    path = nodeid.split("::", 1)[0]
    return path if path in GROUPS or path.endswith(".ipynb") else nodeid


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: the tests of a module of GROUPS together on one worker, every other test on its own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ModuleGroupScheduling(config, log)
