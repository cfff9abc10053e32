"""``vlr-train`` / ``python -m vlr_lib train``: one run, one loss; prints the per-epoch history."""
from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from . import args as A
from . import common

HISTORY_COLUMNS = ("epoch", "loss", "rsum", "i2t_r1", "t2i_r1", "pos_sim", "hardneg_sim", "seconds")


def parser(prog: str = "vlr-train") -> A.Parser:
    p = A.Parser(prog=prog, description="Train one retrieval model with one loss.\n\n" + common.__doc__)
    p.add_argument("--loss", default="unified", help="a vlr_lib.losses name or goal:<triplet>,<pair> (default unified)")
    common.add_data_options(p)
    common.add_schedule_options(p)
    common.add_loss_options(p)
    p.add_argument("--seed", type=A.seed, default=0, help="heads' initialisation and batch order")
    p.add_argument("--checkpoint-dir", type=A.output_dir, default=None, help="save every epoch; resume from it")
    p.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint and start over")
    p.add_argument("--history", type=A.suffix(".csv", ".json"), default=None,
                   help="write the history here (.csv or .json)")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "vlr-train") -> int:
    p = parser(prog)
    return A.run(p, argv, _train, _interrupted)


def _interrupted(args: argparse.Namespace) -> str:
    if args.checkpoint_dir is None:
        return "nothing was saved (give --checkpoint-dir to make a run resumable)"
    return f"the last finished epoch is saved in {args.checkpoint_dir}; run the same command again to resume"


def _train(args: argparse.Namespace) -> int:
    from ..metrics import chance_rsum
    from ..train import TrainSettings, fit_end_to_end, trainer
    from ..train import distributed as D

    setting = common.resolve_setting(args)
    fields, model = common.schedule(args, setting)
    settings = TrainSettings(**fields, seed=args.seed, checkpoint_dir=args.checkpoint_dir, resume=not args.no_resume)
    objective = common.objective(args.loss, common.given_loss_params(args), settings)  # the one build and check
    with D.process_group(args.device, args.dist_timeout) as device:
        settings = settings.replace(device=device)
        data = common.load_data(args, setting, device)
        if "dataset" in data:
            result = fit_end_to_end(data["dataset"], objective, settings=settings, **model)
            chance = result.extras["chance_rsum"]
        else:
            result = trainer(setting)(*data["train"], objective, val=data["val"], settings=settings, **model)
            chance = chance_rsum(data["val"][2])
        if D.rank_and_world()[0] == 0:
            frame = result.frame()
            print(frame[[c for c in HISTORY_COLUMNS if c in frame]].to_string(index=False,
                                                                              float_format=lambda v: f"{v:.3f}"))
            print(f"chance rsum on the validation split: {chance:.2f}; setting: {setting}")
            if args.history is not None:
                write_history(result, args.history)
    return 0


def write_history(result, path: Path) -> None:
    """The history as JSON (the records, nested COCOS kept) or CSV (``FitResult.frame``), atomically."""
    from .._io import atomic_write_text

    text = json.dumps(result.history, indent=1) if path.suffix == ".json" else result.frame().to_csv(index=False)
    atomic_write_text(path, text)
