"""``vlr-grid`` / ``python -m vlr_lib grid``: losses x parameters x seeds, cached per cell; prints mean ± std."""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import args as A
from . import common


def parser(prog: str = "vlr-grid") -> A.Parser:
    p = A.Parser(prog=prog, description="Train losses x parameters x seeds; print mean ± std.\n\n" + common.__doc__)
    p.add_argument("--losses", default="triplet_hardest,info_nce,unified",
                   help="comma-separated loss names; 'goal' adds the 15 GOAL combinations")
    p.add_argument("--seeds", type=A.seeds, default=[0], help="comma-separated distinct seeds (default 0)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                   help="a loss parameter grid, repeatable; applied to the losses that take it "
                        "(topk=50 is a count, topk=0.5 a fraction)")
    p.add_argument("--out", type=A.run_dir, default=None,
                   help="results folder (default <runs>/grid-<data>-<setting>, <runs> = $VLR_RUNS or ~/.cache/vlr-workbook/runs); its tables hold "
                        "every cell ever trained there")
    common.add_data_options(p)
    common.add_schedule_options(p)
    return p


def main(argv: Sequence[str] | None = None, prog: str = "vlr-grid") -> int:
    p = parser(prog)
    return A.run(p, argv, _grid, _interrupted)


def _interrupted(args: argparse.Namespace) -> str:
    return ("finished cells are kept under <out>/cells and the current one resumes from its last epoch; "
            "run the same command again to continue")


def losses(spec: str) -> list[str]:
    """Comma-separated loss names ("goal:cir,sig-ms" is one), 'goal' expanded to the 15 GOAL combinations."""
    from ..experiments import goal_grid
    from ..registry import split_names

    names = split_names(spec)
    if not names:
        raise A.UsageError("--losses", "no loss selected; e.g. --losses info_nce,unified (or goal)")
    out: list = []
    for name in names:
        if name == "goal":
            out.extend(c["loss"] for c in goal_grid())
        else:
            out.append(name)
    return out


def param_grid(items: Sequence[str]) -> dict:
    """{name: [values]} from repeated NAME=V1,V2 (values parsed like the flags of vlr-train)."""
    grid: dict = {}
    for item in items:
        name, eq, values = item.partition("=")
        name = name.strip()
        parsers = common.loss_params()
        if not eq or name not in parsers:
            raise A.UsageError("--param", f"must be NAME=V1,V2 with NAME one of {', '.join(parsers)}, "
                                          f"got {item!r}")
        if name in grid:
            raise A.UsageError("--param", f"{name} is given twice; list all its values once: {name}=V1,V2")
        texts = [v.strip() for v in values.split(",") if v.strip()]
        if not texts:
            raise A.UsageError("--param", f"{name} has no values")
        try:
            grid[name] = [parsers[name](v) for v in texts]
        except argparse.ArgumentTypeError as err:
            raise A.UsageError("--param", f"{name}: {err}") from None
    return grid


def _grid(args: argparse.Namespace) -> int:
    from ..paths import runs_dir
    from ..metrics import chance_rsum
    from ..train import TrainSettings
    from ..experiments import expand_configs, grid
    from ..train import distributed as D
    from ..experiments.grid_search import FIT_KEYS, cell_settings

    setting = common.resolve_setting(args)
    fields, model = common.schedule(args, setting)
    settings = TrainSettings(**fields)
    names, params = losses(args.losses), param_grid(args.param)
    try:
        configs = expand_configs(names, params)
    except ValueError as err:
        raise A.UsageError("--param" if str(err).startswith("param_grid") else "--losses", str(err)) from None
    objectives = [common.objective(config["loss"], {k: v for k, v in config.items() if k != "loss" and k not in FIT_KEYS},
                                   cell_settings(config, settings), flag="--losses", param_flag="--param")
                  for config in configs]  # built and checked once, here, where the flags are known
    out = args.out or A.default_checked(A.run_dir, str(runs_dir() / f"grid-{args.data}-{setting}"), "--out")
    with D.process_group(args.device, args.dist_timeout) as device:
        data = common.load_data(args, setting, device)
        result = grid(configs, seeds=args.seeds, out=out, progress=not args.no_progress, setting=setting,
                      settings=settings.replace(device=device), objectives=objectives, **data, **model)
        if D.rank_and_world()[0] == 0:
            print(result.table())
            if "val" in data:
                val_c2i = data["val"][2]
            else:  # caption counts are enough; no need to decode the images
                counts = [len(c) for c in data["dataset"]["validation"]["caption"]]
                val_c2i = [i for i, n in enumerate(counts) for _ in range(n)]
            print(f"chance rsum on the validation split: {chance_rsum(val_c2i):.2f}")
            print(f"results: {out}/runs.csv, {out}/summary.csv (every cell under {out}/cells)")
    return 0
