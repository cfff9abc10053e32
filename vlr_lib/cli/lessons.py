"""``python -m vlr_lib lessons``: notebook 12's controlled experiments -- when do the papers' lessons hold?

    python -m vlr_lib lessons                 # full size (CPU, about half an hour alone on 2 cores)
    python -m vlr_lib lessons --fast          # the CI size of VLR_FAST=1 (under a minute)
    python -m vlr_lib lessons --markdown lessons.md

Four experiments, each changing one condition of the shapes showdown and training Triplet,
Triplet-SH, Unified and NT-Xent with seeds 0, 1, 2 (vlr_lib.experiments.lessons): (a) random vs
pretrained image features, (b) the data's difficulty (false negatives), (c) Triplet (all) for
the first epoch(s) before Triplet-SH, (d) heads on features vs the VSE++ setting vs end to end.
Cells are cached under <runs>/lessons-shapes-<fast|full>/ ($VLR_RUNS, else
~/.cache/vlr-workbook/runs); a stored table with the same settings is reused, an interrupted
run resumes cell by cell. Prints the docs/results.md block (vlr_lib.report.lessons.lessons_markdown); under
torchrun rank 0 alone prints. --fast defaults to VLR_FAST.
"""
from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

from .. import env
from . import args as A
from . import common


def parser(prog: str = "python -m vlr_lib lessons") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--fast", action="store_true", default=None, help="the CI size (default: VLR_FAST)")
    p.add_argument("--seeds", type=A.seeds, default=None, help="comma-separated distinct seeds (default 0,1,2)")
    p.add_argument("--device", type=A.device, default=None, help="cpu, cuda, cuda:N or mps (default: cuda if available)")
    p.add_argument("--dist-timeout", type=common.dist_timeout, default=600.0,
                   help="under torchrun: seconds a rank waits for the others before failing (default 600)")
    common.add_run_outputs(p, "lessons-shapes-<size>")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib lessons") -> int:
    p = parser(prog)
    return A.run(p, argv, _lessons, _interrupted)


def _interrupted(args: argparse.Namespace) -> str:
    return "finished cells are kept; run the same command again to continue where it stopped"


def canonical_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (VLR_FAST written out as --fast)."""
    parts = ["python", "-m", "vlr_lib", "lessons", *(["--fast"] if args.fast else [])]
    for name in ("seeds", "device", "out"):
        value = getattr(args, name)
        if value is not None:
            parts += [f"--{name}", ",".join(map(str, value)) if name == "seeds" else str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def _lessons(args: argparse.Namespace) -> int:
    from ..report.lessons import lessons_markdown
    from ..experiments import lessons
    from ..train import distributed as D

    if args.fast is None:
        args.fast = A.env(env.flag, "VLR_FAST")
    common.check_record_env()
    with D.process_group(args.device, args.dist_timeout) as device:
        spec = lessons.LessonsSpec(fast=args.fast, device=str(device),
                                   **({"seeds": tuple(args.seeds)} if args.seeds is not None else {}))
        done = lessons.run(spec, out=args.out, force=args.force, progress=args.progress,
                           command=canonical_command(args))
        if D.rank_and_world()[0] != 0:  # every rank trains; rank 0 alone writes and prints
            return 0
        common.print_table(lessons_markdown(done.runs, done.meta, lessons.EXPERIMENTS), done,
                           "--force to rebuild it from the cached cells", args.markdown)
    return 0
