"""``python -m vlr_lib record`` (``make record``, ``data_scripts/record_runs.py``): regenerate the recorded runs.

    python -m vlr_lib record                      # every record, full size (CPU: about an hour on 2 cores)
    python -m vlr_lib record --only 10-features,11

The records are the full-size shapes results that notebooks 09-12 open in full mode
(vlr_lib.experiments.record; they ship in vlr_lib/recorded/). Each step re-runs one experiment
with VLR_RECORD pointing at --to (default: vlr_lib/recorded of this checkout), which makes
the experiment write its record there, each into a new folder that then replaces the old
one (an interrupted step leaves the previous record):

  10-features  the showdown, heads on frozen features   (python -m vlr_lib showdown)
  10-vsepp     the showdown in the VSE++ setting        (python -m vlr_lib showdown --setting vsepp)
  09           notebook 09's runs (executed in full mode with VLR_RERUN=1)
  11           notebook 11's sweeps (executed in full mode with VLR_RERUN=1)
  11-tuned     notebook 11's tuned comparison           (python -m vlr_lib tuned)
  12           notebook 12's experiments                (python -m vlr_lib lessons)

Training goes through the runs folder ($VLR_RUNS, else ~/.cache/vlr-workbook/runs): finished
cells of the grids are reused, so an interrupted ``make record`` continues where it stopped.
Prints each step's time and the total.
"""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import args as A

STEPS = ("10-features", "10-vsepp", "09", "11", "11-tuned", "12")


def parser(prog: str = "python -m vlr_lib record") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--only", type=_steps, default=STEPS, help=f"comma-separated steps (default all: {','.join(STEPS)})")
    p.add_argument("--to", type=A.output_dir, default=None, help="records folder (default vlr_lib/recorded)")
    return p


def _steps(text: str) -> tuple[str, ...]:
    chosen = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in chosen if s not in STEPS]
    if bad or not chosen:
        raise argparse.ArgumentTypeError(f"steps must be among {', '.join(STEPS)}, got {text!r}")
    return chosen


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib record") -> int:
    return A.run(parser(prog), argv, _record, lambda args: "finished cells and records are kept; run it again to "
                                                          "continue")


def _showdown(setting: str) -> Callable[[], None]:
    def step() -> None:
        from ..experiments import showdown

        spec = showdown.spec_for("shapes", False, setting)
        showdown.run(spec, command=f"python -m vlr_lib showdown --setting {setting}", progress=True)
    return step


def _tuned() -> None:
    from ..experiments import tuned

    tuned.run(tuned.spec_for(), command="python -m vlr_lib tuned", progress=True)


def _lessons() -> None:
    from ..experiments import lessons

    lessons.run(lessons.LessonsSpec(), command="python -m vlr_lib lessons", progress=True)


def _notebook(stem: str) -> Callable[[], None]:
    def step() -> None:
        import jupytext
        from nbclient import NotebookClient

        from ..paths import repo_root

        source = next((repo_root() / "notebooks").glob(f"{stem}_*.py"))
        nb = jupytext.read(source)
        NotebookClient(nb, timeout=None, kernel_name="python3",
                       resources={"metadata": {"path": str(source.parent)}}).execute()
    return step


def _record(args: argparse.Namespace) -> int:
    from ..experiments import record

    os.environ.update({record.RECORD_ENV: str(Path(args.to or record.RECORDED).resolve()), "VLR_FAST": "0",
                       "VLR_RERUN": "1", "VLR_DATA": "shapes"})
    steps = {"10-features": _showdown("features"), "10-vsepp": _showdown("vsepp"), "09": _notebook("09"),
             "11": _notebook("11"), "11-tuned": _tuned, "12": _lessons}
    start = time.perf_counter()
    for i, name in enumerate(args.only, 1):
        print(f"[{i}/{len(args.only)}] {name} ...", flush=True)
        t0 = time.perf_counter()
        steps[name]()
        print(f"[{i}/{len(args.only)}] {name} done in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    print(f"{len(args.only)} record(s) written to {record.destination()} in "
          f"{(time.perf_counter() - start) / 60:.1f} min")
    return 0
