"""The parallel test run (tests/conftest.py): the modules it keeps on one worker exist, and make uses its scheduler."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import GROUPS, group_of

ROOT = Path(__file__).resolve().parents[1]


def test_every_grouped_module_exists():
    """A renamed module would silently lose its group (and build its expensive fixture on every worker)."""
    missing = sorted(path for path in GROUPS if not (ROOT / path).is_file())
    assert not missing, f"tests/conftest.py GROUPS names modules that do not exist: {missing}"


def test_a_grouped_module_is_one_unit_and_other_tests_are_their_own():
    jl = "tests/browser/test_jupyterlab.py"
    assert group_of(f"{jl}::test_a[00_orientation]") == group_of(f"{jl}::test_b[12_lessons]") == jl
    other = "tests/core/test_losses.py::test_properties[info_nce]"
    assert group_of(other) == other
    nb = "notebooks/09_training.ipynb"  # nbval's cells of one notebook share its kernel, in order
    assert group_of(f"{nb}::Cell 0") == group_of(f"{nb}::Cell 12") == nb


def test_make_test_runs_the_unit_tests_and_every_notebook_in_one_session_from_fresh_folders():
    import subprocess

    done = subprocess.run(["make", "-n", "test", "PY=python"], cwd=ROOT, capture_output=True, text=True, check=True)
    (line,) = [x for x in done.stdout.splitlines() if "-m pytest tests " in x]
    notebooks = sorted(p.relative_to(ROOT).with_suffix(".ipynb") for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert all(f" {nb} " in line for nb in map(str, notebooks)) and "--nbval-lax" in line
    assert '-m "not lab"' in line and "--dist loadgroup" in line
    assert 'VLR_RUNS="$runs" VLR_CACHE="$cache"' in line and "runs=$(mktemp -d)" in line


def test_make_runs_the_unit_tests_with_the_grouping_scheduler():
    recipe = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "-m pytest tests " in line)
    assert "--dist loadgroup" in recipe and "-n $(TEST_WORKERS)" in recipe
