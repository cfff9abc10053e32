"""The static book's mode: which mode each chapter runs in, and how figures show, when `make book`
executes the notebooks.

`make book` (book/build.py) runs every notebook with ``VLR_BOOK=1``, in the mode :func:`chapter_env` gives it:

- the experiment chapters (:func:`recorded_chapters`, notebooks 03 and 09-13) in full mode, so they open the
  full-size records that ship with the workbook (``vlr_lib.experiments.record``) and show the records'
  tables, figures and reading; each re-trains one recorded run to check it, as in JupyterLab. Their
  solutions that would train new full-size runs are tagged :data:`SKIP_TAG`: the book shows their code,
  not run, with :data:`SKIPPED_NOTE`. :func:`page_problems` is what the build (and tests/book) checks
  on each of their pages: the record line (name, date, hardware) is there, and nothing reports fast mode;
- every other chapter in fast mode (``VLR_FAST=1``), as the tests run it.

Figures and explorers while the book is built:

- plotly figures are written as HTML that calls the page's one ``Plotly`` (the book serves
  plotly.js once, as a local file), instead of JSON that only JupyterLab can draw or HTML that
  fetches plotly.js from a CDN;
- explorers show a plotly-native version of themselves, which needs no kernel
  (``vlr_lib.widgets._core``).

In JupyterLab (VLR_BOOK unset) nothing here is used.

Two editions (:data:`EDITIONS`, chosen by ``VLR_EDITION``, :func:`edition`): the instructor's, every
notebook as written, and the student's, which :func:`student_notebook` derives from it: every cell tagged
:data:`SOLUTION_TAG` (the solutions' code, their outputs and their written derivations) removed, and each
graded exercise's check cell showing what the unfilled stub scores (``vlr_lib.grading``). ``make book-student``
builds the student book from the instructor book's executed notebooks (no second execution), and ``make lab``
with ``VLR_EDITION=student`` writes the student notebooks (:func:`write_notebook`) into a folder of their own,
``build/student/``, never beside the ``.py`` sources that hold the solutions.

Jupytext pairs ``notebooks/NN_topic.ipynb`` with its ``.py`` (jupytext.toml). When JupyterLab opens either file,
jupytext refuses an ``.ipynb`` more than a second newer than its ``.py`` whose inputs differ ("File Load Error ...
is more recent than ..."), and compares the text forms when the ``.py`` itself is opened as a notebook, where the
header the ``.py`` leaves out already differs. So :func:`write_notebook` gives the ``.py`` the new ``.ipynb``'s
time (what ``jupytext --sync`` does), and a student notebook carries no jupytext metadata: it asks for no ``.py``.

The edition writer, ``python -m vlr_lib.book IN OUT`` (make's notebook rule) and :func:`write_notebook`, takes no
input on trust: IN must be a regular file holding a notebook (a jupytext .py or an .ipynb), OUT a file in an
existing folder and never IN itself (nor IN through a link). The student edition refuses a cell it cannot judge
rather than guess, since a guess could leak a solution: tags that are not a list of strings (a string would be
matched by substring; ``null`` is refused too), a graded check (found with ``ast``, however it is called) whose key
is not a literal naming a graded exercise. OUT is written atomically: a failure (a full disk) leaves the file that
was there. Each error is one line naming the file, the cell or the variable, exit 2.
"""
from __future__ import annotations

import ast
import os
import re
import reprlib
import warnings
from pathlib import Path
from stat import S_ISREG

from ._io import atomic_write_text, read_regular
from .env import BOOK, book_mode, check_choice, choice

ENV = BOOK
#: A cell with this tag is shown in the book but not run there (a solution that would train new full-size runs).
SKIP_TAG = "book-skip"
SKIPPED_NOTE = ("Not run in the book: this solution trains new full-size runs, and the book shows only the recorded "
                "ones. Run the notebook (make lab) to see its answer.\n")
