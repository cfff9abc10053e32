"""``python -m vlr_lib record`` (``make record``, ``data_scripts/record_runs.py``): regenerate the recorded runs.

    python -m vlr_lib record                      # every record, full size (CPU: about two hours on 2 cores)
    python -m vlr_lib record --only 10-features,11

The records are the full-size shapes results that notebooks 03 and 09-13 open in full mode
(vlr_lib.experiments.record; they ship in vlr_lib/recorded/). Each step makes one recorded experiment of
``vlr_lib.experiments.protocol`` (its ``STEPS``: 10-features and 10-vsepp the showdown, 09 and 11 their notebooks
executed in full mode with VLR_RERUN=1, 11-tuned the tuned comparison, 12 the lessons, 13 the pre-registered
replication, 03-batch and 03-difficulty notebook 03's batch-size and difficulty experiments) with VLR_RECORD
pointing at --to (default: vlr_lib/recorded of this checkout), which makes the experiment write its record there,
each into a new folder that then replaces the old one (an interrupted step leaves the previous record).

Training goes through the runs folder ($VLR_RUNS, else ~/.cache/vlr-workbook/runs): finished
cells of the grids are reused, so an interrupted ``make record`` continues where it stopped.
Prints each step's time and the total.
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

    protocol.make(args.only or protocol.STEPS, args.to)
    return 0
