"""What ``train`` and ``grid`` share: the data, setting, schedule and loss flags, their defaults, the data loading.

Data modes (``--data``):

- ``shapes`` (default): the synthetic dataset is generated in memory
  (``vlr_lib.data.shapes.make_shapes``; sizes ``--n-train`` / ``--n-val``,
  ``--difficulty``).
- ``flickr30k``: cached frozen-backbone features (``vlr_lib.features.flickr30k_features``,
  built on first use on the chosen device, cuda when available), heads trained on them. The
  data: ``--data-path``, else $VLR_DATA_PATH, else the copy ``data_scripts/prepare_flickr30k.py``
  saved by default, else the Hub at ``--revision`` (resolved to a commit hash and recorded). The
  caches (``--cache-root``, default $VLR_CACHE/features) are those ``data_scripts/extract_features.py``
  writes, keyed by data, commit, split, ``--backbone``, ``--weights`` and ``--dtype``; when the cache
  holds the data only in another variant, the run stops and names the flag that selects it.
  ``python -m vlr_lib check --data flickr30k`` checks all of this before a long run.

Settings (``--setting``; ``--mode`` is its old name), what learns:

- ``features``: two heads on frozen features -- for shapes the pretrained shapes encoder's
  image features (``--image-encoder random``: the same network untrained) and hashed bags of
  words (``train.shapes_features``); the cheapest setting, for wide grids; flickr30k's default.
- ``vsepp``: the VSE++ setting -- a head on the same frozen image features and a GRU text
  encoder trained from scratch on the training captions' words (``train.fit_vsepp``;
  ``--word-dim``, ``--hidden``, ``--min-count``); on flickr30k the captions come from the
  dataset the cached features were extracted from.
- ``e2e`` (shapes' default): a tiny CNN and a GRU text encoder from scratch, a few seconds per
  epoch on a laptop CPU; the losses then shape the encoders themselves.

Loss parameters (``--margin``, ``--gamma``, ...) are passed only when given, so
every loss keeps its paper default otherwise; one that the loss does not take
is an error. ``--topk``: an integer is a count of negatives, a decimal a fraction (1.0 = all).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..data_sizes import SIZES
from . import args as A

if TYPE_CHECKING:  # the trainer is imported when a command runs, not when its parser is built
    from ..train import Objective, TrainSettings

#: How a loss parameter of each kind (``vlr_lib.loss_entry.KINDS``) is parsed from the command line.
PARSERS = {"float": A.finite_float, "topk": A.topk}


def loss_params() -> dict:
    """Every loss parameter a command line can set, with its parser: the registry's numeric hyperparameters
    (``reduction`` is not one: the trainer needs a scalar loss). Read when a parser is built, so a loss
    registered in ``vlr_lib.losses`` is a flag with no change here."""
    from ..registry import command_line_parameters

    return {name: PARSERS[kind] for name, kind in command_line_parameters().items()}
#: Lower bounds of the memory a size needs (bytes), checked by the parser before anything is allocated.
IMAGE_BYTES = 64 * 64 * 3  # one shapes image, uint8


def n_images(low: int):
    """A number of shapes images >= `low` whose pixels fit in memory."""
    return A.sized(low, lambda n: n * IMAGE_BYTES, "64 x 64 RGB images, 12 KiB each")


batch = A.sized(2, lambda b: 8 * b * b, "the batch x batch similarities and their gradient, float32")
joint_dim = A.sized(1, lambda d: 16 * 64 * d, "a head's weights, gradients and Adam moments, float32, >= 64 inputs")
#: torch keeps the process group's timeout in milliseconds of a signed 64-bit integer; a year is plenty.
dist_timeout = A.positive_float_at_most(365 * 86400, "one year, in seconds")
SHAPES_ONLY = ("n_train", "n_val", "difficulty", "data_seed", "image_encoder")
FLICKR_ONLY = ("data_path", "backbone", "cache_root", "revision", "weights", "dtype")
#: Flags of the settings that train a text encoder, and of the VSE++ setting alone.
TEXT_ONLY = ("text_encoder",)
VSEPP_ONLY = ("word_dim", "hidden", "min_count")


def add_data_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--data", choices=("shapes", "flickr30k"), default="shapes")
    g.add_argument("--setting", choices=("features", "vsepp", "e2e"), default=None,
                   help="what learns: heads on frozen features, the VSE++ setting (head on frozen image features + "
                        "GRU from scratch) or end to end (shapes only); default e2e for shapes, features for flickr30k")
    g.add_argument("--mode", choices=("e2e", "features", "vsepp"), default=None, help="the old name of --setting")
    g.add_argument("--image-encoder", choices=("pretrained", "random"), default=None,
                   help="shapes, features / vsepp: the frozen image encoder (default pretrained)")
    g.add_argument("--n-train", type=n_images(2), default=None, help=f"shapes: training images (default {SIZES['command line']['n_train']})")
    g.add_argument("--n-val", type=n_images(2), default=None, help=f"shapes: validation images (default {SIZES['command line']['n_val']})")
    g.add_argument("--difficulty", type=A.probability, default=None,
                   help="shapes: how alike the negatives are, 0..1 (default 0.5)")
    g.add_argument("--data-seed", type=A.seed, default=None, help="shapes: seed of the generated data")
    add_flickr_options(g)


def add_flickr_options(g, data_path: bool = True, cache_root=A.output_dir) -> None:
    """The Flickr30K source and feature-cache flags (train, grid, check)."""
    if data_path:
        g.add_argument("--data-path", type=A.existing_path, default=None,
                       help="flickr30k: local copy (default: VLR_DATA_PATH, else the copy prepare_flickr30k.py saved, "
                            "else the Hub)")
    g.add_argument("--backbone", choices=("clip-vit-b32", "vsepp-resnet50"), default=None,
                   help="flickr30k: feature backbone (default clip-vit-b32)")
    g.add_argument("--cache-root", type=cache_root, default=None,
                   help="flickr30k: feature caches (default $VLR_CACHE/features, else ~/.cache/vlr-workbook/features)")
    add_feature_choice_options(g, hub=data_path)


def add_feature_choice_options(g, hub: bool = True) -> None:
    """--revision, --weights, --dtype: which Flickr30K data and cached feature set (all that the showdown needs)."""
    g.add_argument("--revision", default=None,
                   help="flickr30k: Hub branch, tag or commit (default VLR_FLICKR_REVISION, else refs/convert/parquet), "
                        "resolved to a commit; chooses between cached commits" if hub
                   else "flickr30k: the commit (or a prefix of it) of the cached features to use")
    g.add_argument("--weights", default=None,
                   help="flickr30k: backbone weights tag (default the backbone's: openai, IMAGENET1K_V1; none = random)")
    g.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default=None,
                   help="flickr30k: dtype of the cached features (default: float32 when building, "
                        "the one cached when only reading)")


def add_schedule_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training (defaults: shapes e2e / features)")
    g.add_argument("--epochs", type=A.epochs, default=None, help=f"default 20 / 10 (at most {A.EPOCHS_MAX:,})")
    g.add_argument("--batch-size", type=batch, default=None,
                   help="the global batch (split over processes under torchrun); default 32 / 128")
    g.add_argument("--lr", type=A.positive_float, default=None, help="default 2e-3 / 2e-4")
    g.add_argument("--lr-decay-epoch", type=A.epoch_or_zero, default=None,
                   help="lr x 0.1 from this epoch (default: halfway)")
    g.add_argument("--grad-clip", type=A.clip_norm, default=None,
                   help="clip the gradient's norm to this value before each step, or off (default: 2 in the vsepp "
                        "setting, as VSE++ and VSE-infinity train; off otherwise)")
    g.add_argument("--optimizer-at-switch", choices=("fresh", "carry"), default="fresh",
                   help="a warm-up schedule's switch: a fresh Adam for the second loss (default), or carry the "
                        "first loss's Adam state over")
    g.add_argument("--optimizer", choices=("adam", "adamw"), default="adam",
                   help="Adam (default) or AdamW (decoupled weight decay, as VSE-infinity trains)")
    g.add_argument("--weight-decay", type=A.non_negative_float, default=0.0,
                   help="Adam: an L2 term in the gradient; AdamW: decoupled decay (VSE-infinity: 1e-4); default 0")
    g.add_argument("--dim", type=joint_dim, default=None, help="joint space size (default 64 / 512)")
    g.add_argument("--head", choices=("linear", "mlp"), default=None,
                   help="features and vsepp: the head on the frozen features (default linear)")
    g.add_argument("--text-encoder", choices=("gru", "bag"), default=None, help="vsepp and e2e (default gru)")
    g.add_argument("--word-dim", type=A.positive_int, default=None, help="vsepp: word embedding size")
    g.add_argument("--hidden", type=A.positive_int, default=None, help="vsepp: the GRU's size")
    g.add_argument("--min-count", type=A.positive_int, default=None,
                   help="vsepp: keep the training words seen at least this often (VSE++: 4 on Flickr30K)")
    g.add_argument("--sampling", choices=("captions", "images"), default=None,
                   help="an epoch = every caption (VSE++, features default) or one caption per image (e2e default)")
    g.add_argument("--device", type=A.device, default=None, help="cpu, cuda, cuda:N or mps (default: cuda if available)")
    g.add_argument("--dist-timeout", type=dist_timeout, default=600.0,
                   help="under torchrun: seconds a rank waits for the others before failing (default 600)")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_loss_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("loss parameters (passed only when given; --topk: 50 = a count, 0.5 = a fraction)")
    for name, kind in loss_params().items():
        g.add_argument(f"--{name}", type=kind, default=None)
    g.add_argument("--reduction", type=_no_reduction, help=argparse.SUPPRESS)


def _no_reduction(text: str):
    raise argparse.ArgumentTypeError("is not a training option: the trainer needs one scalar loss per batch "
                                     "(each loss's mean over its pairs)")


def resolve_setting(args: argparse.Namespace) -> str:
    """"features", "vsepp" or "e2e"; flags of another data mode or setting are errors, not silently ignored."""
    given = lambda names: [n for n in names if getattr(args, n, None) is not None]  # noqa: E731
    if args.setting is not None and args.mode is not None and args.setting != args.mode:
        raise A.UsageError("--mode", f"is the old name of --setting; give one of them (got --setting {args.setting} "
                                     f"and --mode {args.mode})")
    flag = "--setting" if args.setting is not None else "--mode"
    setting = args.setting or args.mode or ("features" if args.data == "flickr30k" else "e2e")
    if args.data == "flickr30k" and setting == "e2e":
        raise A.UsageError(flag, "e2e trains encoders on the shapes images; flickr30k has cached image features: "
                                 "use features or vsepp")
    wrong = given(SHAPES_ONLY if args.data == "flickr30k" else FLICKR_ONLY)
    if wrong:
        raise A.UsageError(f"--{wrong[0].replace('_', '-')}", f"is for --data "
                           f"{'shapes' if args.data == 'flickr30k' else 'flickr30k'}, not --data {args.data}")
    if setting == "e2e" and args.head is not None:
        raise A.UsageError("--head", "is for the settings on frozen features (features, vsepp), not e2e, which "
                                     "trains its encoders end to end")
    if setting == "e2e" and args.image_encoder is not None:
        raise A.UsageError("--image-encoder", "is for the settings on frozen image features (features, vsepp), "
                                              "not e2e, which trains its CNN from scratch")
    for names, allowed in ((TEXT_ONLY, ("vsepp", "e2e")), (VSEPP_ONLY, ("vsepp",))):
        wrong = given(names)
        if wrong and setting not in allowed:
            raise A.UsageError(f"--{wrong[0].replace('_', '-')}", f"is for --setting {' or '.join(allowed)}, "
                                                                  f"not {setting}")
    return setting


def _defaults(args: argparse.Namespace, setting: str) -> dict:
    """One run's defaults of the data set and setting (``train.settings.run_defaults``), filled in from None
    (never from a falsy value)."""
    from ..train.settings import run_defaults

    return run_defaults(args.data, setting)


def schedule(args: argparse.Namespace, setting: str) -> tuple[dict, dict]:
    """(TrainSettings fields, model arguments) of the command line, the setting's defaults filled in from None."""
    defaults = _defaults(args, setting)
    value = lambda name: getattr(args, name) if getattr(args, name) is not None else defaults[name]  # noqa: E731
    settings = {"epochs": value("epochs"), "batch_size": value("batch_size"), "lr": value("lr"),
                "lr_decay_epoch": value("lr_decay_epoch"), "sampling": value("sampling"), "device": args.device,
                "progress": not args.no_progress, "optimizer_at_switch": args.optimizer_at_switch,
                "optimizer": args.optimizer, "weight_decay": args.weight_decay,
                "grad_clip": grad_clip(args.grad_clip, defaults.get("grad_clip"))}
    model = {"dim": value("dim")}
    if setting != "features":
        model["text_encoder"] = args.text_encoder or "gru"
    if setting != "e2e":
        model["head"] = args.head or "linear"
    if setting == "vsepp":
        model.update(word_dim=value("word_dim"), hidden=value("hidden"))
    return settings, model


