"""The environment descriptions agree, and the project's plumbing is where the README says."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
