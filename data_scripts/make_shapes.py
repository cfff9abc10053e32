"""Generate the synthetic shapes dataset and save it to disk.

    python data_scripts/make_shapes.py --out data/shapes --n-train 2000 --difficulty 0.5 --seed 0

Writes a DatasetDict (train / validation / test, Flickr30K schema) with
`save_to_disk`, plus scenes.npz (the attributes behind every image). Load it
with `vlr_lib.data.load_shapes(path)`. Same arguments, same bytes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="output folder (created; overwritten)")
    p.add_argument("--n-train", type=int, default=2000, help="training images (default 2000)")
    p.add_argument("--n-val", type=int, default=200, help="validation images (default 200)")
    p.add_argument("--n-test", type=int, default=200, help="test images (default 200)")
    p.add_argument("--image-size", type=int, default=64, help="image side in pixels (default 64)")
    p.add_argument("--difficulty", type=float, default=0.5,
                   help="0..1: share of attributes scenes copy from their group's base scene (default 0.5)")
    p.add_argument("--group-size", type=int, default=4, help="scenes per group of similar scenes (default 4)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from vlr_lib.data.shapes import make_shapes, save_shapes

    start = time.perf_counter()
    dd, scenes = make_shapes(args.n_train, args.n_val, args.n_test, image_size=args.image_size,
                             difficulty=args.difficulty, seed=args.seed, group_size=args.group_size,
                             return_scenes=True)
    save_shapes(dd, args.out, scenes)
    sizes = ", ".join(f"{k}={len(v)}" for k, v in dd.items())
    print(f"wrote {args.out} ({sizes}) in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
