"""Peak memory of feature extraction on a Flickr30K-layout fixture: the script's own path, one split.

    python -m vlr_lib.data.fixture /tmp/rss/fixture --train 2000 --val 1 --test 1 --images noise --image-size 224
    /usr/bin/time -v python benchmarks/rss_extraction.py /tmp/rss/fixture /tmp/rss/cache

What ``data_scripts/extract_features.py`` does for the train split -- load the copy
(``load_flickr30k``: the Hub's single table, split by a scattered ``select``), build the cache
request (its data signature) and encode every image and caption (``load_or_build_features``) --
with a randomly initialised ResNet-50 and the hashed bag of words ("vsepp-resnet50", no
download), on the CPU at the CPU's loader defaults. It also prints ``ru_maxrss`` itself. The
arguments it uses exist in every version of the library since the feature cache, so the same
file measures an older checkout (``PYTHONPATH=<old checkout>``) for a before/after comparison.
"""
from __future__ import annotations

import resource
import shutil
import sys
import time

from vlr_lib.data import load_flickr30k
from vlr_lib.features import load_or_build_features


def main(fixture: str, cache: str) -> None:
    shutil.rmtree(cache, ignore_errors=True)
    t0 = time.perf_counter()
    split = load_flickr30k(fixture, expected_sizes=None)["train"]
    fs = load_or_build_features(split, cache, dataset_id="flickr30k:fixture", split="train",
                                backbone="vsepp-resnet50", pretrained=False, device="cpu", progress=False)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{fs.img.shape[0]} images, {fs.txt.shape[0]} captions in {time.perf_counter() - t0:.0f} s; "
          f"peak RSS {peak:.0f} MB (ru_maxrss)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