def grad_clip(given: float | str | None, default: float | None) -> float | None:
    """--grad-clip's value: the setting's default when not given, None for "off"."""
    return default if given is None else None if given == "off" else given


def given_loss_params(args: argparse.Namespace) -> dict:
    return {name: getattr(args, name) for name in loss_params() if getattr(args, name) is not None}


def objective(loss: str, kwargs: dict, settings: TrainSettings, flag: str = "--loss",
              param_flag: str | None = None) -> Objective:
    """The run's objective, built and checked once, before any data is loaded: the loss exists, takes these
    parameters, accepts their values (one evaluation on a batch of ``settings.batch_size``) and, for a warm-up,
    switches inside ``settings.epochs``. The trainer takes it as it is.

    Errors name `flag` (the loss) or the parameter's flag: ``--<name>``, or `param_flag` (``--param``).
    """
    where = lambda name: param_flag or f"--{name}"  # noqa: E731
    from ..registry import parameters
    from ..train import build_objective

    try:
        takes = parameters(loss)
    except (ValueError, TypeError) as err:
        raise A.UsageError(flag, str(err)) from None
    for name in kwargs:
        if name not in takes:
            raise A.UsageError(where(name), f"loss {loss!r} does not take {name}; it takes "
                                            f"{', '.join(t for t in takes if t != 'reduction')}")
    check_warmup(loss, settings.epochs, flag)
    try:
        return build_objective(loss, kwargs, batch_size=settings.batch_size, epochs=settings.epochs)
    except (ValueError, TypeError, FloatingPointError) as err:
        name = _param_of(str(err), kwargs)
        raise A.UsageError(where(name) if name else flag, str(err)) from None


