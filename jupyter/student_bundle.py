"""The student bundle: the workbook to hand to students instead of the repository (`make student-bundle`).

    python jupyter/student_bundle.py [--out DIR] [--no-build-isolation]

Writes DIR/vlr-workbook-student-<version>/ (DIR: build/student-bundle by default) and the same folder as a .zip
beside it:

- the ``vlr_lib`` wheel (``pip wheel --no-deps``), with the recorded runs notebooks 09-13 open and the shipped
  shapes encoder (pyproject's package-data);
- ``notebooks/``: the student notebooks (vlr_lib.book.write_notebook: every solution removed, paired with nothing);
- README.md: install the wheel with its ``lab`` extra (JupyterLab; the widgets are the library's own
  dependencies), then ``jupyter lab`` in ``notebooks/``, where a click opens only a student notebook.

The repository is never handed out: its ``notebooks/*.py`` hold every solution. The wheel is built from a copy of
what it packages, so the checkout gets no build/lib or egg-info (a stale build/lib would end up in the wheel).
Both outputs are replaced whole (vlr_lib._io): an interrupted build leaves the previous bundle.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from vlr_lib import book
from vlr_lib._io import atomic_dir, atomic_write

ROOT = Path(__file__).resolve().parents[1]

NOTEBOOKS = ROOT / "notebooks"
#: What the wheel is built from: pyproject names the package, its data, README and licence.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "vlr_lib")
NOT_PACKAGED = shutil.ignore_patterns("__pycache__", "*.pyc", ".*.lock")

README = """\
# vlr-workbook, student edition {version}

The notebooks of the workbook on the loss functions of vision-language retrieval, without the exercises'
solutions, and the library they call (`vlr_lib`, in the wheel). It needs Python 3.10 or newer; everything runs
on a CPU.

## Install (once)

In this folder, make a virtual environment and install the wheel with its `lab` extra (JupyterLab):

```bash
python3 -m venv .venv
source .venv/bin/activate            # Windows: .venv\\Scripts\\activate
pip install "./{wheel}[lab]"
```

PyTorch is the largest download; for the smaller CPU-only build add
`--extra-index-url https://download.pytorch.org/whl/cpu` to the `pip install` line.

## Open the notebooks

```bash
cd notebooks
jupyter lab
```

JupyterLab opens in your browser; start with `00_orientation.ipynb`. Run a notebook from the top (Run > Run All
Cells). The graded exercises end in a check cell that prints your score; it prints 0 points until your function
is written. Set `VLR_FAST=1` in the environment before `jupyter lab` for the short training runs (about a minute
each); without it chapters 09-13 open the full-size runs that ship with the library. Runs and caches go to
`~/.cache/vlr-workbook` (`VLR_CACHE` moves them), never into this folder.
"""


def build_wheel(into: Path, isolation: bool = True) -> Path:
    """The vlr_lib wheel, built with pip from a copy of WHEEL_SOURCES, in `into`; returns its path."""
    with tempfile.TemporaryDirectory(prefix="vlr-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in WHEEL_SOURCES:
            path = ROOT / name
            if path.is_dir():
                shutil.copytree(path, src / name, ignore=NOT_PACKAGED)
            else:
                shutil.copy2(path, src / name)
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(into), str(src)]
        subprocess.run(cmd + ([] if isolation else ["--no-build-isolation"]), check=True)
    (wheel,) = into.glob("*.whl")
    return wheel


def write_notebooks(into: Path) -> list[Path]:
    """The student notebook of every notebooks/NN_topic.py, in `into`."""
    into.mkdir(parents=True, exist_ok=True)
    written = []
    for py in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        written.append(into / f"{py.stem}.ipynb")
        book.write_notebook(str(py), str(written[-1]), "student")
    return written


def zip_folder(folder: Path, archive: Path) -> None:
    """`folder` as the .zip `archive`, its files under the folder's name (unzipping gives the folder back)."""
    def write(f) -> None:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(folder.rglob("*")):
                z.write(path, Path(folder.name) / path.relative_to(folder))

    atomic_write(archive, write)


def build(out: Path, isolation: bool = True) -> Path:
    """Write the bundle's folder and .zip into `out`; returns the folder."""
    with tempfile.TemporaryDirectory(prefix="vlr-wheel-out-") as tmp:
        wheel = build_wheel(Path(tmp), isolation)
        version = wheel.name.split("-")[1]  # name-version-python-abi-platform.whl
        folder = out / f"vlr-workbook-student-{version}"
        with atomic_dir(folder) as staging:
            shutil.move(wheel, staging / wheel.name)
            notebooks = write_notebooks(staging / "notebooks")
            (staging / "README.md").write_text(README.format(version=version, wheel=wheel.name))
    archive = folder.with_name(f"{folder.name}.zip")
    zip_folder(folder, archive)
    print(f"student bundle: {folder} ({wheel.name}, {len(notebooks)} notebooks, README.md) and {archive.name}")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make student-bundle", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "student-bundle",
                        help="where the bundle's folder and .zip go (default build/student-bundle)")
    parser.add_argument("--no-build-isolation", dest="isolation", action="store_false",
                        help="build the wheel with this environment's setuptools (offline) instead of a fresh one")
    args = parser.parse_args(argv)
    try:
        build(args.out.resolve(), args.isolation)
    except subprocess.CalledProcessError as exc:  # pip said why above; the previous bundle is left as it was
        hint = "; offline? --no-build-isolation builds with this environment's setuptools" if args.isolation else ""
        print(f"make student-bundle: pip could not build the wheel (exit code {exc.returncode}){hint}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
