"""The edition writer under hostile input (issue 35): ``python -m vlr_lib.book IN OUT`` (make's notebook rule) and
``book.write_notebook``. Every bad input is one line naming the file or variable (and the cell), exit 2, with
nothing written; OUT is never IN; tags match exactly; a graded check is found however it is called; OUT is
written atomically."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from vlr_lib import book

from ..cli.helpers import ROOT, call, env, snapshot, within

#: A small executed notebook: a stub, its solution (tagged), and the check cell with the solution's score.
SOLVED = "02_triplet_sh (Triplet-SH): 5 / 5 points, 10/10 hidden cases\n"


def notebook(check: str = 'grading.check("02_triplet_sh", triplet_sh)', tags: object = ("solution",)) -> dict:
    stub = nbformat.v4.new_code_cell("def triplet_sh(S, margin):\n    raise NotImplementedError")
    solution = nbformat.v4.new_code_cell("def triplet_sh(S, margin):\n    return S.sum()")
    checked = nbformat.v4.new_code_cell(check)
    checked.outputs = [nbformat.v4.new_output("stream", name="stdout", text=SOLVED)]
    imports = nbformat.v4.new_code_cell("import math, torch\nfrom vlr_lib import grading")
    nb = nbformat.v4.new_notebook(cells=[imports, stub, solution, checked])
    solution.metadata["tags"] = list(tags) if isinstance(tags, tuple) else tags  # after: new_notebook validates
    return nb


def write_ipynb(path: Path, nb: dict) -> Path:
    path.write_text(json.dumps(nb))
    return path


def run_book(argv, capsys, monkeypatch, edition: str | None = "student"):
    if edition is None:
        monkeypatch.delenv("VLR_EDITION", raising=False)
    else:
        monkeypatch.setenv("VLR_EDITION", edition)
    with within(60):
        return call(book.main, [str(a) for a in argv], capsys)


# --------------------------------------------------------------------------- one line, exit 2, nothing written
def _missing(tmp):
    return [tmp / "missing.py", tmp / "out.ipynb"], "argument IN: ", "does not exist"


def _truncated(tmp):
    whole = json.dumps(notebook())
    (tmp / "cut.ipynb").write_text(whole[: len(whole) // 2])
    return [tmp / "cut.ipynb", tmp / "out.ipynb"], "argument IN: ", "cannot be read as a notebook"


def _not_utf8(tmp):
    (tmp / "bin.py").write_bytes(b"# %%\nx = '\xff\xfe'\n")
    return [tmp / "bin.py", tmp / "out.ipynb"], "argument IN: ", "cannot be read as a notebook"


def _not_a_notebook(tmp):
    (tmp / "list.ipynb").write_text("[1, 2]")
    return [tmp / "list.ipynb", tmp / "out.ipynb"], "argument IN: ", "list.ipynb"


def _cells_not_a_list(tmp):
    (tmp / "odd.ipynb").write_text('{"cells": 5}')  # jupytext also warns (nbformat 1.0): no second line
    return [tmp / "odd.ipynb", tmp / "out.ipynb"], "argument IN: ", "its cells are not a list of objects"


def _source_not_text(tmp):
    nb = notebook()
    nb.cells[1]["source"] = 5
    return [write_ipynb(tmp / "in.ipynb", nb), tmp / "out.ipynb"], "argument IN: ", \
        "in.ipynb', cell 2: no cell_type, or a source that is not text"


def _fifo_in(tmp):
    os.mkfifo(tmp / "pipe.py")
    return [tmp / "pipe.py", tmp / "out.ipynb"], "argument IN: ", "not a regular file"


def _folder_in(tmp):
    (tmp / "dir.py").mkdir()
    return [tmp / "dir.py", tmp / "out.ipynb"], "argument IN: ", "not a regular file"


def _missing_folder(tmp):
    return [write_ipynb(tmp / "in.ipynb", notebook()), tmp / "nowhere" / "out.ipynb"], "argument OUT: ", \
        "nowhere' does not exist"


def _out_is_a_folder(tmp):
    (tmp / "out").mkdir()
    return [write_ipynb(tmp / "in.ipynb", notebook()), tmp / "out"], "argument OUT: ", "is a folder"


def _tags_null(tmp):
    return [write_ipynb(tmp / "in.ipynb", notebook(tags=None)), tmp / "out.ipynb"], "argument IN: ", \
        "cell 3 ('def triplet_sh(S, margin):'): its metadata's tags must be a list of strings, got None"


def _tags_a_string(tmp):
    return [write_ipynb(tmp / "in.ipynb", notebook(tags="no-solution-here")), tmp / "out.ipynb"], "argument IN: ", \
        "cell 3 ('def triplet_sh(S, margin):'): its metadata's tags must be a list of strings, got 'no-solution-here'"


def _tags_of_numbers(tmp):
    return [write_ipynb(tmp / "in.ipynb", notebook(tags=[1, 2])), tmp / "out.ipynb"], "argument IN: ", \
        "cell 3 ('def triplet_sh(S, margin):'): its metadata's tags must be a list of strings"


def _unknown_key(tmp):
    nb = notebook(check='grading.check("99_nothing", triplet_sh)')
    return [write_ipynb(tmp / "in.ipynb", nb), tmp / "out.ipynb"], "argument IN: ", \
        "cell 4 ('grading.check(\"99_nothing\", triplet_sh)'): grading.check('99_nothing', ...) is not a graded " \
        "exercise"


def _key_not_a_literal(tmp):
    nb = notebook(check='KEY = "02_triplet_sh"\ngrading.check(KEY, triplet_sh)')
    return [write_ipynb(tmp / "in.ipynb", nb), tmp / "out.ipynb"], "argument IN: ", "key must be a string literal"


def _check_cell_unparsable(tmp):
    nb = notebook(check='grading.check("02_triplet_sh", triplet_sh')
    return [write_ipynb(tmp / "in.ipynb", nb), tmp / "out.ipynb"], "argument IN: ", "cell 4 (" \
        "'grading.check(\"02_triplet_sh\", triplet_sh'): cannot be parsed"


BAD = {f.__name__.strip("_"): f for f in (
    _missing, _truncated, _not_utf8, _not_a_notebook, _cells_not_a_list, _source_not_text, _fifo_in, _folder_in, _missing_folder, _out_is_a_folder,
    _tags_null, _tags_a_string, _tags_of_numbers, _unknown_key, _key_not_a_literal, _check_cell_unparsable)}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_input_is_one_line_naming_it_and_nothing_is_written(case, tmp_path, capsys, monkeypatch):
    """Was: tracebacks of 12-48 lines (missing IN, truncated JSON, OUT in a missing folder, "tags": null, an unknown
    key), a string of tags matched by substring (the cell dropped), a FIFO that hung."""
    argv, where, says = BAD[case](tmp_path)
    before = snapshot(tmp_path)
    code, out, err = run_book(argv, capsys, monkeypatch)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"python -m vlr_lib.book: error: {where}") and says in err, err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("edition", ["teacher", "Studnet", "1"])
def test_a_bad_vlr_edition_is_one_line_naming_the_variable(edition, tmp_path, capsys, monkeypatch):
    py = write_ipynb(tmp_path / "in.ipynb", notebook())
    code, _, err = run_book([py, tmp_path / "out.ipynb"], capsys, monkeypatch, edition)
    assert code == 2 and err.count("\n") == 1
    assert f"VLR_EDITION must be one of ('instructor', 'student'), got {edition.lower()!r}" in err
    assert not (tmp_path / "out.ipynb").exists()


@pytest.mark.parametrize("edition, student", [(" Student ", True), ("STUDENT", True), ("", False), (None, False),
                                              (" instructor", False)])
def test_vlr_edition_is_read_like_every_variable(edition, student, tmp_path, capsys, monkeypatch):
    """Case and surrounding spaces ignored, empty is unset (vlr_lib.env); ' Student ' was a traceback."""
    py = write_ipynb(tmp_path / "in.ipynb", notebook())
    code, _, err = run_book([py, tmp_path / "out.ipynb"], capsys, monkeypatch, edition)
    assert code == 0, err
    cells = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert len(cells) == (3 if student else 4)


# --------------------------------------------------------------------------- OUT is never IN
def _same(tmp):
    return "x.py", "x.py"


def _relative(tmp):
    return "x.py", str(tmp / "sub" / ".." / "x.py")


def _symlink(tmp):
    (tmp / "link.ipynb").symlink_to(tmp / "x.py")
    return "x.py", "link.ipynb"


def _hard_link(tmp):
    os.link(tmp / "x.py", tmp / "also.ipynb")
    return "./x.py", "also.ipynb"


@pytest.mark.parametrize("spell", [_same, _relative, _symlink, _hard_link], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("edition", ["student", "instructor"])
def test_out_is_never_in(spell, edition, tmp_path, capsys, monkeypatch):
    """Was: VLR_EDITION=student python -m vlr_lib.book x.py x.py replaced the source with JSON and exited 0."""
    source = (ROOT / "notebooks" / "02_triplet_losses.py").read_bytes()
    (tmp_path / "x.py").write_bytes(source)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    argv = spell(tmp_path)
    code, _, err = run_book(argv, capsys, monkeypatch, edition)
    assert code == 2 and err.count("\n") == 1 and "argument OUT: " in err and "is the input notebook itself" in err
    assert (tmp_path / "x.py").read_bytes() == source
    with pytest.raises(ValueError, match="^out: .* is the input notebook itself"):
        book.write_notebook(*argv, edition)
    assert (tmp_path / "x.py").read_bytes() == source


# --------------------------------------------------------------------------- tags and graded checks
def test_tags_match_exactly(tmp_path, capsys, monkeypatch):
    """A tag that contains "solution" is not the solution tag; the solution tag among others is."""
    nb = notebook(tags=["no-solution-here", "solutions", "hide-cell"])
    code, _, err = run_book([write_ipynb(tmp_path / "in.ipynb", nb), tmp_path / "out.ipynb"], capsys, monkeypatch)
    assert code == 0, err
    assert len(nbformat.read(tmp_path / "out.ipynb", as_version=4).cells) == 4
    nb = notebook(tags=["hide-cell", "solution"])
    code, _, err = run_book([write_ipynb(tmp_path / "in.ipynb", nb), tmp_path / "out.ipynb"], capsys, monkeypatch)
    assert code == 0, err
    assert len(nbformat.read(tmp_path / "out.ipynb", as_version=4).cells) == 3


CHECK_CALLS = {
    "positional": 'score = grading.check("02_triplet_sh", triplet_sh)',
    "keywords": 'grading.check(key="02_triplet_sh", answer=triplet_sh)',
    "keywords, reversed": "grading.check(answer=triplet_sh, key='02_triplet_sh')",
    "spaces": "grading . check (  '02_triplet_sh' ,answer = triplet_sh )",
    "lines": 'score = grading.check(\n    "02_triplet_sh",\n    triplet_sh,\n    seed=3,\n)',
    "module path": 'import vlr_lib\nvlr_lib.grading.check("02_triplet_sh", triplet_sh, 0)',
    "magic": '%time score = grading.check("02_triplet_sh", triplet_sh)',
    "grade": 'grading.grade("02_triplet_sh", triplet_sh)',
    "two checks": 'grading.check("02_triplet_sh", triplet_sh)\ngrading.check("03_nt_xent", nt_xent)',
}


@pytest.mark.parametrize("check", CHECK_CALLS.values(), ids=CHECK_CALLS.keys())
def test_a_graded_check_is_found_however_it_is_called(check, tmp_path, capsys, monkeypatch):
    """Was: grading.check(key=..., answer=...) escaped the regex, and the student page showed the solution's 5/5."""
    nb = notebook(check=check)
    code, _, err = run_book([write_ipynb(tmp_path / "in.ipynb", nb), tmp_path / "out.ipynb"], capsys, monkeypatch)
    assert code == 0, err
    (cell,) = [c for c in nbformat.read(tmp_path / "out.ipynb", as_version=4).cells if c.source == check]
    (output,) = cell.outputs
    assert "5 / 5" not in output["text"] and output["text"].count("0 / 5 points") == check.count("grading")
    assert "not implemented yet" in output["text"]