def _param_of(message: str, kwargs: dict) -> str | None:
    """The parameter a loss's message is about: the one it starts with, else the one it quotes as ``name=``
    (an overflow says "info_nce overflowed ...: temperature=... is too small")."""
    return (next((k for k in kwargs if message.startswith(k)), None)
            or next((k for k in kwargs if re.search(rf"\b{k}=", message)), None))


def check_warmup(loss: str, epochs: int, flag: str = "--loss") -> None:
    """A warm-up ("warmup:<first>:<n>:<then>") shorter than the run: else `then` would never train."""
    from .. import registry

    if not registry.is_schedule(loss):
        return
    first, n, then = registry.schedule(loss)
    if n >= epochs:
        raise A.UsageError(flag, f"the warm-up of {loss!r} lasts {n} epoch(s) and the run {epochs} (--epochs): "
                                 f"{then!r} would never train; make --epochs larger than {n} or the warm-up shorter")


# --------------------------------------------------------------------------- data


def load_data(args: argparse.Namespace, setting: str, device) -> dict:
    """{"dataset": dd} (shapes e2e) or {"train": triple, "val": triple} (features, vsepp), as ``grid`` takes them."""
    if args.data == "shapes":
        from ..data.shapes import make_shapes

        dd = make_shapes(n_train=args.n_train or SIZES["command line"]["n_train"],
                         n_val=args.n_val or SIZES["command line"]["n_val"], n_test=1,
                         difficulty=0.5 if args.difficulty is None else args.difficulty, seed=args.data_seed or 0)
        if setting == "e2e":
            return {"dataset": dd}
        from ..train import shapes_inputs

        inputs, _ = shapes_inputs(dd, setting, image_encoder=args.image_encoder or "pretrained",
                                  splits=("train", "validation"), min_count=_min_count(args))
        return {"train": inputs["train"], "val": inputs["validation"]}
    if setting == "vsepp":
        return flickr_caption_ids(args, device)
    feats = flickr_features(args, device)
    return {"train": feats["train"], "val": feats["validation"]}


