"""book/build.py (`make book`): a notebook that fails stops the build, names itself and its cell,
and leaves no half-built book; the command line refuses bad arguments in one line; each chapter runs
in its book mode (vlr_lib.book.chapter_env), and an experiment chapter that shows no record, or
reports fast mode, fails the build.

The full build (every notebook, then Sphinx) is CI's `make book`; its result is checked in a browser
by tests/browser/test_book.py.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

from vlr_lib import book

BUILD = Path(__file__).resolve().parents[2] / "book" / "build.py"
spec = importlib.util.spec_from_file_location("book_build", BUILD)
build = importlib.util.module_from_spec(spec)
sys.modules["book_build"] = build
spec.loader.exec_module(build)

GOOD = "# %% [markdown]\n# # 00 · fine\n\n# %%\nx = 1\n"
BROKEN = """# %% [markdown]
# # 01 · broken

# %%
y = 2

# %%
assert y == 3, "broken on purpose"
"""


def test_cell_lines_are_the_percent_markers(tmp_path):
    py = tmp_path / "01_broken.py"
    py.write_text(BROKEN)
    assert build.cell_lines(py) == [1, 4, 7]


def test_a_failing_notebook_stops_the_build_and_keeps_the_previous_book(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "00_fine.py").write_text(GOOD)
    (notebooks / "01_broken.py").write_text(BROKEN)
    out = tmp_path / "build" / "book"
    out.mkdir(parents=True)
    (out / "index.html").write_text("the previous book")
    rc = build.main(["--notebooks", str(notebooks), "--out", str(out), "--jobs", "2"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "01_broken.py: cell 3, line 7 ('assert y == 3, \"broken on purpose\"') failed: AssertionError: " \
           "broken on purpose" in err
    assert "00_fine.py" not in err  # only the failing notebook is named
    assert (out / "index.html").read_text() == "the previous book"  # untouched
    assert sorted(p.name for p in out.parent.iterdir()) == ["book"]  # no temporary folder left behind


@pytest.mark.parametrize("args, message", [
    (["--jobs", "0"], "argument --jobs: must be at least 1"),
    (["--notebooks", "/nonexistent"], "argument --notebooks: no NN_topic.py notebooks"),
])
def test_bad_arguments_are_one_line_and_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        build.main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]


FAST_CHAPTER = """# %%
import os
print("VLR_FAST", os.environ["VLR_FAST"], "VLR_BOOK", os.environ["VLR_BOOK"])

# %% tags=["solution", "hide-cell", "book-skip"]
# Solution 1.
raise RuntimeError("a book-skip cell must not run in the book")
"""
RECORDED_CHAPTER = """# %%
import os
print("VLR_FAST", os.environ["VLR_FAST"], "VLR_RERUN", os.environ["VLR_RERUN"])
print("Opened from the record toy-full of 2026-11-23 (2-core AMD EPYC, torch 2.0, 1 thread(s); 1.0 min).")
"""
FAST_RECORDED_CHAPTER = """# %%
print("vlr-workbook settings: fast mode, data=shapes, device=cpu, seed=0")
"""


def test_chapters_run_in_their_book_mode_and_a_recorded_one_must_show_its_record(tmp_path, monkeypatch):
    """09-13 (book.recorded_chapters()) run in full mode and must print their record's line and never "fast mode";
    the others run in fast mode; a book-skip cell is shown with a note, not run."""
    monkeypatch.setenv("VLR_FAST", "1")  # as CI exports it: the recorded chapters run in full mode all the same
    monkeypatch.setenv("VLR_RERUN", "1")
    notebooks, dest = tmp_path / "notebooks", tmp_path / "out"
    notebooks.mkdir()
    dest.mkdir()
    (notebooks / "00_fine.py").write_text(FAST_CHAPTER)
    (notebooks / "09_training.py").write_text(RECORDED_CHAPTER)
    (notebooks / "10_showdown.py").write_text(FAST_RECORDED_CHAPTER)
    with pytest.raises(build.NotebookFailed) as failed:
        build.run_notebooks(sorted(notebooks.glob("*.py")), dest, 2, {"VLR_BOOK": "1", "VLR_RUNS": str(tmp_path)})
    lines = str(failed.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith("10_showdown.py: executed for the book, but it shows no record")
    assert "it reports fast mode: 'vlr-workbook settings: fast mode, data=shapes" in lines[0]

    fine = nbformat.read(dest / "00_fine.ipynb", as_version=4)
    shown = [line for line in build.outputs_text(fine).splitlines() if line]
    assert shown == ["VLR_FAST 1 VLR_BOOK 1", book.SKIPPED_NOTE.strip()]
    assert fine.cells[1].execution_count is None  # shown, not run
    recorded = build.outputs_text(nbformat.read(dest / "09_training.ipynb", as_version=4))
    assert recorded.startswith("VLR_FAST 0 VLR_RERUN 0\nOpened from the record toy-full of 2026-11-23")
    assert not (dest / "10_showdown.ipynb").exists()
