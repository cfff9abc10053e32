"""Command-line entry points: ``vlr-train`` (one run) and ``vlr-grid`` (losses x settings x seeds).

Data modes (``--data``):

- ``shapes`` (default): the synthetic dataset is generated in memory
  (``vlr_lib.data.shapes.make_shapes``; sizes ``--n-train`` / ``--n-val``,
  ``--difficulty``). ``--mode e2e`` (default) trains a tiny CNN and a GRU text
  encoder from scratch with the chosen loss -- a few seconds per epoch on a
  laptop CPU, and the losses then shape the encoders themselves. ``--mode
  features`` instead trains heads on frozen features of a *randomly
  initialised* TinyCNN and hashed bags of words (``train.shapes_features``),
  the cheapest setting for wide grids.
- ``flickr30k``: cached frozen-backbone features (``vlr_lib.features.
  load_or_build_features``, built on first use; ``--backbone``, ``--cache-root``,
  ``--data-path`` for a local copy), heads trained on them (GPU when present).
  The caches are those ``data_scripts/extract_features.py`` writes for the same
  data (id and revision from ``vlr_lib.features.flickr_cache_id``).

Loss parameters (``--margin``, ``--gamma``, ...) are passed only when given, so
every loss keeps its paper default otherwise; one that the loss does not take
is an error.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

LOSS_PARAMS = {
    "margin": float,
    "gamma": float,
    "temperature": float,
    "scale": float,
    "topk": float,
    "tau": float,
    "alpha": float,
    "beta": float,
    "lam": float,
    "eps": float,
    "reduction": str,
}
HISTORY_COLUMNS = ("epoch", "loss", "rsum", "i2t_r1", "t2i_r1", "pos_sim", "hardneg_sim", "seconds")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", choices=("shapes", "flickr30k"), default="shapes")
    p.add_argument("--mode", choices=("e2e", "features"), default="e2e",
                   help="shapes only: train encoders end to end (default) or heads on random-encoder features")
    p.add_argument("--epochs", type=int, default=None, help="default 20 (shapes e2e) / 10 (features)")
    p.add_argument("--batch-size", type=int, default=None, help="default 32 (shapes e2e) / 128 (features)")
    p.add_argument("--lr", type=float, default=None, help="default 2e-3 (shapes e2e) / 2e-4 (features)")
    p.add_argument("--lr-decay-epoch", type=int, default=None, help="lr x 0.1 from this epoch (default: halfway)")
    p.add_argument("--dim", type=int, default=None, help="joint space size (default 64 e2e / 512 features)")
    p.add_argument("--head", choices=("linear", "mlp"), default="linear", help="features modes")
    p.add_argument("--text-encoder", choices=("gru", "bag"), default="gru", help="shapes e2e")
    p.add_argument("--sampling", choices=("captions", "images"), default=None,
                   help="an epoch = every caption (VSE++, features default) or one caption per image (e2e default)")
    p.add_argument("--n-train", type=int, default=1000, help="shapes: training images (default 1000)")
    p.add_argument("--n-val", type=int, default=200, help="shapes: validation images (default 200)")
    p.add_argument("--difficulty", type=float, default=0.5, help="shapes: how alike the negatives are (0..1)")
    p.add_argument("--data-seed", type=int, default=0, help="shapes: seed of the generated data")
    p.add_argument("--data-path", type=Path, default=None, help="flickr30k: local copy (default: the Hub)")
    p.add_argument("--backbone", default="clip-vit-b32", help="flickr30k: feature backbone")
    p.add_argument("--cache-root", type=Path, default=Path("cache/features"), help="flickr30k: feature caches")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _loss_params(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("loss parameters (passed only when given)")
    for name, kind in LOSS_PARAMS.items():
        g.add_argument(f"--{name}", type=kind, default=None)


def train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vlr-train", description="Train one retrieval model with one loss.\n\n" + __doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--loss", default="unified", help="a vlr_lib.losses name or goal:<triplet>,<pair> (default unified)")
    _common(p)
    _loss_params(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", type=Path, default=None, help="save every epoch; resume from it")
    p.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint")
    p.add_argument("--history", type=Path, default=None, help="write the history here (.csv or .json)")
    return p


def grid_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vlr-grid", description="Train losses x parameters x seeds; print mean +- std.\n\n" + __doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--losses", default="triplet_hardest,info_nce,unified",
                   help="comma-separated loss names; 'goal' adds the 15 GOAL combinations")
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                   help="a loss parameter grid, repeatable; applied to the losses that take it")
    p.add_argument("--out", type=Path, default=None, help="results folder (default runs/grid-<data>-<mode>)")
    _common(p)
    return p


# --------------------------------------------------------------------------- data


def _shapes(args):
    from .data.shapes import make_shapes

    return make_shapes(n_train=args.n_train, n_val=args.n_val, n_test=1, difficulty=args.difficulty,
                       seed=args.data_seed)


def _flickr_features(args) -> dict:
    try:
        from .data.flickr30k import load_flickr30k
        from .features import default_cache_dir, flickr_cache_id, load_or_build_features
    except ImportError as err:  # pragma: no cover - depends on the optional data modules
        raise SystemExit(f"--data flickr30k needs vlr_lib.features and vlr_lib.data.flickr30k: {err}") from err
    # The cache data_scripts/extract_features.py writes for the same data (one id convention).
    dataset_id, revision = flickr_cache_id(args.data_path)
    if args.data_path is None:
        dd = load_flickr30k(repo_id=dataset_id, revision=revision)
    else:
        dd = load_flickr30k(args.data_path)
    out = {}
    for split in ("train", "validation"):
        cache = default_cache_dir(args.cache_root, dataset_id, revision, split, args.backbone)
        fs = load_or_build_features(dd[split], cache, dataset_id=dataset_id, revision=revision, split=split,
                                    backbone=args.backbone, device=args.device or "cpu",
                                    progress=not args.no_progress)
        out[split] = (fs.img, fs.txt, fs.caption_to_image)
    return out


def _data(args) -> tuple[str, dict]:
    """("e2e", {"dataset": dd}) or ("features", {"train": triple, "val": triple})."""
    if args.data == "shapes":
        dd = _shapes(args)
        if args.mode == "e2e":
            return "e2e", {"dataset": dd}
        from .train import shapes_features

        feats = shapes_features(dd, seed=args.data_seed)
        return "features", {"train": feats["train"], "val": feats["validation"]}
    feats = _flickr_features(args)
    return "features", {"train": feats["train"], "val": feats["validation"]}


def _settings(args, mode: str) -> dict:
    """Training arguments common to both commands, with the mode's defaults."""
    e2e = mode == "e2e"
    s = {
        "epochs": args.epochs or (20 if e2e else 10),
        "batch_size": args.batch_size or (32 if e2e else 128),
        "lr": args.lr or (2e-3 if e2e else 2e-4),
        "lr_decay_epoch": args.lr_decay_epoch,
        "dim": args.dim or (64 if e2e else 512),
        "sampling": args.sampling or ("images" if e2e else "captions"),
        "device": args.device,
    }
    if e2e:
        s["text_encoder"] = args.text_encoder
    else:
        s["head"] = args.head
    return s


