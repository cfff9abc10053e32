"""How well frozen image features of the shapes data reflect the scenes: pretrained vs random vs pixels.

    python benchmarks/shapes_encoder_quality.py                       # the numbers of docs/shapes_encoder.md
    python benchmarks/shapes_encoder_quality.py --encoder-seeds 0 1 2 # also encoders pretrained from other seeds

For each data seed and difficulty, over all pairs of validation images: Spearman's rho between
the cosine of the features and the Jaccard overlap of the two images' caption word sets
(`vlr_lib.feature_quality.overlap_spearman`), for
  * pretrained   -- the default frozen features (`shapes_encoder.pretrained_image_features`);
  * unweighted   -- the same, without the equal-share block weights (standardised pooled features);
  * random       -- the same encoder never trained, same pool standardisation and weights;
  * random-train -- the random TinyCNN as `train.shapes_features` uses it today (same seeded
                    weights, standardised with the training split's statistics, no weights);
  * pixels       -- raw pixels minus the training split's mean image;
  * attributes   -- the true bag of scene attributes (`data.shapes.attribute_matrix`);
  * captions     -- the mean hashed bag of uni+bigrams of the image's captions (the text side).
Then ridge linear probes (train -> validation) to the pretraining task's labels, for the image
features and, per caption, for the hashed bag of words. Single-threaded, like the encoder.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib import feature_quality as Q
from vlr_lib import shapes_encoder as E
from vlr_lib.data import attribute_matrix, make_shapes
from vlr_lib.data.shapes import N_CAPTIONS
from vlr_lib.features import hashed_bow


def pixels(split) -> torch.Tensor:
    return torch.from_numpy(np.stack([np.asarray(im.convert("RGB")) for im in split["image"]])).flatten(1).float()


def image_features(dd, scenes, enc, rand) -> dict[str, dict[str, torch.Tensor]]:
    """{name: {split: features}} for the image-side candidates."""
    out: dict[str, dict[str, torch.Tensor]] = {k: {} for k in
                                               ("pretrained", "unweighted", "random", "random-train", "pixels")}
    for split in ("train", "validation"):
        out["pretrained"][split] = E.pretrained_image_features(dd[split], encoder=enc)
        out["unweighted"][split] = out["pretrained"][split] / enc.block_weight
        out["random"][split] = E.pretrained_image_features(dd[split], encoder=rand)
        out["random-train"][split] = out["random"][split] / rand.block_weight * rand.std + rand.mean  # raw pooled
        out["pixels"][split] = pixels(dd[split])
    mean, std = out["random-train"]["train"].mean(0), out["random-train"]["train"].std(0).clamp_min(1e-8)
    out["random-train"] = {s: (f - mean) / std for s, f in out["random-train"].items()}
    out["pixels"] = {s: f - out["pixels"]["train"].mean(0) for s, f in out["pixels"].items()}
    out["attributes"] = {s: torch.from_numpy(attribute_matrix(scenes[s])) for s in ("train", "validation")}
    return out


def caption_means(split) -> torch.Tensor:
    return torch.stack([hashed_bow(caps).mean(0) for caps in split["caption"]])


def seen_in_pool(scenes, pool) -> float:
    """Share of scenes whose attribute configuration (ignoring jitter) also occurs in the pool."""
    key = lambda s, i: s.attrs[i].tobytes()  # noqa: E731
    known = {key(pool, i) for i in range(len(pool))}
    return float(np.mean([key(scenes, i) in known for i in range(len(scenes))]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="data seeds (default 0 1)")
    p.add_argument("--difficulties", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    p.add_argument("--probe-difficulty", type=float, default=0.5, help="difficulty of the linear probes")
    p.add_argument("--encoder-seeds", type=int, nargs="+", default=[0], help="pretraining seeds (default 0)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    for enc_seed in args.encoder_seeds:
        settings = E.EncoderSettings(seed=enc_seed)
        start = time.perf_counter()
        enc = E.load_or_train_encoder(settings=settings, progress=False)
        rand = E.random_encoder(settings)
        print(f"\nencoder seed {enc_seed}: loaded or trained in {time.perf_counter() - start:.1f} s "
              f"({E.encoder_dir(settings)})")
        print("held-out pretraining accuracy:", enc.manifest["pretrain_accuracy"])
        print("random encoder, same heads untrained:", rand.manifest["pretrain_accuracy"])
        pool = E.pool_scenes(settings)[0]
        for seed in args.seeds:
            for difficulty in args.difficulties:
                dd, scenes = make_shapes(seed=seed, difficulty=difficulty, return_scenes=True)
                feats = image_features(dd, scenes, enc, rand)
                feats["captions"] = {"validation": caption_means(dd["validation"])}
                caps = dd["validation"]["caption"]
                rho = {k: Q.overlap_spearman(v["validation"], caps) for k, v in feats.items()}
                print(f"spearman  seed {seed} difficulty {difficulty:g}: "
                      + "  ".join(f"{k} {v:.3f}" for k, v in rho.items())
                      + f"  (validation scenes seen in the pool: {seen_in_pool(scenes['validation'], pool):.2f})")
                if difficulty != args.probe_difficulty:
                    continue
                labels = {s: E.scene_labels(scenes[s]) for s in ("train", "validation")}
                for name in ("pretrained", "random", "pixels"):
                    probe = Q.linear_probe(feats[name]["train"], labels["train"], feats[name]["validation"],
                                           labels["validation"])
                    print(f"probe     seed {seed} difficulty {difficulty:g} {name:>10}: "
                          + "  ".join(f"{k} {v:.3g}" for k, v in probe.items()))
                per_caption = {s: {k: v.repeat_interleave(N_CAPTIONS, dim=0) for k, v in labels[s].items()}
                               for s in labels}
                probe = Q.linear_probe(*(x for s in ("train", "validation")
                                         for x in (hashed_bow([c for five in dd[s]["caption"] for c in five]),
                                                   per_caption[s])))
                print(f"probe     seed {seed} difficulty {difficulty:g}   captions: "
                      + "  ".join(f"{k} {v:.3g}" for k, v in probe.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