#: A solution that trains its new full-size runs only when the reader asks for them (``RUN = True`` in the cell,
#: ``vlr_lib.notebook.longer_exercise``): a Run All, the book and the tests run the rest of it, its model answer
#: read from the records.
LONGER_TAG = "longer-exercise"
#: The line ``Record.line()`` prints: the record's name, its date and the hardware it was made on.
RECORD_LINE = re.compile(r"Opened from the record (?P<name>\S+) of (?P<date>\d{4}-\d{2}-\d{2}) \((?P<hardware>[^,;]+)")
FAST_MODE = re.compile(r"fast mode", re.IGNORECASE)
#: The book's two editions; the first is the default.
EDITIONS = ("instructor", "student")
EDITION_ENV = "VLR_EDITION"
#: Cells with this tag are an exercise's solution (code, or a Markdown derivation): the student edition drops them.
SOLUTION_TAG = "solution"
#: The calls of ``vlr_lib.grading`` whose output a student page shows as the unfilled stub's (found with ``ast``).
GRADED_CALLS = ("check", "grade")


def active() -> bool:
    """True while `make book` executes the notebooks (VLR_BOOK=1; ``env.book_mode``)."""
    return book_mode()


def recorded_chapters() -> tuple[str, ...]:
    """The chapters the book shows from their shipped records, in full mode (every recorded experiment's chapter,
    ``vlr_lib.experiments.protocol``); every other chapter runs in fast mode."""
    from .experiments.protocol import chapters

    return chapters()


def chapter_env(stem: str) -> dict[str, str]:
    """The environment `make book` executes the chapter `stem` (e.g. "09_training") with, besides VLR_BOOK=1:
    a recorded chapter in full mode from its records (VLR_FAST=0, VLR_RERUN=0), any other in fast mode; both
    on the shapes data."""
    recorded = stem in recorded_chapters()
    return {"VLR_FAST": "0" if recorded else "1", "VLR_RERUN": "0", "VLR_DATA": "shapes"}


def page_problems(text: str) -> list[str]:
    """What keeps `text`, the outputs of a recorded chapter as the book shows them, from being a page of the
    records: no record line (``Record.line()``: name, date and hardware), or a report of fast mode. Empty when
    the page is sound."""
    found = []
    if not RECORD_LINE.search(text):
        found.append("it shows no record (no 'Opened from the record <name> of <date> (<hardware>' line: a record "
                     "that no longer matches the chapter's settings? make record regenerates them)")
    fast = FAST_MODE.search(text)
    if fast:
        line = text[text.rfind("\n", 0, fast.start()) + 1:].split("\n", 1)[0].strip()
        found.append(f"it reports fast mode: {line[:120]!r}")
    return found


def edition(value: str | None = None) -> str:
    """The edition `value` names, or ``$VLR_EDITION`` when it is None (unset or empty: "instructor")."""
    if value is None:
        return choice(EDITION_ENV, EDITIONS, EDITIONS[0])  # read like every variable: case and spaces ignored
    return check_choice("edition", value.strip() or EDITIONS[0], EDITIONS)


def _stub(*args: object, **kwargs: object) -> None:
    raise NotImplementedError


class NotebookError(ValueError):
    """A notebook the edition writer cannot use: unreadable, or a cell it cannot judge. Names the file and the cell."""


def _cell(where: str, index: int, cell) -> str:
    """A cell as its author finds it, for errors: ``<where>, cell 3 ('its first line')`` (counted from 1)."""
    source = cell.get("source") if isinstance(cell, dict) else None
    first = source.strip().split("\n", 1)[0][:50] if isinstance(source, str) else ""
    return f"{where}, cell {index + 1}" + (f" ({first!r})" if first else "")


def cell_tags(cell, name: str = "the cell") -> list[str]:
    """The cell's tags: a list of strings, or none. Anything else is an error naming `name`, never matched loosely
    (``SOLUTION_TAG in "no-solution-here"`` is True, and a null is no list)."""
    metadata = cell.get("metadata", {})
    if not isinstance(metadata, dict):
        raise NotebookError(f"{name}: its metadata is a {type(metadata).__name__}, not an object")
    tags = metadata.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise NotebookError(f"{name}: its metadata's tags must be a list of strings, got {reprlib.repr(tags)}")
    return tags


def _is_graded_call(node: ast.AST) -> bool:
    """``grading.check(...)`` / ``grading.grade(...)`` (also ``vlr_lib.grading.check``), however it is spaced."""
    func = node.func if isinstance(node, ast.Call) else None
    if not isinstance(func, ast.Attribute) or func.attr not in GRADED_CALLS:
        return False
    owner = func.value
    return (isinstance(owner, ast.Name) and owner.id == "grading") or \
        (isinstance(owner, ast.Attribute) and owner.attr == "grading")


