"""The student bundle (`make student-bundle`, jupyter/student_bundle.py), installed as a student installs it.

The bundle is built into a temp folder (the wheel with this environment's setuptools: no network) and checked: the
wheel, the 13 student notebooks without a solution, a README saying how to install and open them, and the same
files in the .zip. Then it is installed into a fresh virtual environment outside the repository: the wheel with
--no-deps, and this environment's site-packages made visible to it by a .pth file for torch and the rest (a plain
path line: this environment's own .pth hooks, the editable install of vlr_lib among them, are not run, so vlr_lib
can only come from the wheel, which the kernel asserts). Two student notebooks run there, from a temp folder, in
fast mode: 02 (derivations, explorers, a graded stub left unfilled, whose check prints 0 points while the notebook
runs on) and 13 (an experiment chapter that reads the most of what the wheel ships: two pre-registration files,
the two records made from them and chapter 12's, and one checked run of each record re-trained on features of the
shapes encoder the wheel ships). All 13 ran there the same way, one after another, in 507 s on this project's
2-core machine at load 5-8 (2026-11-27, 02: 21 s, 10: 57 s, 12: 76 s). Until 2026-11-28 the second notebook was 10
(the showdown against its record), which took the test 42-104 s; 13 reads more of the wheel in less time.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest

from vlr_lib import grading

from .test_editions import solution_problems

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STEMS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
RUN = ("02_triplet_losses", "13_replication")
spec = importlib.util.spec_from_file_location("student_bundle", ROOT / "jupyter" / "student_bundle.py")
student_bundle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(student_bundle)

# Run by the fresh environment's Python: each notebook executed in a kernel of that Python, after a first cell
# that says where the kernel's vlr_lib and Python are; the executed notebook is written back.
RUNNER = """
import sys
from pathlib import Path
import nbformat
from nbclient import NotebookClient
for path in map(Path, sys.argv[1:]):
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("import sys, vlr_lib; print(vlr_lib.__file__, sys.executable)"))
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return student_bundle.build(tmp_path_factory.mktemp("bundle"), isolation=False)


def test_the_bundle_holds_the_wheel_the_student_notebooks_and_a_readme(bundle):
    (wheel,) = bundle.glob("*.whl")
    assert sorted(p.name for p in bundle.iterdir()) == sorted(["README.md", "notebooks", wheel.name])
    notebooks = sorted((bundle / "notebooks").iterdir())
    assert [p.name for p in notebooks] == [f"{s}.ipynb" for s in STEMS], "the student notebooks and nothing else"
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        assert solution_problems(nb) == [], path.name
        assert "jupytext" not in nb.metadata, f"{path.name} is paired with a .py"
    readme = (bundle / "README.md").read_text()
    assert f'pip install "./{wheel.name}[lab]"' in readme and "cd notebooks\njupyter lab" in readme
    with zipfile.ZipFile(bundle.with_name(f"{bundle.name}.zip")) as z:
        zipped = sorted(n for n in z.namelist() if not n.endswith("/"))
    assert zipped == sorted(str(p.relative_to(bundle.parent)) for p in bundle.rglob("*") if p.is_file())


def test_the_wheel_ships_the_records_and_the_encoder_and_says_what_lab_installs(bundle):
    (wheel,) = bundle.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    data = [p for d in ("recorded", "assets") for p in (ROOT / "vlr_lib" / d).rglob("*")
            if p.is_file() and not p.name.startswith(".")]
    assert len(data) > 10
    assert [p for p in data if str(p.relative_to(ROOT)) not in names] == []
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "notebooks/"))]
    assert "Provides-Extra: lab" in metadata and "Requires-Dist: jupyterlab>=4.2; extra == \"lab\"" in metadata


@pytest.fixture(scope="module")
def student_python(bundle, tmp_path_factory) -> Path:
    """A fresh virtual environment with the bundle's wheel, this environment's packages beside it (see above)."""
    venv = tmp_path_factory.mktemp("student-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    (wheel,) = bundle.glob("*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "vlr_project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_student_notebooks_run_from_the_bundle_in_a_fresh_environment(bundle, student_python, tmp_path):
    venv = student_python.parents[1]
    work = tmp_path / "student"
    work.mkdir()
    paths = []
    for stem in RUN:
        paths.append(work / f"{stem}.ipynb")
        paths[-1].write_bytes((bundle / "notebooks" / paths[-1].name).read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '')}", VLR_FAST="1", OMP_NUM_THREADS="1",
               VLR_RUNS=str(tmp_path / "runs"), VLR_CACHE=str(tmp_path / "cache"),
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"), JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               IPYTHONDIR=str(tmp_path / "ipython"))
    done = subprocess.run([str(student_python), "-c", RUNNER, *map(str, paths)], cwd=work, env=env, check=False,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        library, python = nb.cells[0].outputs[0]["text"].split()
        assert Path(library).is_relative_to(venv) and not Path(library).is_relative_to(ROOT), library
        assert Path(python).parent == venv / "bin", f"{path.name}'s kernel ran {python}"
        text = json.dumps([c.get("outputs", []) for c in nb.cells])
        for key in (k for k in grading.EXERCISES if k[:2] == path.name[:2]):
            assert f"{key} (" in text and ": 0 / 5 points" in text, f"{path.name}: {key}'s check prints 0 points"
