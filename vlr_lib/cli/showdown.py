"""``python -m vlr_lib showdown`` (also ``data_scripts/run_showdown.py``): the loss showdown of notebook 10.

    python -m vlr_lib showdown                  # shapes, heads on frozen features, full size (CPU, minutes)
    python -m vlr_lib showdown --setting vsepp  # the VSE++ setting: + a GRU text encoder from scratch
    python -m vlr_lib showdown --fast           # shapes, the CI size of VLR_FAST=1 (seconds)
    python -m vlr_lib showdown --data flickr30k --device cuda   # cached CLIP ViT-B/32 features
    python -m vlr_lib showdown --markdown results.md

24 configurations (the losses of vlr_lib.experiments.showdown.CONTESTANTS at their defaults and the
15 GOAL combinations) x seeds 0, 1, 2 in one setting: heads on one set of frozen
features (features, the default), a head on the frozen image features and a GRU
text encoder from scratch (vsepp), or a CNN and a GRU from scratch (e2e, shapes
only); each run is reported on the test split at its epoch of best validation
rsum, with COCOS on a fixed probe batch. Results go to
<runs>/showdown-<data>-<setting>-<fast|full>/ ($VLR_RUNS, else ~/.cache/vlr-workbook/runs)
(showdown.json, runs.csv, cells/); a stored showdown with the same settings is
reused, an interrupted run resumes cell by cell. flickr30k needs the features of
data_scripts/extract_features.py (this command never downloads or encodes); its
vsepp setting also reads the captions of the data they were extracted from.
--data and --fast default to VLR_DATA and VLR_FAST.

The experiment itself is vlr_lib.experiments.showdown (run; its spec is vlr_lib.experiments.cells.spec_for), which
notebook 10 imports; the Markdown is vlr_lib.report.markdown.markdown_block.
"""
from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

from .. import env
from . import args as A
from . import common


def parser(prog: str = "python -m vlr_lib showdown") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--data", choices=("shapes", "flickr30k"), default=None, help="default: VLR_DATA, else shapes")
    p.add_argument("--fast", action="store_true", default=None, help="the CI size (default: VLR_FAST)")
    p.add_argument("--setting", choices=("features", "vsepp", "e2e"), default="features",
                   help="what learns: heads on frozen features (default), the VSE++ setting, or end to end (shapes)")
    p.add_argument("--image-encoder", choices=("pretrained", "random"), default=None,
                   help="shapes, features / vsepp: the frozen image encoder (default pretrained)")
    p.add_argument("--seeds", type=A.seeds, default=None, help="comma-separated distinct seeds (default 0,1,2)")
    p.add_argument("--epochs", type=A.epochs, default=None,
                   help=f"override the mode's epochs (at most {A.EPOCHS_MAX:,})")
    p.add_argument("--device", type=A.device, default=None, help="cpu, cuda, cuda:N or mps (default: cuda if available)")
    p.add_argument("--dist-timeout", type=common.dist_timeout, default=600.0,
                   help="under torchrun: seconds a rank waits for the others before failing (default 600)")
    p.add_argument("--cache-root", type=A.existing_path, default=None,
                   help="flickr30k: feature caches (default $VLR_CACHE/features, else ~/.cache/vlr-workbook/features)")
    common.add_feature_choice_options(p, hub=False)
    p.add_argument("--data-path", type=A.existing_path, default=None,
                   help="flickr30k vsepp: the local copy the cached features were extracted from (its captions)")
    common.add_run_outputs(p, "showdown-<data>-<setting>-<size>")
    return p


def resolve_env(args: argparse.Namespace) -> argparse.Namespace:
    """--data and --fast from VLR_DATA / VLR_FAST when not given (checked like the flags)."""
    if args.data is None:
        args.data = A.env(env.choice, "VLR_DATA", ("shapes", "flickr30k"), "shapes")
    if args.fast is None:
        args.fast = A.env(env.flag, "VLR_FAST")
    return args


def canonical_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (environment switches written out as flags)."""
    parts = ["python", "-m", "vlr_lib", "showdown", "--data", args.data, "--setting", args.setting]
    parts += ["--fast"] if args.fast else []
    for name in ("image_encoder", "seeds", "epochs", "device", "cache_root", "data_path", "revision", "weights",
                 "dtype", "out"):
        value = getattr(args, name)
        if value is not None:
            text = ",".join(map(str, value)) if name == "seeds" else str(value)
            parts += [f"--{name.replace('_', '-')}", text]
    return " ".join(shlex.quote(p) for p in parts)


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib showdown") -> int:
    p = parser(prog)
    return A.run(p, argv, lambda args: _showdown(resolve_env(args)), _interrupted)


def _interrupted(args: argparse.Namespace) -> str:
    return "finished cells are kept; run the same command again to continue where it stopped"


def _overrides(args: argparse.Namespace) -> dict:
    """The spec fields the flags change; flags of another data mode or setting are errors (one line, exit 2)."""
    overrides: dict = {}
    if args.data == "flickr30k" and args.setting == "e2e":
        raise A.UsageError("--setting", "e2e trains a CNN on the shapes images; flickr30k has cached image features "
                                        "only: use features or vsepp")
    if args.data == "flickr30k" and args.image_encoder is not None:
        raise A.UsageError("--image-encoder", "is for --data shapes (flickr30k's image features are cached)")
    for name in ("data_path", "cache_root", "revision", "weights", "dtype"):
        if args.data == "shapes" and getattr(args, name) is not None:
            raise A.UsageError(f"--{name.replace('_', '-')}", "is for --data flickr30k, not --data shapes")
    if args.image_encoder is not None:
        if args.setting == "e2e":
            raise A.UsageError("--image-encoder", "is for the settings on frozen image features (features, vsepp)")
        overrides["image_encoder"] = args.image_encoder
    if args.seeds is not None:
        overrides["seeds"] = tuple(args.seeds)
    if args.epochs is not None:
        overrides["epochs"] = args.epochs
    overrides.update({k: getattr(args, k) for k in ("revision", "weights", "dtype") if getattr(args, k) is not None})
    return overrides


def _showdown(args: argparse.Namespace) -> int:
    from ..report.markdown import markdown_block
    from ..train import distributed as D
    from ..experiments import showdown as sd
    from ..experiments.cells import spec_for

    overrides = _overrides(args)
    common.check_record_env()
    with D.process_group(args.device, args.dist_timeout) as device:
        spec = spec_for(args.data, args.fast, args.setting, device=str(device),
                        cache_root=None if args.cache_root is None else str(args.cache_root),
                        data_path=None if args.data_path is None else str(args.data_path), **overrides)
        showdown = sd.run(spec, command=canonical_command(args), out=args.out, force=args.force,
                          progress=args.progress)
        if D.rank_and_world()[0] != 0:
            return 0
        common.print_table(markdown_block(showdown.runs, showdown.meta), showdown,
                           "--force to retrain missing cells and rewrite it", args.markdown)
    return 0