def _argument(call: ast.Call, position: int, keyword: str) -> ast.AST | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _without_magics(source: str) -> list[str]:
    """The cell's lines as Python: ``%time x = f()`` is ``x = f()``, a shell line (``!ls``) is blank."""
    lines = []
    for line in source.splitlines():
        bare = line.lstrip()
        indent = line[: len(line) - len(bare)]
        lines.append("" if bare.startswith("!") else indent + re.sub(r"^%%?\w+\s*", "", bare) if bare.startswith("%")
                     else line)
    return lines


def graded_checks(source: str, name: str = "the cell") -> list[tuple[str, int]]:
    """Every graded call of a code cell (``grading.check(key, answer, seed)``, positional or keyword, on any
    lines), as (key, seed); a key that is not a string literal, or a cell that mentions grading but cannot be
    parsed, is an error naming `name` (its output could not be replaced)."""
    from . import grading

    try:
        tree = ast.parse("\n".join(_without_magics(source)))
    except SyntaxError as err:
        if "grading" not in source:
            return []
        raise NotebookError(f"{name}: cannot be parsed ({err.msg}, line {err.lineno}), so its graded check cannot "
                            "be shown as the stub's") from None
    found = []
    for call in (n for n in ast.walk(tree) if _is_graded_call(n)):
        key, seed = _argument(call, 0, "key"), _argument(call, 2, "seed")
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise NotebookError(f"{name}: grading.{call.func.attr}'s key must be a string literal (the exercise's "
                                "name), so that the student edition can show what the stub scores")
        if key.value not in grading.EXERCISES:
            raise NotebookError(f"{name}: grading.{call.func.attr}({key.value!r}, ...) is not a graded exercise "
                                f"(one of {', '.join(grading.EXERCISES)})")
        literal = isinstance(seed, ast.Constant) and type(seed.value) is int and seed.value >= 0
        found.append((key.value, seed.value if literal else None))  # no seed: the practice cases, as the cell runs
    return found


def student_notebook(nb, where: str = "the notebook"):
    """A copy of notebook `nb` (nbformat) for the student edition: no cell tagged :data:`SOLUTION_TAG`, and every
    graded check cell's outputs replaced by what it prints while the stub is unfilled (0 points), so a page
    derived from an executed instructor notebook shows no solution's result either.

    A cell whose tags are not a list of strings, or whose graded check names no graded exercise, is a
    :class:`NotebookError` naming `where` and the cell: the edition never guesses what a cell is."""
    import copy

    import nbformat

    from . import grading

    student = copy.deepcopy(nb)
    student.metadata.pop("jupytext", None)  # it asks jupytext for no .py (make lab turns jupytext off besides)
    named = [(_cell(where, i, c), c) for i, c in enumerate(student.cells)]
    student.cells = [c for name, c in named if SOLUTION_TAG not in cell_tags(c, name)]
    for name, cell in named:
        if cell.get("cell_type") != "code" or SOLUTION_TAG in cell_tags(cell, name):
            continue
        checks = graded_checks(cell.get("source", ""), name)
        if checks and cell.get("outputs"):
            text = "".join(f"{grading.grade(key, _stub, seed)}\n" for key, seed in checks)
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return student


def path_problem(py: str | os.PathLike, out: str | os.PathLike) -> tuple[str, str] | None:
    """Why notebook `py` cannot be read, or `out` written as its edition: ("py" or "out", the reason naming the
    file); None when both are fine. Checked before anything is read or written."""
    py, out = Path(py), Path(out)
    try:
        mode = os.stat(py).st_mode
    except OSError as err:
        return "py", f"{str(py)!r} " + ("does not exist" if isinstance(err, FileNotFoundError)
                                        else f"cannot be read ({err.strerror})")
    if not S_ISREG(mode):
        return "py", f"{str(py)!r} is not a regular file (a folder, FIFO or device): not a notebook"
    if not str(out).strip():
        return "out", "is an empty path; name the .ipynb to write"
    if out.is_dir():
        return "out", f"{str(out)!r} is a folder; name the .ipynb to write in it"
    if out.exists() and os.path.samefile(py, out):
        return "out", f"{str(out)!r} is the input notebook itself; writing it would replace the source"
    folder = Path(os.path.realpath(out)).parent  # where the file (a link's target) is written
    if not folder.is_dir():
        return "out", f"cannot write {str(out)!r}: its folder {str(folder)!r} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "out", f"cannot write {str(out)!r}: its folder {str(folder)!r} is not writable"
    return None


