"""``python -m vlr_lib grade``: regrade collected notebooks for marks, out of the students' reach.

    python -m vlr_lib grade submissions/ --seed 81723645 --out grades.csv
    python -m vlr_lib grade submissions/ --seed 81723645 --out grades.csv --timeout 120 --time-limit 5

SUBMISSIONS holds the collected notebooks: ``alice.ipynb``, ``bob.ipynb``, ... (the student is the file's
name), or one folder per student (``alice/02_triplet_losses.ipynb``, ...: the student is the folder's name).
For each notebook, the answer of each graded exercise is its cell tagged ``answer`` that defines the
exercise's function (``triplet_sh``); a notebook whose tags were lost falls back on the last code cell that
defines it. Only that cell runs -- with the notebook's import statements that it needs -- in a fresh Python
process (one per notebook, at most ``--timeout`` seconds, restarted for the remaining exercises when an answer
kills it), graded by ``vlr_lib.grading.grade`` on the regrade's cases: 20 per exercise, drawn from ``--seed``.
Keep the seed private: the practice cases of the notebooks' check cells are not the ones that give marks.

Writes, each atomically: the gradebook ``--out`` (CSV: student, one column per exercise found in the
submissions, total, flagged, reason) and, next to it, ``<out>-feedback/<student>.md`` with each exercise's
score and what went wrong. An answer that calls the library's own function or changes the library is
flagged and scores 0. A file that is not a notebook (not JSON), a notebook without an answer cell, an answer
that crashes or hangs the process: 0 for that exercise, with the reason, and grading carries on. A missing
``--seed`` or an unreadable SUBMISSIONS folder is one line and exit code 2, before anything runs.

The process is a separate interpreter, not a sandbox: run untrusted submissions as a user (or in a container)
that can write nothing you want to keep.
"""
from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import args as A

ANSWER_TAG = "answer"
#: What an answer's cell may use without importing it (the names the chapters import before their exercise).
PRELUDE = ("import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
           "from vlr_lib import analysis, goal, grading, losses, metrics, similarity\n")


@dataclass
class Mark:
    """One student's result on one exercise, as the gradebook and the feedback show it."""

    score: float
    points: int
    reason: str = ""  # empty at full marks
    details: list[str] = field(default_factory=list)
    flagged: bool = False


def parser(prog: str = "python -m vlr_lib grade") -> A.Parser:
    from .. import grading

    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("submissions", type=A.existing_path, help="the folder of collected notebooks")
    p.add_argument("--seed", type=A.seed, required=True, help="the private seed of the regrade's cases")
    p.add_argument("--out", type=A.suffix(".csv"), default=Path("grades.csv"),
                   help="the gradebook to write (default grades.csv); the feedback goes to <out>-feedback/")
    p.add_argument("--timeout", type=A.positive_float, default=300.0,
                   help="seconds one notebook's process may run (default 300)")
    p.add_argument("--time-limit", type=A.positive_float, default=grading.TIME_LIMIT,
                   help=f"seconds one case may take (default {grading.TIME_LIMIT:g})")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib grade") -> int:
    return A.run(parser(prog), argv, _grade, lambda args: "nothing was written; run the same command again")


# --------------------------------------------------------------------------- the submissions


def submissions(folder: Path) -> dict[str, list[Path]]:
    """Student -> their notebooks: ``<student>.ipynb`` files, or ``<student>/*.ipynb`` folders."""
    if not folder.is_dir():
        raise A.UsageError(None, f"{str(folder)!r} is not a folder of collected notebooks")
    try:
        entries = sorted(folder.iterdir())
        found = {p.stem: [p] for p in entries if p.is_file() and p.suffix == ".ipynb"}
        for sub in (p for p in entries if p.is_dir() and not p.name.startswith(".")):
            notebooks = sorted(sub.glob("*.ipynb"))
            if notebooks:
                found.setdefault(sub.name, []).extend(notebooks)
    except PermissionError:
        raise A.UsageError(None, f"cannot read {str(folder)!r} (permission denied)") from None
    if not found:
        raise A.UsageError(None, f"{str(folder)!r} holds no .ipynb notebook (nor folders of them)")
    return found