def test_a_cell_that_only_mentions_check_is_left_alone(tmp_path, capsys, monkeypatch):
    nb = notebook(check='check = "grading.check(\'99_nothing\')"  # a string, and another check()\nprint(check)')
    code, _, err = run_book([write_ipynb(tmp_path / "in.ipynb", nb), tmp_path / "out.ipynb"], capsys, monkeypatch)
    assert code == 0, err
    assert nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[-1].outputs[0]["text"] == SOLVED


# --------------------------------------------------------------------------- atomic write
def test_a_full_disk_leaves_the_previous_notebook(tmp_path, capsys, monkeypatch):
    """Was: a valid .ipynb replaced by a truncated 32 KB file when the disk filled up."""
    py = write_ipynb(tmp_path / "in.ipynb", notebook())
    out = tmp_path / "out.ipynb"
    assert run_book([py, out], capsys, monkeypatch)[0] == 0
    before = out.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    code, _, err = run_book([py, out], capsys, monkeypatch, "instructor")
    assert code == 1 and err.count("\n") == 1 and f"no space left on {tmp_path}" in err
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.ipynb", "out.ipynb"]  # no temp file left


def test_the_command_in_a_process_is_one_line_and_writes_the_edition(tmp_path):
    """End to end, as make's notebook rule runs it."""
    py = ROOT / "notebooks" / "02_triplet_losses.py"
    cmd = [sys.executable, "-m", "vlr_lib.book"]
    bad = subprocess.run([*cmd, str(py), str(tmp_path / "no" / "x.ipynb")], capture_output=True, text=True,
                         env=env(VLR_EDITION="student"), cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "argument OUT" in bad.stderr, bad.stderr
    good = subprocess.run([*cmd, str(py), str(tmp_path / "x.ipynb")], capture_output=True, text=True,
                          env=env(VLR_EDITION="student"), cwd=tmp_path, timeout=120)
    assert good.returncode == 0 and good.stderr == "", good.stderr
    cells = nbformat.read(tmp_path / "x.ipynb", as_version=4).cells
    assert cells and not any("solution" in c.metadata.get("tags", []) for c in cells)


def test_writing_an_instructor_notebook_imports_no_torch(tmp_path):
    """make's notebook rule and `make notebooks` start a Python for the writing: torch's import (about 2 s) is
    not needed there, so vlr_lib.book must not pull it in (check_choice lives in vlr_lib.env for that)."""
    py = ROOT / "notebooks" / "02_triplet_losses.py"
    code = ("import sys; from vlr_lib.book import write_notebook; "
            f"write_notebook({str(py)!r}, {str(tmp_path / 'x.ipynb')!r}, 'instructor'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr[-2000:])
    assert (tmp_path / "x.ipynb").is_file()