def read_notebook(py: str | os.PathLike):
    """The notebook in file `py` (a jupytext .py, .md, ... or an .ipynb), read only when it is a regular file; a
    :class:`NotebookError` naming the file when it cannot be read or parsed as one."""
    import jupytext

    path = Path(py)
    try:
        text = read_regular(path).decode("utf-8")
        with warnings.catch_warnings():  # jupytext's and nbformat's: the errors below say what is wrong, in one line
            warnings.simplefilter("ignore")
            nb = jupytext.reads(text, fmt=path.suffix.lstrip(".") or None)
    except FileNotFoundError:
        raise NotebookError(f"{str(path)!r} does not exist") from None
    except Exception as err:  # noqa: BLE001 - JSON, UTF-8, jupytext and nbformat errors all mean "not a notebook"
        detail = " ".join(str(err).split())[:200]
        raise NotebookError(f"{str(path)!r} cannot be read as a notebook ({type(err).__name__}: {detail})") from None
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise NotebookError(f"{str(path)!r} is not a notebook: its cells are not a list of objects")
    for i, cell in enumerate(cells):
        if not isinstance(cell.get("source", ""), str) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"{_cell(repr(str(path)), i, cell)}: no cell_type, or a source that is not text")
    return nb


def write_notebook(py: str | os.PathLike, out: str | os.PathLike, chosen: str | None = None) -> None:
    """Write the notebook `py` (a jupytext .py, or an .ipynb) as the .ipynb `out` in edition `chosen` (None:
    ``$VLR_EDITION``). Checked first (:func:`path_problem`: `out` is never `py`, its folder exists); written
    atomically, so a failure (a full disk: ``_io.NoSpaceError``) leaves the file that was there."""
    import nbformat

    student = edition(chosen) == "student"
    problem = path_problem(py, out)
    if problem:
        raise ValueError(f"{problem[0]}: {problem[1]}")
    nb = read_notebook(py)
    with warnings.catch_warnings():  # nbformat's validation warnings (cells without ids): the notebook was read above
        warnings.simplefilter("ignore")
        text = nbformat.writes(student_notebook(nb, repr(str(py))) if student else nb)
    atomic_write_text(out, text if text.endswith("\n") else text + "\n")
    if not student and Path(out).resolve() == Path(py).resolve().with_suffix(".ipynb"):
        # jupytext's pair: the .py exactly as recent as its .ipynb (no "more recent" dialog, make up to date)
        written = os.stat(out).st_mtime_ns
        os.utime(py, ns=(os.stat(py).st_atime_ns, written))


def main(argv: list[str] | None = None) -> int:
    """``python -m vlr_lib.book IN OUT`` (make's notebook rule): one line and exit 2 for any bad input."""
    from .cli import args as A

    p = A.Parser(prog="python -m vlr_lib.book", description="Write notebook IN (a jupytext .py or an .ipynb) as the "
                 "notebook OUT (.ipynb) in the edition $VLR_EDITION names (instructor, the default, or student).")
    p.add_argument("IN", help="the notebook to read")
    p.add_argument("OUT", help="the .ipynb to write (atomically); never IN")
    return A.run(p, argv, _write)


def _write(args) -> int:
    from .cli.args import UsageError

    chosen = edition()  # a bad VLR_EDITION first, naming the variable
    problem = path_problem(args.IN, args.OUT)
    if problem:
        raise UsageError({"py": "IN", "out": "OUT"}[problem[0]], problem[1])
    try:
        write_notebook(args.IN, args.OUT, chosen)
    except NotebookError as err:
        raise UsageError("IN", str(err)) from None
    return 0


if __name__ == "__main__":  # make's rule: python -m vlr_lib.book NN_topic.py NN_topic.ipynb (edition: $VLR_EDITION)
    import sys

    sys.exit(main())
