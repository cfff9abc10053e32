"""``python -m vlr_lib record`` (``make record``, ``data_scripts/record_runs.py``): regenerate the recorded runs.

    python -m vlr_lib record --jobs 2             # every record, full size, two processes at once
    python -m vlr_lib record --only 10-features,11

The records are the full-size shapes results that notebooks 03 and 09-13 open in full mode
(vlr_lib.experiments.record; they ship in vlr_lib/recorded/). Each step makes one recorded experiment of
``vlr_lib.experiments.protocol`` (its ``STEPS``: 10-features and 10-vsepp the showdown, 09 and 11 their notebooks
executed in full mode with VLR_RERUN=1, 11-tuned the tuned comparison, 12 the lessons, 13 the pre-registered
replication, 13-optimizer its pre-registered optimizer experiment, 03-batch and 03-difficulty notebook 03's
batch-size and difficulty experiments) with VLR_RECORD pointing at --to (default: vlr_lib/recorded of this
checkout), which makes the experiment write its record there, each into a new folder that then replaces the old
one (an interrupted step leaves the previous record).

Training goes through the runs folder ($VLR_RUNS, else ~/.cache/vlr-workbook/runs): finished
cells of the grids are reused, so an interrupted ``make record`` continues where it stopped.
Prints each step's time and the total.

``--jobs N`` (``make record`` passes the machine's core count) runs N steps at once, each a process on one thread
(``vlr_lib.experiments.record_jobs``: longest first, by what each shipped record's training took; the replication's
two settings train as two processes). Each step's output then goes to ``<runs>/record-logs/<step>.log``.
``--part`` is how those processes are called: one part of one step, its cells trained, no record written.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import args as A


def parser(prog: str = "python -m vlr_lib record") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--only", type=_steps, default=None,
                   help="comma-separated steps of vlr_lib.experiments.protocol.STEPS (default: all)")
    p.add_argument("--to", type=A.output_dir, default=None, help="records folder (default vlr_lib/recorded)")
    p.add_argument("--jobs", type=A.positive_int, default=1,
                   help="steps run at once, each a process on one thread (default 1: one after another)")
    p.add_argument("--part", default=None, help="train one part of the one step of --only (what --jobs runs)")
    return p


def _steps(text: str) -> tuple[str, ...]:
    from ..experiments.protocol import STEPS

    chosen = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in chosen if s not in STEPS]
    if bad or not chosen:
        raise argparse.ArgumentTypeError(f"steps must be among {', '.join(STEPS)}, got {text!r}")
    return chosen


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib record") -> int:
    return A.run(parser(prog), argv, _record, lambda args: "finished cells and records are kept; run it again to "
                                                          "continue")


def _record(args: argparse.Namespace) -> int:
    from ..experiments import protocol

    if args.part is not None:
        _check_part(args)
        protocol.make_part(args.only[0], args.part, args.to)
        return 0
    protocol.make(args.only or protocol.STEPS, args.to, jobs=args.jobs)
    return 0


def _check_part(args: argparse.Namespace) -> None:
    """--part names a part of the one step of --only, checked before any training."""
    from ..experiments import protocol

    if args.only is None or len(args.only) != 1:
        raise A.UsageError("--part", "needs exactly one step in --only")
    parts = protocol.by_step(args.only[0]).parts()
    if args.part not in parts:
        raise A.UsageError("--part", f"must be one of step {args.only[0]}'s parts {', '.join(parts) or '(none)'}, "
                                     f"got {args.part!r}")
