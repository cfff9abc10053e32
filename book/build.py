"""`make book`: execute every notebook, then build the static HTML book.

    python book/build.py [--out build/book] [--jobs 2] [--notebooks notebooks]
    python book/build.py --edition student [--out build/book-student] [--executed build/book-executed]

Two editions (vlr_lib.book.EDITIONS). The instructor edition (the default, `make book`) is built as below,
and its executed notebooks are kept in --executed. The student edition (`make book-student`) executes
nothing: it takes those executed notebooks and removes every solution (vlr_lib.book.student_notebook), so
both editions show the same run. Each chapter page offers its notebook for download, in the page's edition
(un-executed, from the jupytext source).

1. The sources are assembled in a temporary folder beside --out: the README (its introduction is
   the front page), docs/*.md, book/*.md and book/conf.py.
2. Each notebook (the jupytext .py) is executed top to bottom with VLR_BOOK=1 (vlr_lib.book), in a
   fresh runs folder, --jobs at a time: the experiment chapters (vlr_lib.book.recorded_chapters(),
   notebooks 03 and 09-12) in full mode, from the full-size records that ship with the workbook, every
   other chapter in fast mode (vlr_lib.book.chapter_env). A cell tagged book-skip (a solution that
   would train new full-size runs) is shown, not run, with a note saying so. A cell that fails stops
   the build with one line per failed notebook naming the file, the cell, its line and the error;
   so does an experiment chapter whose outputs show no record line or report fast mode
   (vlr_lib.book.page_problems).
3. Sphinx (myst-nb, sphinx-book-theme) renders them; plotly.js and MathJax are copied into
   _static from the installed plotly and jupyter-server-mathjax packages, so the book needs
   no network, from the file system or from any static server.
4. Only a complete book replaces --out (a rename): a failed build leaves the previous book,
   or none, never a half-built one.

Exit codes: 0 built, 1 a notebook or Sphinx failed, 2 bad command line.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from vlr_lib import book

ROOT = Path(__file__).resolve().parents[1]
BOOK = Path(__file__).resolve().parent
CELL_TIMEOUT_S = 600
KERNEL_START_S = 180  # a loaded CI machine can take a while to start a kernel
MATHJAX_PARTS = ("MathJax.js", "config", "extensions", "jax", "fonts")


class NotebookFailed(Exception):
    """A notebook stopped on an error: the message names the file, the cell and its line."""


def cell_lines(py: Path) -> list[int]:
    """The line (1-based) where each cell of a percent-format notebook starts, in cell order."""
    return [i for i, line in enumerate(py.read_text().splitlines(), 1) if line.startswith("# %%")]


def failure(py: Path, nb, exc: Exception) -> str:
    """One line: which cell of which notebook failed, where, and how."""
    for index, cell in enumerate(nb.cells):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            lines = cell_lines(py)
            where = f", line {lines[index]}" if index < len(lines) else ""
            first = (cell.source.splitlines() or [""])[0][:60]
            return (f"{py.relative_to(py.parents[1])}: cell {index + 1}{where} ({first!r}) failed: "
                    f"{errors[0]['ename']}: {errors[0]['evalue']}".splitlines()[0])
    return f"{py.name}: {type(exc).__name__}: {exc}".splitlines()[0]


def cell_seconds(cell) -> float:
    """How long an executed cell ran, from the timestamps nbclient records."""
    from datetime import datetime

    t = cell.metadata.get("execution", {})
    start, end = t.get("iopub.execute_input"), t.get("shell.execute_reply")
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() if start and end else 0.0


def outputs_text(nb) -> str:
    """Everything an executed notebook's cells show as text: streams, errors, and the text, Markdown and
    HTML of displayed results (plotly figures' titles and names included)."""
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            elif output.get("output_type") == "error":
                parts.append(f"{output.get('ename')}: {output.get('evalue')}")
            else:
                data = output.get("data", {})
                parts += [data[m] for m in ("text/plain", "text/markdown", "text/html") if isinstance(data.get(m), str)]
    return "\n".join(parts)


def skipped_note(nb) -> int:
    """Give every cell tagged book.SKIP_TAG (shown, not run) the note that says so; returns how many."""
    import nbformat

    skipped = [c for c in nb.cells if c.cell_type == "code" and book.SKIP_TAG in book.cell_tags(c)]
    for cell in skipped:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=book.SKIPPED_NOTE)]
    return len(skipped)