@dataclass
class Answers:
    """What one notebook holds for grading: each exercise's answer cell, the imports, and why one is missing."""

    cells: dict[str, str] = field(default_factory=dict)
    imports: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # key -> why there is no answer
    unreadable: str | None = None  # the whole file: why it is no notebook


def _code(source: object) -> str:
    text = "".join(source) if isinstance(source, list) else str(source or "")
    # IPython's magics and shell escapes are no Python: dropped, as nbconvert's script export comments them out
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())


def _defines(source: str, name: str) -> bool:
    return re.search(rf"^(async\s+)?def\s+{re.escape(name)}\s*\(", source, re.MULTILINE) is not None


def read_answers(path: Path) -> Answers:
    """The answers of a collected notebook (an Answers saying why, when the file is no notebook)."""
    from .. import grading

    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError("'cells' is not a list")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        return Answers(unreadable=f"{path.name} is not a notebook that can be read ({type(err).__name__}: "
                                  f"{A.one_line(err)[:120]})")
    code = [c for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
    sources = [(_code(c.get("source")), ANSWER_TAG in (c.get("metadata") or {}).get("tags", [])) for c in code]
    out = Answers(imports=_imports(s for s, _ in sources))
    for key, ex in grading.EXERCISES.items():
        checked = any(f'grading.check("{key}"' in s or f"grading.check('{key}'" in s for s, _ in sources)
        defining = [(s, tagged) for s, tagged in sources if _defines(s, ex.function)]
        tagged = [s for s, t in defining if t]
        if tagged or defining:
            out.cells[key] = (tagged or [s for s, _ in defining])[-1]
        elif checked:
            out.missing[key] = f"no answer cell: no code cell defines {ex.function}(...)"
    return out


def _imports(sources) -> list[str]:
    """Every top-level import statement of the notebook's cells, one source line each."""
    found = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        found += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return list(dict.fromkeys(found))


# --------------------------------------------------------------------------- one notebook, in fresh processes


def grade_notebook(answers: Answers, seed: int, time_limit: float, timeout: float) -> dict[str, Mark]:
    """Each answer of one notebook graded in a fresh process; one that kills or hangs it scores 0, and a new
    process grades the rest."""
    marks: dict[str, Mark] = {}
    todo = list(answers.cells)
    while todo:
        started, results, failure = _worker(answers, todo, seed, time_limit, timeout)
        marks.update(results)
        crashed = [k for k in started if k not in results]
        for key in crashed:
            marks[key] = Mark(0.0, _points(key), failure or "the grading process stopped during this answer")
        todo = [k for k in todo if k not in marks]
        if todo and not crashed:  # the process failed before any answer: nothing to retry with
            for key in todo:
                marks[key] = Mark(0.0, _points(key), failure or "the grading process failed")
            break
    return marks


def _points(key: str) -> int:
    from .. import grading

    return grading.EXERCISES[key].points


def _worker(answers: Answers, keys: list[str], seed: int, time_limit: float,
            timeout: float) -> tuple[list[str], dict[str, Mark], str | None]:
    """(the exercises it started, the marks it wrote, why it stopped early) of one worker process."""
    import vlr_lib

    job = {"cells": {k: answers.cells[k] for k in keys}, "imports": answers.imports, "seed": seed,
           "time_limit": time_limit}
    root = str(Path(vlr_lib.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="vlr-grade-") as tmp:
        results_file = Path(tmp) / "results.jsonl"
        proc = subprocess.Popen([sys.executable, "-m", "vlr_lib.cli.grade", str(results_file)], cwd=tmp, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        failure = None
        try:
            _, err = proc.communicate(json.dumps(job).encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            failure = f"ran past the notebook's time limit of {timeout:g} s (--timeout) and was stopped"
            err = b""
        except BaseException:
            _kill(proc)
            raise
        if failure is None and proc.returncode != 0:
            failure = _died(proc.returncode, err.decode(errors="replace"))
        started, marks = _read_results(results_file)
    if failure is None and any(k not in marks for k in started):
        failure = "the answer ended the grading process (os._exit, or the process died) while it was graded"
    return started, marks, failure


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the answer's children too
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
    proc.wait()


def _died(code: int, stderr: str) -> str:
    last = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or [""]
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    said = f" ({last[0].strip()[:160]})" if last[0] else " (os._exit, or a crash)"
    return f"the grading process {how} during this answer{said}"


def _read_results(path: Path) -> tuple[list[str], dict[str, Mark]]:
    started, marks = [], {}
    if not path.exists():
        return started, marks
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if "start" in entry:
            started.append(entry["start"])
        elif "key" in entry:
            marks[entry["key"]] = Mark(entry["score"], entry["points"], entry["reason"], entry["details"],
                                       entry["flagged"])
    return started, marks


# --------------------------------------------------------------------------- the worker (a fresh process)


def worker(results_file: str) -> int:
    """Grade the job read from stdin, one exercise after the other, appending one JSON line per event to
    `results_file` (so a crash loses only the answer that caused it)."""
    import torch

    from .. import _sandbox, grading

    torch.set_num_threads(1)
    job = json.loads(sys.stdin.read())
    base: dict[str, object] = {"__name__": "__main__"}
    exec(PRELUDE, base)
    grading.undo_library_changes()
    with open(results_file, "a", encoding="utf-8") as out:
        for key, source in job["cells"].items():
            _write(out, {"start": key})
            _write(out, {"key": key, **_grade_one(key, source, job, base, grading, _sandbox)})
    return 0


def _write(out: io.TextIOBase, entry: dict) -> None:
    out.write(json.dumps(entry) + "\n")
    out.flush()
    os.fsync(out.fileno())


def _needed_imports(source: str, imports: list[str]) -> list[str]:
    """The notebook's import statements that bind a name the answer uses."""
    try:
        used = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
    except SyntaxError:
        return []
    keep = []
    for line in imports:
        bound = {(a.asname or a.name).split(".")[0] for n in ast.parse(line).body for a in n.names}
        if bound & used:
            keep.append(line)
    return keep


def _grade_one(key: str, source: str, job: dict, base: dict, grading, sandbox) -> dict:
    ex = grading.EXERCISES[key]
    namespace = dict(base)
    for line in _needed_imports(source, job["imports"]):
        try:
            exec(line, namespace)
        except Exception:  # noqa: BLE001 - an import that fails here fails the answer that needs it, named there
            pass
    grading.undo_library_changes()
    try:
        code = compile(source, f"<answer cell of {key}>", "exec")
    except SyntaxError as err:
        return _mark(ex, f"the answer cell is not valid Python (line {err.lineno}: {err.msg})")
    kernel = sandbox.Snapshot(library=False)
    cell = sandbox.call(lambda: exec(code, namespace), {}, lambda value: value,
                        lambda: grading.undo_library_changes() + kernel.restore(), {}, job["time_limit"])
    if cell.changed:
        return _mark(ex, f"the answer cell changed the library ({', '.join(cell.changed[:3])}): 0 points", flagged=True)
    answer = namespace.get(ex.function)
    if not callable(answer):
        why = f": it {cell.failure}" if cell.failure else ""
        return _mark(ex, f"the answer cell does not define {ex.function}(...){why}")
    result = grading.grade(key, answer, seed=job["seed"], time_limit=job["time_limit"])
    details = [*result.flags, *result.problems] + ([f"note: running the answer cell {cell.failure}"] if cell.failure else [])
    hint = [d for d in result.problems if d.startswith("it looks like: ")]
    reason = "" if result.full_marks else ([*result.flags, *hint, *details][:1] or [""])[0]
    return {"score": result.score, "points": result.points, "reason": reason, "details": details,
            "flagged": bool(result.flags)}


def _mark(ex, reason: str, flagged: bool = False) -> dict:
    return {"score": 0.0, "points": ex.points, "reason": reason, "details": [reason], "flagged": flagged}


# --------------------------------------------------------------------------- the gradebook and the feedback


def _grade(args: argparse.Namespace) -> int:
    from .. import grading
    from .._io import atomic_dir, atomic_write_text

    students = submissions(args.submissions)
    read = {s: [(p, read_answers(p)) for p in paths] for s, paths in students.items()}
    found = {k for notebooks in read.values() for _, a in notebooks for k in (*a.cells, *a.missing)}
    keys = [k for k in grading.EXERCISES if k in found] or list(grading.EXERCISES)
    book: dict[str, dict[str, Mark]] = {}
    for student, notebooks in read.items():
        book[student] = _student_marks(notebooks, keys, args)
        total = sum(m.score for m in book[student].values())
        print(f"{student}: {total:g} / {sum(m.points for m in book[student].values())}", flush=True)
    feedback = args.out.with_name(f"{args.out.stem}-feedback")
    with atomic_dir(feedback) as folder:
        for student, marks in book.items():
            (folder / f"{student}.md").write_text(_feedback(student, marks))
    atomic_write_text(args.out, _csv(book, keys))
    print(f"wrote {args.out} ({len(book)} students) and {feedback}/")
    return 0


def _student_marks(notebooks: list[tuple[Path, Answers]], keys: list[str], args: argparse.Namespace) -> dict[str, Mark]:
    marks: dict[str, Mark] = {}
    for path, answers in notebooks:
        if answers.unreadable:
            continue
        graded = grade_notebook(answers, args.seed, args.time_limit, args.timeout)
        for key, mark in graded.items():
            if key in keys and _better(mark, marks.get(key)):
                marks[key] = mark
    unreadable = "; ".join(a.unreadable for _, a in notebooks if a.unreadable)
    for key in keys:
        if key not in marks:
            why = next((a.missing[key] for _, a in notebooks if key in a.missing), None)
            reason = unreadable or why or f"no answer cell: no notebook defines {_function(key)}(...)"
            marks[key] = Mark(0.0, _points(key), reason, [reason])
    return {k: marks[k] for k in keys}


def _better(mark: Mark, kept: Mark | None) -> bool:
    """Two notebooks answer one exercise: a flagged answer counts (no second try hides it), else the best."""
    if kept is None or mark.flagged and not kept.flagged:
        return True
    return mark.flagged == kept.flagged and mark.score > kept.score


def _function(key: str) -> str:
    from .. import grading

    return grading.EXERCISES[key].function


def _csv(book: dict[str, dict[str, Mark]], keys: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", *keys, "total", "flagged", "reason"])
    for student, marks in book.items():
        flagged = " ".join(k for k in keys if marks[k].flagged)
        reason = "; ".join(f"{k}: {marks[k].reason}" for k in keys if marks[k].reason)
        writer.writerow([student, *(f"{marks[k].score:g}" for k in keys),
                         f"{sum(m.score for m in marks.values()):g}", flagged, reason])
    return buffer.getvalue()


def _feedback(student: str, marks: dict[str, Mark]) -> str:
    from .. import grading

    total, points = sum(m.score for m in marks.values()), sum(m.points for m in marks.values())
    lines = [f"# {student}: {total:g} / {points}", "",
             f"Regraded on {grading.N_REGRADE} cases per exercise (not the notebook's practice cases).", ""]
    for key, mark in marks.items():
        lines += [f"## {key} ({grading.EXERCISES[key].title}): {mark.score:g} / {mark.points}", ""]
        lines += [f"- {d}" for d in mark.details] or ["- full marks"]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # the worker: python -m vlr_lib.cli.grade RESULTS_FILE < job.json
    sys.exit(worker(sys.argv[1]))
