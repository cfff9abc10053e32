"""The loss showdown of notebook 10 from the command line: every loss, the same features, seeds and schedule.

    python data_scripts/run_showdown.py                  # shapes, full size (CPU, minutes)
    python data_scripts/run_showdown.py --fast           # shapes, the CI size of VLR_FAST=1 (seconds)
    python data_scripts/run_showdown.py --data flickr30k --device cuda   # cached CLIP ViT-B/32 features
    python data_scripts/run_showdown.py --markdown runs/showdown-shapes-full/results.md

22 configurations (every loss of vlr_lib.losses.LOSSES at its defaults and the
15 GOAL combinations) x seeds 0, 1, 2, heads trained on one set of frozen
features; each run is reported on the test split at its epoch of best
validation rsum, with COCOS on a fixed probe batch. Results go to
runs/showdown-<data>-<fast|full>/ (runs.csv, showdown.json, cells/); a stored
table with the same settings is reused, an interrupted run resumes cell by cell.
flickr30k needs the features of data_scripts/extract_features.py (this script
never downloads or encodes).

The experiment itself is vlr_lib.train.showdown (spec_for, run, markdown_block),
which notebook 10 imports; this script only parses the command line.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib.train import showdown as sd


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", choices=sd.DATA_MODES, default=os.environ.get("VLR_DATA", "shapes"))
    p.add_argument("--fast", action="store_true", default=os.environ.get("VLR_FAST", "0") in ("1", "true", "yes"),
                   help="the CI size (also VLR_FAST=1)")
    p.add_argument("--seeds", default=None, help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--epochs", type=int, default=None, help="override the mode's epochs")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    p.add_argument("--cache-root", type=Path, default=None, help="flickr30k: feature caches (default cache/features)")
    p.add_argument("--out", type=Path, default=None, help="results folder (default runs/showdown-<data>-<size>)")
    p.add_argument("--markdown", type=Path, default=None, help="also write the docs/results.md block here")
    p.add_argument("--force", action="store_true", help="ignore a stored table (cached cells are still reused)")
    p.add_argument("--progress", action="store_true", help="progress bar over cells")
    return p.parse_args(argv)


def canonical_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (environment switches written out as flags)."""
    parts = ["python", "data_scripts/run_showdown.py", "--data", args.data]
    parts += ["--fast"] if args.fast else []
    for flag in ("seeds", "epochs", "device", "cache_root", "out"):
        value = getattr(args, flag)
        if value is not None:
            parts += [f"--{flag.replace('_', '-')}", str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    overrides: dict = {}
    if args.seeds:
        overrides["seeds"] = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    if args.epochs:
        overrides["epochs"] = args.epochs
    spec = sd.spec_for(args.data, args.fast, device=args.device,
                       cache_root=None if args.cache_root is None else str(args.cache_root), **overrides)
    try:
        showdown = sd.run(spec, command=canonical_command(args), out=args.out, force=args.force,
                          progress=args.progress)
    except FileNotFoundError as err:
        print(f"run_showdown: error: {err}", file=sys.stderr)
        return 2
    block = sd.markdown_block(showdown)
    print(block)
    if showdown.reused:
        print(f"(stored table reused from {showdown.out}; --force to retrain missing cells and rewrite it)")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
