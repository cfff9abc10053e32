"""Generate the synthetic shapes dataset and save it to disk.

    python data_scripts/make_shapes.py --out data/shapes --n-train 2000 --difficulty 0.5 --seed 0

Writes a DatasetDict (train / validation / test, Flickr30K schema) with
`save_to_disk`, plus scenes.npz (the attributes behind every image). Load it
with `vlr_lib.data.load_shapes(path)`. Same arguments, same bytes. The folder is
written next to --out and moved into place when complete; an existing saved
dataset there is replaced, any other existing folder is left alone (an error).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib.cli import args as A
from vlr_lib.cli import common


def parser() -> A.Parser:
    p = A.Parser(prog="make_shapes.py", description=__doc__)
    p.add_argument("--out", required=True, type=A.output_dir, help="output folder (created; a saved dataset is replaced)")
    p.add_argument("--n-train", type=common.n_images(1), default=2000, help="training images (default 2000)")
    p.add_argument("--n-val", type=common.n_images(1), default=200, help="validation images (default 200)")
    p.add_argument("--n-test", type=A.positive_int, default=200, help="test images (default 200)")
    p.add_argument("--image-size", type=A.int_at_least(16), default=64, help="image side in pixels (default 64)")
    p.add_argument("--difficulty", type=A.probability, default=0.5,
                   help="0..1: share of attributes scenes copy from their group's base scene (default 0.5)")
    p.add_argument("--group-size", type=A.positive_int, default=4, help="scenes per group of similar scenes (default 4)")
    p.add_argument("--seed", type=A.seed, default=0, help="random seed (default 0)")
    return p


def _make(args) -> int:
    from vlr_lib._io import atomic_dir
    from vlr_lib.data.shapes import make_shapes, save_shapes

    A.check_replaceable(args.out)
    start = time.perf_counter()
    dd, scenes = make_shapes(args.n_train, args.n_val, args.n_test, image_size=args.image_size,
                             difficulty=args.difficulty, seed=args.seed, group_size=args.group_size,
                             return_scenes=True)
    with atomic_dir(args.out) as tmp:
        save_shapes(dd, tmp, scenes)
    sizes = ", ".join(f"{k}={len(v)}" for k, v in dd.items())
    print(f"wrote {args.out} ({sizes}) in {time.perf_counter() - start:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return A.run(parser(), argv, _make)


if __name__ == "__main__":
    sys.exit(main())
