"""book/build.py (`make book`): a notebook that fails stops the build, names itself and its cell,
and leaves no half-built book; the command line refuses bad arguments in one line.

The full build (every notebook, then Sphinx) is CI's `make book`; its result is checked in a browser
by tests/browser/test_book.py.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

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