def _min_count(args: argparse.Namespace) -> int:
    return args.min_count if args.min_count is not None else _defaults(args, "vsepp")["min_count"]


def flickr_caption_ids(args: argparse.Namespace, device) -> dict:
    """The VSE++ setting on Flickr30K: the cached features' triples with the dataset's captions as token ids
    (``train.inputs.with_caption_ids``: the captions are those of the data the features were extracted from)."""
    from ..train.inputs import with_caption_ids

    sets, dd, source = _flickr_sets(args, device)
    triples = {split: (fs.img, fs.txt, fs.caption_to_image) for split, fs in sets.items()}
    manifests = {split: fs.manifest for split, fs in sets.items()}
    try:
        inputs = with_caption_ids(dd, triples, manifests, source.describe(), _min_count(args))[0]
    except ValueError as err:
        raise A.UsageError("--data-path", str(err)) from None
    return {"train": inputs["train"], "val": inputs["validation"]}


def flickr_features(args: argparse.Namespace, device) -> dict:
    """Train and validation features of Flickr30K (``vlr_lib.features.flickr30k_features``), built on `device` if missing.

    Under torchrun, rank 0 builds a missing cache while the others wait, then every rank reads it.
    """
    sets = _flickr_sets(args, device)[0]
    return {split: (fs.img, fs.txt, fs.caption_to_image) for split, fs in sets.items()}


