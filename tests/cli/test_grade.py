"""``python -m vlr_lib grade``: the regrade of collected notebooks, over made-up submissions.

The submissions are notebook 02's student edition (vlr_lib.book) with its answer cell (tagged ``answer``)
replaced: a correct answer, the positives masked with 0, a float32 one, one calling the library, one changing
it, one that hangs, one that kills its process, a file that is not JSON and a notebook without its answer
cell. Each is graded in its own process, on the regrade's cases from the seed given.
"""
from __future__ import annotations

import copy
import csv
import os
from pathlib import Path

import jupytext
import nbformat
import pytest

from tests.cli.helpers import ROOT, call, snapshot
from vlr_lib import book
from vlr_lib.cli import grade

GOOD = '''def triplet_sh(S, margin):
    neg = S.masked_fill(torch.eye(len(S), dtype=torch.bool), -math.inf)
    d = S.diagonal()
    return torch.relu(margin + neg.amax(1) - d).sum() + torch.relu(margin + neg.amax(0) - d).sum()
'''
NT_XENT = '''def nt_xent(S, temperature):
    logits = S / temperature
    rows = torch.logsumexp(logits, dim=1) - logits.diagonal()
    return (rows.sum() + (torch.logsumexp(logits, dim=0) - logits.diagonal()).sum()) / len(S)
'''


def student_notebook(chapter: str):
    return book.student_notebook(jupytext.read(next((ROOT / "notebooks").glob(f"{chapter}_*.py"))))


def answer_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if "answer" in c.metadata.get("tags", []))