def execute(py: Path, out: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run notebook `py` top to bottom into `out` (an .ipynb with outputs), its kernel with `env` added to the
    environment; returns the seconds it took, and the seconds its exercises' solutions took. Cells tagged
    book.SKIP_TAG are not run; a recorded chapter (book.recorded_chapters()) must show its record and never
    report fast mode (book.page_problems)."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    os.environ.update(env or {})  # this worker runs one notebook at a time: the kernel inherits the variables
    nb = jupytext.read(py)
    start = time.perf_counter()
    # No widget state: it would carry plotly's widget bundle (5 MB) per explorer into the page.
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, startup_timeout=KERNEL_START_S, kernel_name="python3",
                            store_widget_state=False, skip_cells_with_tag=book.SKIP_TAG,
                            resources={"metadata": {"path": str(py.parent)}})
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        raise NotebookFailed(failure(py, nb, exc)) from None
    except Exception as exc:  # e.g. the kernel did not start: still one line naming the notebook
        raise NotebookFailed(f"{py.name}: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    import nbformat

    if py.stem in book.recorded_chapters() and (found := book.page_problems(outputs_text(nb))):
        raise NotebookFailed(f"{py.name}: executed for the book, but {'; '.join(found)}")
    skipped_note(nb)
    solutions = [c for c in nb.cells if book.SOLUTION_TAG in book.cell_tags(c)]
    for cell in solutions:  # "Show solution 2" rather than the same words on every toggle
        number = re.match(r"# Solution (\d+)", cell.source)
        if number:
            cell.metadata["mystnb"] = {"code_prompt_show": f"Show solution {number.group(1)}"}
    nbformat.write(nb, out)  # as executed: the student edition is made from this (student_chapters)
    return time.perf_counter() - start, sum(cell_seconds(c) for c in solutions)


DOWNLOADS = "_download"  # beside the chapters in the Sphinx sources: the notebooks a reader downloads
STUDENT_COURSE = """# Course guide

The course guide (timetable, rubric, quiz bank with answers, project brief) is the instructor's: it is in the
instructor edition of this book and in `docs/course.md` of the workbook.
"""


def assemble(src: Path, notebooks: list[Path], edition: str = "instructor") -> None:
    """The Sphinx source folder: pages, configuration, the notebooks to download, and the static files the pages
    load. The student edition's course guide is a page saying where the instructor's is."""
    (src / "docs").mkdir(parents=True)
    (src / "notebooks" / DOWNLOADS).mkdir(parents=True)
    shutil.copy(ROOT / "README.md", src / "README.md")
    for page in sorted((ROOT / "docs").glob("*.md")):
        shutil.copy(page, src / "docs" / page.name)
    if edition == "student":
        (src / "docs" / "course.md").write_text(STUDENT_COURSE)
    for page in [BOOK / "conf.py", *sorted(BOOK.glob("*.md"))]:
        shutil.copy(page, src / page.name)
    stems = {py.stem for py in notebooks}  # the chapter map lists the chapters this build has (a test builds two)
    index = src / "index.md"
    index.write_text("".join(line for line in index.read_text().splitlines(keepends=True)
                             if not (m := re.search(r"\(notebooks/(\w+)\.ipynb\)", line)) or m.group(1) in stems))
    for py in notebooks:
        book.write_notebook(str(py), str(src / "notebooks" / DOWNLOADS / py.with_suffix(".ipynb").name), edition)
    static = src / "_static"
    static.mkdir()
    for name in ("vlr.css", "vlr-search.js"):  # the book's own style and search fix (conf.py loads them)
        shutil.copy(BOOK / name, static / name)
    import jupyter_server_mathjax
    import plotly

    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", static / "plotly.min.js")
    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static"
    for part in MATHJAX_PARTS:
        target = static / "mathjax" / part
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (mathjax / part).is_dir() else shutil.copy)(mathjax / part, target)