def _given_loss_params(args) -> dict:
    out = {}
    for name in LOSS_PARAMS:
        value = getattr(args, name)
        if value is not None:
            out[name] = int(value) if name == "topk" and float(value).is_integer() and value >= 1 else value
    return out


def _print_history(result, chance: float | None) -> None:
    frame = result.frame()
    cols = [c for c in HISTORY_COLUMNS if c in frame]
    print(frame[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if chance is not None:
        print(f"chance rsum on the validation split: {chance:.2f}")


# --------------------------------------------------------------------------- entry points


def train_main(argv: Sequence[str] | None = None) -> int:
    """``vlr-train``: one run; prints the per-epoch history."""
    from .train import chance_rsum, fit, fit_end_to_end

    args = train_parser().parse_args(argv)
    mode, data = _data(args)
    settings = _settings(args, mode)
    common = {
        "loss": args.loss, "loss_kwargs": _given_loss_params(args), "seed": args.seed,
        "checkpoint_dir": args.checkpoint_dir, "resume": not args.no_resume, "progress": not args.no_progress,
        **settings,
    }
    try:
        if mode == "e2e":
            result = fit_end_to_end(data["dataset"], **common)
            chance = result.extras["chance_rsum"]
        else:
            result = fit(*data["train"], val=data["val"], **common)
            chance = chance_rsum(data["val"][2])
    except ValueError as err:
        print(f"vlr-train: error: {err}", file=sys.stderr)
        return 2
    _print_history(result, chance)
    if args.history is not None:
        _write_history(result, args.history)
    return 0


def _write_history(result, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(result.history, indent=1))
    else:
        result.frame().to_csv(path, index=False)


def _param_grid(items: Sequence[str]) -> dict:
    grid = {}
    for item in items:
        name, eq, values = item.partition("=")
        if not eq or name not in LOSS_PARAMS:
            raise SystemExit(f"vlr-grid: error: --param must be NAME=V1,V2 with NAME in {sorted(LOSS_PARAMS)}")
        grid[name] = [LOSS_PARAMS[name](v) for v in values.split(",")]
    return grid


def _losses(spec: str) -> list:
    from .train import goal_grid

    out: list = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        out.extend(goal_grid() if name == "goal" else [name])
    return out


def grid_main(argv: Sequence[str] | None = None) -> int:
    """``vlr-grid``: every loss x parameter x seed (cached per cell), then a mean +- std table."""
    from .train import chance_rsum, grid

    args = grid_parser().parse_args(argv)
    mode, data = _data(args)
    out = args.out or Path("runs") / f"grid-{args.data}-{args.mode if args.data == 'shapes' else 'features'}"
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    try:
        result = grid(_losses(args.losses), _param_grid(args.param), seeds, out=out,
                      progress=not args.no_progress, **data, **_settings(args, mode))
    except ValueError as err:
        print(f"vlr-grid: error: {err}", file=sys.stderr)
        return 2
    print(result.table())
    if "val" in data:
        val_c2i = data["val"][2]
    else:  # caption counts are enough; no need to decode the images
        counts = [len(c) for c in data["dataset"]["validation"]["caption"]]
        val_c2i = [i for i, n in enumerate(counts) for _ in range(n)]
    print(f"chance rsum on the validation split: {chance_rsum(val_c2i):.2f}")
    print(f"results: {out}/runs.csv, {out}/summary.csv")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(train_main())