def submission(folder: Path, name: str, source: str | None, chapter: str = "02", extra: str | None = None) -> Path:
    """Chapter's student notebook with its answer cell's source replaced (None: the cell deleted); `extra`: a
    second answer cell, NT-Xent's, with its check cell."""
    nb = copy.deepcopy(student_notebook(chapter))
    i = answer_index(nb)
    if source is None:
        del nb.cells[i]
    else:
        nb.cells[i].source = source
    if extra is not None:
        nb.cells += [nbformat.v4.new_code_cell(extra, metadata={"tags": ["answer"]}),
                     nbformat.v4.new_code_cell('score = grading.check("03_nt_xent", nt_xent)')]
    path = folder / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def read_book(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_the_regrade_over_a_folder_of_submissions(tmp_path, capsys):
    subs = tmp_path / "subs"
    submission(subs, "alice", GOOD)
    submission(subs, "bob", GOOD.replace("-math.inf", "0.0"))  # the positives masked with 0
    submission(subs, "carol", GOOD.replace("    neg =", "    S = S.float()\n    neg ="))
    submission(subs, "dave", "def triplet_sh(S, margin):\n    return losses.triplet_hardest(S, margin)\n")
    submission(subs, "erin", "losses.triplet_hardest = lambda *a, **k: torch.tensor(0.0)\n" + GOOD)
    submission(subs, "frank", "def triplet_sh(S, margin):\n    while True:\n        pass\n")
    submission(subs, "gina", "import os\n\ndef triplet_sh(S, margin):\n    os._exit(1)\n", extra=NT_XENT)
    (subs / "hank.ipynb").write_text("{ this is not JSON")
    submission(subs, "ivan", None)
    out = tmp_path / "marks" / "grades.csv"
    code, stdout, err = call(grade.main, [str(subs), "--seed", "918273", "--out", str(out), "--time-limit", "1"],
                             capsys)
    assert code == 0, err
    rows = read_book(out)
    assert list(rows) == ["alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank", "ivan"]
    assert list(rows["alice"]) == ["student", "02_triplet_sh", "03_nt_xent", "total", "flagged", "reason"]
    score = {s: float(r["02_triplet_sh"]) for s, r in rows.items()}
    assert score["alice"] == score["carol"] == 5.0 and "02_triplet_sh" not in rows["alice"]["reason"]
    assert 0 < score["bob"] < 5 and "it looks like: the positives masked with 0" in rows["bob"]["reason"]
    assert score["dave"] == 0 and rows["dave"]["flagged"] == "02_triplet_sh"
    assert "calls vlr_lib.losses.triplet_hardest" in rows["dave"]["reason"]
    assert score["erin"] == 0 and rows["erin"]["flagged"] == "02_triplet_sh" and "changed the library" in rows["erin"]["reason"]
    assert score["frank"] == 0 and "ran past the time limit of 1 s" in rows["frank"]["reason"]
    assert score["gina"] == 0 and "the grading process exited with code 1" in rows["gina"]["reason"]
    assert float(rows["gina"]["03_nt_xent"]) == 5.0 and rows["gina"]["total"] == "5", "graded on after the crash"
    assert score["hank"] == 0 and "hank.ipynb is not a notebook" in rows["hank"]["reason"]
    assert score["ivan"] == 0 and "no answer cell" in rows["ivan"]["reason"]
    assert rows["alice"]["03_nt_xent"] == "0" and "no answer cell: no notebook defines nt_xent" in rows["alice"]["reason"]
    feedback = out.parent / "grades-feedback"
    assert sorted(p.stem for p in feedback.iterdir()) == sorted(rows)
    bob = (feedback / "bob.md").read_text()
    assert bob.startswith("# bob: ") and "every negative below 0" in bob and "918273" not in bob
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == [], "no temp file left"
    assert "wrote " in stdout


def test_an_answer_that_escapes_the_case_time_limit_is_stopped_by_the_notebooks(tmp_path, capsys):
    """SIGALRM ignored: the per-notebook --timeout kills the process; the student's other notebook is graded.
    The answer hangs asleep, so the other test worker keeps the CPU; --timeout 12 leaves the other notebook's process
    (its own 12 s: start, imports, grading) several times what it takes on a loaded 2-core machine."""
    hang = "import signal, time\n\ndef triplet_sh(S, margin):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n" \
           "    while True:\n        time.sleep(0.1)\n"
    submission(tmp_path / "subs" / "kim", "02_triplet_losses", hang)
    submission(tmp_path / "subs" / "kim", "03_contrastive", NT_XENT, chapter="03")
    out = tmp_path / "grades.csv"
    code, _, err = call(grade.main, [str(tmp_path / "subs"), "--seed", "5", "--out", str(out), "--timeout", "12"],
                        capsys)
    assert code == 0, err
    (row,) = read_book(out).values()
    assert row["student"] == "kim" and row["02_triplet_sh"] == "0" and row["03_nt_xent"] == "5"
    assert "ran past the notebook's time limit of 12 s (--timeout)" in row["reason"]


def test_answers_are_the_cells_tagged_answer_else_the_last_cell_defining_the_function(tmp_path):
    nb = copy.deepcopy(student_notebook("02"))
    nb.cells[answer_index(nb)].source = GOOD
    nb.cells.append(nbformat.v4.new_code_cell("def triplet_sh(S, margin):\n    return 0\n"))  # untagged, later
    nbformat.write(nb, tmp_path / "a.ipynb")
    answers = grade.read_answers(tmp_path / "a.ipynb")
    assert answers.cells == {"02_triplet_sh": GOOD.strip()} and "import torch" in answers.imports
    for cell in nb.cells:
        cell.metadata.pop("tags", None)
    nbformat.write(nb, tmp_path / "b.ipynb")
    assert grade.read_answers(tmp_path / "b.ipynb").cells["02_triplet_sh"].endswith("return 0")


@pytest.mark.parametrize("argv, flag", [
    (["subs", "--out", "g.csv"], "--seed"),
    (["subs", "--seed", "-1"], "--seed"),
    (["missing", "--seed", "1"], "does not exist"),
    (["afile", "--seed", "1"], "is not a folder of collected notebooks"),
    (["empty", "--seed", "1"], "holds no .ipynb notebook"),
    (["subs", "--seed", "1", "--out", "g.txt"], "--out"),
    (["subs", "--seed", "1", "--timeout", "0"], "--timeout"),
])
def test_bad_input_is_one_line_and_exit_2(argv, flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "x.ipynb").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("x")
    before = snapshot(tmp_path)
    code, _, err = call(grade.main, argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and flag in err and "Traceback" not in err, err
    assert err.startswith("python -m vlr_lib grade: error: ")
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_folder_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs").chmod(0)
    try:
        code, _, err = call(grade.main, [str(tmp_path / "subs"), "--seed", "1"], capsys)
    finally:
        (tmp_path / "subs").chmod(0o755)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not readable" in err


def test_a_folder_that_cannot_be_listed_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "subs").mkdir()

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", denied)
    code, _, err = call(grade.main, [str(tmp_path / "subs"), "--seed", "1"], capsys)
    assert code == 2 and err.strip() == f"python -m vlr_lib grade: error: cannot read {str(tmp_path / 'subs')!r} " \
                                       "(permission denied)"


def test_of_two_notebooks_answering_one_exercise_a_flagged_one_counts_else_the_best():
    honest, better, flagged = grade.Mark(3.0, 5), grade.Mark(4.5, 5), grade.Mark(0.0, 5, "calls ...", flagged=True)
    assert grade._better(honest, None) and grade._better(better, honest) and not grade._better(honest, better)
    assert grade._better(flagged, better) and not grade._better(better, flagged)