def download_cell(stem: str, edition: str):
    """The Markdown cell under a chapter's title: a button that downloads the chapter's notebook in `edition`."""
    import nbformat

    what = "the student notebook, without solutions" if edition == "student" else "the notebook, with solutions"
    return nbformat.v4.new_markdown_cell(
        f":::{{container}} vlr-download\n{{download}}`Download {stem}.ipynb <{DOWNLOADS}/{stem}.ipynb>` ({what}; "
        "run it with `make lab`, or in any Jupyter with the workbook installed)\n:::",
        metadata={"tags": ["vlr-download"]})


def write_chapter(nb, out: Path, edition: str) -> None:
    """Write executed notebook `nb` as chapter `out` of `edition`: the student's without solutions, both with the
    download button under the title."""
    import nbformat

    chapter = book.student_notebook(nb, out.stem) if edition == "student" else nb
    chapter.cells.insert(1, download_cell(out.stem, edition))
    nbformat.write(chapter, out)


def student_chapters(executed: Path, sources: list[Path], dest: Path) -> None:
    """The student edition's chapters, from the instructor build's executed notebooks in `executed`."""
    import nbformat

    missing = [py.stem for py in sources if not (executed / f"{py.stem}.ipynb").is_file()]
    if missing:
        raise NotebookFailed(f"no executed notebook for {', '.join(missing)} in {executed}: run make book first")
    for py in sources:
        nb = nbformat.read(executed / f"{py.stem}.ipynb", as_version=4)
        if py.stat().st_mtime > (executed / f"{py.stem}.ipynb").stat().st_mtime:
            print(f"  warning: {py.name} is newer than its executed notebook: run make book again", flush=True)
        write_chapter(nb, dest / f"{py.stem}.ipynb", "student")
    print(f"  {len(sources)} chapters taken from {executed}, their solutions removed", flush=True)


def run_notebooks(notebooks: list[Path], dest: Path, jobs: int, env: dict[str, str]) -> None:
    """Execute every notebook into dest, `jobs` at a time, their kernels with `env` and the chapter's mode
    (book.chapter_env) added to the environment; raise NotebookFailed listing every failure."""
    failures = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {py: pool.submit(execute, py, dest / py.with_suffix(".ipynb").name,
                                   {**env, **book.chapter_env(py.stem)}) for py in notebooks}
        for py, future in futures.items():
            try:
                seconds, solutions = future.result()
                mode = "from its records" if py.stem in book.recorded_chapters() else "fast mode"
                print(f"  executed {py.name} in {seconds:.0f} s, {mode} (its solutions {solutions:.1f} s)", flush=True)
            except NotebookFailed as exc:
                failures.append(str(exc))
                print(f"  FAILED {py.name}", flush=True)
    if failures:
        raise NotebookFailed("\n".join(failures))


