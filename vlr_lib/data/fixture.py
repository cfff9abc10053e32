"""Flickr30K-schema fixtures: the Hub's Parquet layout filled with rendered or random images, no download.

The real export (``nlphuji/flickr30k`` at ``refs/convert/parquet``, see ``vlr_lib.data.flickr30k``)
is one table of 31,014 rows in ``TEST/test/0000.parquet ... 0008.parquet`` with the columns image,
caption (5), sentids, split ("train" / "val" / "test"), img_id and filename. A fixture has the
same files, columns and features, at any split sizes, so the loader, the feature extractor, the
dry run (``python -m vlr_lib check``) and the GPU benchmark (``benchmarks/bench_gpu.py``) run
their real code paths on it: tests at the Karpathy sizes with tiny images, benchmarks and memory
measurements with 224 px images.

    python -m vlr_lib.data.fixture /tmp/f30k --train 2000 --val 100 --test 100 --image-size 224
"""
from __future__ import annotations

import argparse
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import datasets
import numpy as np
import pyarrow.parquet as pq

from .flickr30k import KARPATHY_SIZES, N_CAPTIONS, SPLITS

HUB_FEATURES = datasets.Features({
    "image": datasets.Image(),
    "caption": datasets.List(datasets.Value("string")),
    "sentids": datasets.List(datasets.Value("string")),
    "split": datasets.Value("string"),
    "img_id": datasets.Value("string"),
    "filename": datasets.Value("string"),
})
ROWS_PER_FILE = 3_500  # the export's nine files hold about this many rows each


def write_flickr30k_fixture(
    root: str | os.PathLike,
    sizes: Mapping[str, int] = KARPATHY_SIZES,
    image_size: int = 224,
    images: str = "shapes",
    seed: int = 0,
) -> Path:
    """Write ``root/TEST/test/NNNN.parquet`` in the Hub layout: `sizes` images per split (our keys), rows shuffled.

    `images`: "shapes" renders scenes of the shapes dataset at `image_size` px with their five
    captions (realistic content and JPEG-like sizes as PNG); "noise" uses random pixels (PNG,
    incompressible: about 3 * image_size**2 bytes per image, Flickr30K's average at 224 px is
    about 140 kB) with template captions -- fast at any size. Returns `root`.
    """
    rng = np.random.default_rng(seed)
    keys = [key for key, n in sizes.items() for _ in range(n)]
    n = len(keys)
    if images == "shapes":
        from .shapes import make_shapes

        total = {k: max(1, v) for k, v in sizes.items()}
        dd = make_shapes(total["train"], total["validation"], total["test"], image_size=image_size, seed=seed)
        pictures = [row["bytes"] for key in SPLITS for row in dd[key].cast_column(
            "image", datasets.Image(decode=False))["image"]][:n]
        captions = [list(c) for key in SPLITS for c in dd[key]["caption"]][:n]
    elif images == "noise":
        pictures = [_png(rng.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8)) for _ in range(n)]
        captions = [[f"a picture number {i} seen {k} times" for k in range(N_CAPTIONS)] for i in range(n)]
    else:
        raise ValueError(f"images must be 'shapes' or 'noise', got {images!r}")
    order = rng.permutation(n)
    rows = {
        "image": [{"bytes": pictures[i], "path": None} for i in order],
        "caption": [captions[i] for i in order],
        "sentids": [[str(N_CAPTIONS * i + k) for k in range(N_CAPTIONS)] for i in order],
        "split": [SPLITS[keys[i]] for i in order],
        "img_id": [str(1_000_000 + i) for i in order],
        "filename": [f"{1_000_000 + i}.jpg" for i in order],
    }
    table = datasets.Dataset.from_dict(rows, features=HUB_FEATURES).data.table  # with the `huggingface` metadata
    folder = Path(root) / "TEST" / "test"
    folder.mkdir(parents=True, exist_ok=True)
    for part, start in enumerate(range(0, n, ROWS_PER_FILE)):
        pq.write_table(table.slice(start, ROWS_PER_FILE), folder / f"{part:04d}.parquet")
    return Path(root)


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vlr_lib.data.fixture", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", type=Path)
    p.add_argument("--train", type=int, default=KARPATHY_SIZES["train"])
    p.add_argument("--val", type=int, default=KARPATHY_SIZES["validation"])
    p.add_argument("--test", type=int, default=KARPATHY_SIZES["test"])
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--images", choices=("shapes", "noise"), default="shapes")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    write_flickr30k_fixture(a.root, {"train": a.train, "validation": a.val, "test": a.test}, a.image_size,
                            a.images, a.seed)
    print(f"wrote {a.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
