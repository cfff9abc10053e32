"""The environment descriptions agree, and the project's plumbing is where the README says."""
from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(spec: str) -> str:
    return re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].strip().lower().replace("_", "-")


def _pyproject_specs() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + project["optional-dependencies"]["dev"]
    return {_name(s): s.replace(" ", "") for s in specs}


def _conda_pip_specs() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {_name(s): s.replace(" ", "") for s in pip_section if not s.startswith("-e")}


def test_environment_yml_lists_the_same_packages_as_pyproject():
    assert _conda_pip_specs() == _pyproject_specs()


def test_environment_yml_installs_the_project_itself():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip_section


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme


def test_ci_runs_the_browser_tests_right_after_make_test_and_times_them():
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in ci.splitlines()]
    order = [lines.index(cmd) for cmd in ("make test", "make test-browser", "make test-portable")]
    assert order == sorted(order), "CI runs make test, then make test-browser, then make test-portable"
    assert 'echo "CI: make test-browser finished with exit code $rc' in ci
    assert "make test-browser" in (ROOT / "README.md").read_text()


def _make(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """make in the repository, with an installed-looking VENV in `tmp_path` (the install is never run)."""
    venv = tmp_path / "venv"
    return subprocess.run(["make", "--no-print-directory", f"VENV={venv}", "-o", f"{venv}/.installed", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_test_leaves_the_lab_tests_to_make_test_browser(tmp_path):
    unit = _make("-n", "test-unit", "TEST_MARK=slow", tmp_path=tmp_path).stdout
    browser = _make("-n", "test-browser", tmp_path=tmp_path).stdout
    assert '-m "not lab and (slow)"' in unit and '-m "lab"' in browser
    for out in (unit, browser):  # nothing collected (or everything deselected) fails
        assert "-m pytest tests " in out and "[ $rc -ne 5 ]" in out and "exit $rc" in out


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
@pytest.mark.parametrize("target", ["test-unit", "test-browser"])
def test_a_marker_expression_in_pytest_args_stops_make_with_one_line(tmp_path, target):
    """pytest keeps only the last -m: one in PYTEST_ARGS would silently bring back (or drop) the lab tests."""
    done = _make(target, "PYTEST_ARGS=-x -m slow", tmp_path=tmp_path)
    assert done.returncode != 0 and "pytest" not in done.stdout
    assert "a -m in PYTEST_ARGS would replace" in done.stderr and "TEST_MARK" in done.stderr


def test_only_the_whole_workbook_run_is_marked_lab():
    """make test keeps the JupyterLab smoke test; the whole-workbook run is make test-browser's."""
    from tests.browser import test_jupyterlab, test_lab_smoke

    def marks(module) -> set[str]:
        mark = module.pytestmark
        return {m.name for m in (mark if isinstance(mark, list) else [mark])}

    assert "lab" in marks(test_jupyterlab) and "lab" not in marks(test_lab_smoke)


def test_library_does_not_import_the_test_oracles():
    """pytorch-metric-learning and open_clip are test oracles only (pyproject's dev extra)."""
    for path in (ROOT / "vlr_lib").rglob("*.py"):
        text = path.read_text()
        assert "pytorch_metric_learning" not in text, path


def test_the_lab_extra_is_the_jupyterlab_the_workbook_is_tested_with():
    """`pip install "<wheel>[lab]"` (the student bundle's README) installs the JupyterLab dev tests against."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (lab,) = extras["lab"]
    assert _name(lab) == "jupyterlab" and lab in extras["dev"]