def sphinx(src: Path, html: Path, edition: str = "instructor") -> None:
    """Render the book; any Sphinx warning is an error (a broken link or reference fails the build). The edition
    is a Sphinx tag, for the pages' ``{only}`` blocks."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-n", "-E", "-t", edition,
           str(src), str(html)]
    if subprocess.run(cmd).returncode:
        raise NotebookFailed("Sphinx failed (its warnings are above)")


PAGE_BUDGET = 5_000_000  # bytes of HTML per page (the shared scripts, plotly.js among them, load once)


def page_sizes(html: Path) -> list[tuple[str, int, int]]:
    """(page, its HTML bytes, the bytes of the local files it loads) for every chapter and top page."""
    sizes = []
    for page in sorted(html.glob("*.html")) + sorted(html.glob("[!_]*/*.html")):
        text = page.read_text(encoding="utf-8")
        refs = {m.split("?")[0] for m in re.findall(r'(?:src|href)="([^"#:]+\.(?:js|css))', text)}
        assets = sum((page.parent / r).stat().st_size for r in refs if (page.parent / r).is_file())
        sizes.append((str(page.relative_to(html)), len(text.encode()), assets))
    return sizes


def report_sizes(html: Path) -> None:
    """Print the pages' sizes, largest first; a page over the budget fails the build."""
    sizes = sorted(page_sizes(html), key=lambda s: -s[1])
    print("make book: page sizes (HTML + the scripts and styles it loads, shared between pages):")
    for page, n_html, n_assets in sizes[:16]:
        print(f"  {page:48s} {n_html / 1e6:6.2f} MB + {n_assets / 1e6:5.2f} MB")
    over = [page for page, n_html, _ in sizes if n_html > PAGE_BUDGET]
    if over:
        raise NotebookFailed(f"pages over the {PAGE_BUDGET / 1e6:.0f} MB budget: {', '.join(over)}")


def nbformat_read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def replace(old: Path, new: Path) -> None:
    """Put the finished book `new` at `old`, removing the previous one only once the new one is in place."""
    trash = old.with_name(f".{old.name}-old")
    shutil.rmtree(trash, ignore_errors=True)
    if old.exists():
        old.rename(trash)
    new.rename(old)
    shutil.rmtree(trash, ignore_errors=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make book", description=__doc__.split("\n")[0])
    parser.add_argument("--edition", choices=book.EDITIONS, default="instructor",
                        help="instructor (every notebook executed) or student (from the instructor build's notebooks)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the book goes (default build/book, or build/book-student)")
    parser.add_argument("--executed", type=Path, default=None,
                        help="the instructor build's executed notebooks, written by it and read by the student "
                             "edition (default: book-executed beside --out)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at once (default 2)")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks",
                        help="folder of NN_topic.py notebooks (default: notebooks/)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"argument --jobs: must be at least 1, got {args.jobs}")
    args.sources = sorted(args.notebooks.resolve().glob("[0-9][0-9]_*.py"))
    if not args.sources:
        parser.error(f"argument --notebooks: no NN_topic.py notebooks in {args.notebooks}")
    args.out = (args.out or ROOT / "build" / ("book" if args.edition == "instructor" else "book-student")).resolve()
    args.executed = (args.executed or args.out.parent / "book-executed").resolve()
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"argument --out: cannot create {args.out.parent}: {exc.strerror}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.out.parent, prefix=f".{args.out.name}-build-") as work:
        work = Path(work)
        src, html = work / "src", work / "html"
        assemble(src, args.sources, args.edition)
        executed = work / "executed"
        executed.mkdir()
        try:
            if args.edition == "student":
                print(f"make book-student: the student edition of the {len(args.sources)} chapters", flush=True)
                student_chapters(args.executed, args.sources, src / "notebooks")
            else:
                env = {"VLR_BOOK": "1", "VLR_RUNS": str(work / "runs")}  # fresh runs; modes: book.chapter_env
                recorded = sum(py.stem in book.recorded_chapters() for py in args.sources)
                print(f"make book: executing {len(args.sources)} notebooks ({recorded} from their records, the "
                      f"others in fast mode), {args.jobs} at a time", flush=True)
                run_notebooks(args.sources, executed, args.jobs, env)
                for nb in sorted(executed.glob("*.ipynb")):
                    write_chapter(nbformat_read(nb), src / "notebooks" / nb.name, "instructor")
            print("make book: rendering", flush=True)
            sphinx(src, html, args.edition)
            report_sizes(html)
        except NotebookFailed as exc:
            print(f"make book: failed, {args.out} left as it was\n{exc}", file=sys.stderr)
            return 1
        replace(args.out, html)
        if args.edition == "instructor":
            replace(args.executed, executed)  # what make book-student derives the student edition from
    print(f"make book: {args.out / 'index.html'} built in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
