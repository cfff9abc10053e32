"""Encode every image and caption of a dataset split once with a frozen backbone; cache to disk.

    python data_scripts/extract_features.py --data flickr30k --backbone clip-vit-b32
    python data_scripts/extract_features.py --data flickr30k --data-path data/flickr30k --revision <commit>
    python data_scripts/extract_features.py --data shapes --data-path data/shapes --backbone vsepp-resnet50

One cache folder per split under --cache-root (default $VLR_CACHE/features, else
~/.cache/vlr-workbook/features; see vlr_lib.features.default_cache_dir), keyed by dataset,
revision (a commit hash for Flickr30K), split, backbone, weights and dtype: the folders
python -m vlr_lib train|grid|showdown|check and the notebooks read. Flickr30K is read from
--data-path, else VLR_DATA_PATH, else the copy prepare_flickr30k.py saved by default, else
the Hub at --revision (resolved to a commit). A cache that matches the request is reused;
one that does not (or is corrupt) is rebuilt. The device defaults to cuda when available,
and the batch size and DataLoader workers to the device's (256 and min(8, CPUs) on CUDA,
64 and none on a CPU). Pretrained weights download on first use (open_clip / torchvision
caches); --weights none gives random weights (no download; for trials only).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib.cli import args as A

SPLIT_KEYS = ("train", "validation", "test")


def parser() -> A.Parser:
    p = A.Parser(prog="extract_features.py", description=__doc__)
    p.add_argument("--data", choices=("shapes", "flickr30k"), default="shapes", help="dataset (default shapes)")
    p.add_argument("--data-path", type=A.existing_path, default=None,
                   help="saved dataset folder (make_shapes.py / prepare_flickr30k.py output); shapes without it "
                        "are generated with --seed/--difficulty; flickr30k without it: VLR_DATA_PATH, the default "
                        "prepared copy, else the Hub")
    p.add_argument("--seed", type=A.seed, default=0, help="shapes: seed when generating (default 0)")
    p.add_argument("--difficulty", type=A.probability, default=0.5,
                   help="shapes: difficulty when generating, 0..1 (default 0.5)")
    p.add_argument("--dataset-id", default=None,
                   help="shapes: id recorded in the manifest (default: shapes:<folder name>, or 'shapes')")
    p.add_argument("--revision", default=None,
                   help="flickr30k: Hub branch, tag or commit (default VLR_FLICKR_REVISION, else refs/convert/parquet), "
                        "resolved to a commit hash; shapes: a label recorded in the manifest")
    p.add_argument("--split", choices=SPLIT_KEYS + ("all",), default="all", help="split to encode (default all)")
    p.add_argument("--backbone", choices=("clip-vit-b32", "vsepp-resnet50"), default="clip-vit-b32")
    p.add_argument("--weights", "--pretrained", dest="pretrained", default="default",
                   help="weights tag ('openai', 'IMAGENET1K_V2', ...), 'default' for the backbone's default, "
                        "or 'none' for random weights")
    p.add_argument("--cache-root", type=A.output_dir, default=None,
                   help="feature caches (default $VLR_CACHE/features, else ~/.cache/vlr-workbook/features)")
    p.add_argument("--device", type=A.device, default=None, help="cpu, cuda, cuda:N or mps (default: cuda if available)")
    p.add_argument("--batch-size", type=A.positive_int, default=None, help="images per batch (default 256 on CUDA, 64 else)")
    p.add_argument("--num-workers", type=A.nonnegative_int, default=None,
                   help="DataLoader workers decoding images (default min(8, CPUs) on CUDA, 0 else)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    p.add_argument("--rebuild", action="store_true", help="rebuild even if a matching cache exists")
    return p


def _load(args: argparse.Namespace):
    from vlr_lib.data import load_flickr30k, load_shapes, make_shapes

    if args.data == "shapes":
        if args.data_path is not None:
            return load_shapes(args.data_path), f"shapes:{args.data_path.resolve().name}", args.revision or ""
        dd = make_shapes(seed=args.seed, difficulty=args.difficulty)
        return dd, "shapes", args.revision or f"seed={args.seed},difficulty={args.difficulty}"
    if args.dataset_id is not None:
        raise A.UsageError("--dataset-id", "is for --data shapes; a Flickr30K cache is keyed by its source "
                                           "(vlr_lib.features.flickr_cache_id), where every command looks for it")
    from vlr_lib.data.flickr30k import resolve_source

    source = resolve_source(args.data_path, revision=args.revision)  # the id every reader looks up
    print(f"Flickr30K: {source.describe()}")
    return load_flickr30k(source), source.dataset_id, source.revision


def main(argv: Sequence[str] | None = None) -> int:
    return A.run(parser(), argv, _extract)


def _extract(args: argparse.Namespace) -> int:
    from vlr_lib.features import (FeatureCacheError, FeatureCacheMissingError, build_encoder, default_cache_dir,
                                  load_or_build_features)
    from vlr_lib.paths import feature_cache_root
    from vlr_lib.train.device import default_device

    with A.quiet_datasets():
        try:
            dd, dataset_id, revision = _load(args)
        except ValueError as err:
            flag = "--revision" if str(err).startswith("revision") else "--data-path" if args.data_path else None
            raise A.UsageError(flag, str(err)) from None
    dataset_id = args.dataset_id or dataset_id
    pretrained = True if args.pretrained == "default" else args.pretrained
    device = default_device(args.device)
    root = args.cache_root or feature_cache_root()
    encoder = None  # built once, only when some split needs it
    for split in SPLIT_KEYS if args.split == "all" else (args.split,):
        cache_dir = default_cache_dir(root, dataset_id, revision, split, args.backbone, pretrained, args.dtype)
        kwargs = dict(dataset_id=dataset_id, revision=revision, split=split, backbone=args.backbone,
                      pretrained=pretrained, device=device, batch_size=args.batch_size, dtype=args.dtype,
                      num_workers=args.num_workers)
        fs = None
        if not args.rebuild:
            try:
                fs = load_or_build_features(dd[split], cache_dir, build=False, **kwargs)
            except FeatureCacheMissingError:
                pass
            except FeatureCacheError as err:
                print(f"{split}: rebuilding ({err})")
        if fs is None:
            encoder = encoder or build_encoder(args.backbone, pretrained, device)
            fs = load_or_build_features(dd[split], cache_dir, encoder=encoder, rebuild=True, **kwargs)
        print(f"{split}: img {tuple(fs.img.shape)}, txt {tuple(fs.txt.shape)} -> {cache_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