def _flickr_sets(args: argparse.Namespace, device) -> tuple[dict, object, object]:
    """(FeatureSet per split, the loaded DatasetDict, its ``resolve_source`` Source) of the Flickr30K flags."""
    from ..data.flickr30k import load_flickr30k, resolve_source
    from ..features import FeatureSetChoiceError, flickr30k_features
    from ..paths import feature_cache_root
    from ..train import distributed as D

    with A.quiet_datasets():  # `datasets` logs the error it raises: one line is ours
        try:
            source = resolve_source(args.data_path, revision=args.revision)
            dd = load_flickr30k(source)
        except ValueError as err:
            flag = "--revision" if str(err).startswith("revision") else "--data-path" if args.data_path else None
            raise A.UsageError(flag, str(err)) from None
    kwargs = dict(backbone=args.backbone or "clip-vit-b32", weights=args.weights, dtype=args.dtype, device=device,
                  progress=not args.no_progress, dataset=dd)
    root = args.cache_root or feature_cache_root()

    def load(build: bool) -> dict:
        try:
            return flickr30k_features(source, root, build=build, **kwargs)
        except FeatureSetChoiceError as err:
            flag = next((f for f, v in (("--revision", args.revision), ("--dtype", args.dtype),
                                        ("--weights", args.weights)) if v is None and f in str(err)), None)
            raise A.UsageError(flag, str(err)) from None

    if D.rank_and_world()[0] != 0:
        D.barrier()  # rank 0 builds what is missing
        return load(build=False), dd, source
    out = load(build=True)
    D.barrier()
    return out, dd, source


def print_table(block: str, done, fix: str, markdown: Path | None) -> None:
    """Print a finished experiment's Markdown `block` (and, when `done` was reused, where from and the `fix` that
    rebuilds it); write it to `markdown` too when given."""
    from .._io import atomic_write_text

    print(block)
    if done.reused:
        print(f"(stored table reused from {done.out}; {fix})")
    if markdown is not None:
        atomic_write_text(markdown, block)


def check_record_env() -> None:
    """$VLR_RECORD (where ``make record`` has an experiment keep what it trained), checked before anything trains, as
    ``vlr_lib.experiments.record`` reads it: an absolute path to a folder that can be written. Unset: nothing kept."""
    from ..experiments.record import RECORD_ENV, destination

    path = A.env(destination)
    if path is None:
        return
    try:
        A.output_dir(str(path))
    except argparse.ArgumentTypeError as err:
        raise A.UsageError(None, f"environment variable {RECORD_ENV}: {err}") from None


def add_run_outputs(p: argparse.ArgumentParser, folder: str, force: bool = True) -> None:
    """An experiment command's outputs: --out (a run folder, default <runs>/`folder`), --markdown, --force (a stored
    table ignored) when the experiment stores one, and --progress."""
    p.add_argument("--out", type=A.run_dir, default=None,
                   help=f"results folder (default <runs>/{folder}, <runs> = $VLR_RUNS or ~/.cache/vlr-workbook/runs); "
                        "a new, empty or earlier run folder")
    p.add_argument("--markdown", type=A.output_file, default=None, help="also write the docs/results.md block here")
    if force:
        p.add_argument("--force", action="store_true", help="ignore a stored table (cached cells are still reused)")
    p.add_argument("--progress", action="store_true", help="progress bar over cells")
