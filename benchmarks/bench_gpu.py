"""The Flickr30K path on a GPU, measured on a real-schema fixture of realistic size (no download, no weights).

    python benchmarks/bench_gpu.py               # (make bench-gpu) the sizes of the targets, for a GPU
    python benchmarks/bench_gpu.py --cpu-smoke   # reduced sizes on the CPU: proves that it runs

1. Feature extraction. A fixture in the Hub's Parquet layout (``vlr_lib.data.fixture``: shapes
   scenes rendered at 224 px, 5 captions each) read by ``vlr_lib.data.load_flickr30k`` and encoded
   by ``vlr_lib.features.extract_features`` with a randomly initialised open_clip ViT-B/32 (the
   real architecture; ``pretrained=None`` costs what the "openai" weights cost, and downloads
   nothing), at the device's loader defaults (256 images per batch, DataLoader workers and pinned
   memory on CUDA). Printed: images/s of the whole extraction (captions included) and, as the
   baseline of the same run, images/s of the image encoder alone on pixels already on the device:
   their ratio is what decoding, the loader and the captions cost.
2. One training epoch over 145,000 captions' worth of features (29,000 images x 5 captions,
   512-d, on the device): ``vlr_lib.train.fit`` with linear heads, batch 128 (1,132 steps), the
   unified loss and its evaluation on 1,014 validation images. Target: < 5 s on a GPU. Baseline:
   the same steps as a plain loop (embed, S, loss, backward, Adam; no masks, no flags). On CUDA
   also the host synchronisations inside the trainer's steps (``torch.cuda.set_sync_debug_mode``).
3. The loss showdown: 24 configurations x 3 seeds = 72 runs of 15 epochs (66 before issue 36 added two) on cached features of
   the Karpathy sizes (random, with a learnable signal), through ``vlr_lib.experiments.showdown.run``
   (test split and COCOS every epoch, selection on validation). Target: < 5 min on a GPU (issue 37).
   On CUDA the showdown trains its runs together (``train.fit_many``, heads stacked).
   Baseline: 66 x 15 of part 2's epochs; the ratio is the showdown's own cost (test split, COCOS).
   Fewer seeds or epochs (``--seeds``, ``--epochs``) are scaled linearly to 66 x 15, as an
   extrapolation: that also multiplies each run's fixed costs, so it errs high.
4. The losses at N = 4096 and 16384 (``--loss-sizes``), D = 512: ``bench_losses.bench_size`` (the
   table of ``make bench``), each loss's forward+backward on S as a ratio to the matmul
   S = img @ txt.T of the same run, forward alone and forward+backward. An N that does not fit
   the device's memory is one line.

A part that raises prints its traceback and the others still run (exit status 1 at the end).
Everything is written under a temporary folder and deleted; nothing touches the user's caches.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import datasets
import torch

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_train import synthetic  # the trainer benchmark's features with a learnable signal
from vlr_lib import losses
from vlr_lib.models import LinearHead

EPOCH_TARGET_S, SHOWDOWN_TARGET_S = 5.0, 5 * 60.0  # issue 37: the showdown in under 5 minutes


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- 1. extraction


def extraction(args, device: torch.device, work: Path) -> None:
    from vlr_lib.data import load_flickr30k
    from vlr_lib.data.fixture import write_flickr30k_fixture
    from vlr_lib.features import build_encoder, loader_settings

    sizes = {"train": args.images, "validation": 1, "test": 1}
    t0 = time.perf_counter()
    root = write_flickr30k_fixture(work / "flickr30k", sizes, image_size=224, images="shapes")
    split = load_flickr30k(root, expected_sizes=sizes, cache_dir=work / "hf")["train"]
    mb = sum(f.stat().st_size for f in root.rglob("*.parquet")) / 1e6
    print(f"[1. extraction] fixture: {args.images} shapes images at 224 px, {mb:.1f} MB of Parquet, "
          f"written and loaded in {time.perf_counter() - t0:.0f} s")
    logging.disable(logging.WARNING)  # open_clip warns that random weights are random
    encoder = build_encoder("clip-vit-b32", pretrained=None, device=device)
    logging.disable(logging.NOTSET)
    loading = loader_settings(device)
    print(f"  open_clip ViT-B-32, random init; loader defaults on {device}: {loading}")

    pixels = torch.randn(min(loading["batch_size"], args.images), 3, 224, 224, device=device)
    ceiling, (img, txt), whole = _extraction_rates(split, encoder, pixels, args, device)
    print(f"  extract_features (decode and encode {img.shape[0]} images, encode their {txt.shape[0]} captions): "
          f"{whole:8.1f} images/s")
    print(f"  baseline: image encoder alone, pixels on the device:      {ceiling:8.1f} images/s")
    print(f"  ratio extraction / encoder alone:                          {whole / ceiling:8.2f}  (target >= 0.5)")
    print(f"  Flickr30K (31,014 images) at this rate: {31_014 / whole / 60:.1f} min")
    extraction_profile(split, encoder, loading, device)
    if device.type == "cuda":  # not the library's default (it extracts in float32): what bf16 would give
        with torch.autocast("cuda", dtype=torch.bfloat16):
            bf_ceiling, _, bf_whole = _extraction_rates(split, encoder, pixels, args, device)
        print(f"  under bf16 autocast (not the default): extraction {bf_whole:8.1f} images/s, image encoder alone "
              f"{bf_ceiling:8.1f}; against the float32 encoder alone {bf_whole / ceiling:.2f}")


def _extraction_rates(split, encoder, pixels, args, device: torch.device):
    """(images/s of the image encoder alone on `pixels`, (img, txt) features, images/s of the whole extraction),
    each after a warm-up (kernels, the loader's workers)."""
    from vlr_lib.features import extract_features

    encoder.encode_images(pixels)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(args.repeats):
        encoder.encode_images(pixels)
    _sync(device)
    ceiling = args.repeats * pixels.shape[0] / (time.perf_counter() - t0)
    extract_features(split.select(range(min(512, len(split)))), encoder, progress=False)
    _sync(device)
    t0 = time.perf_counter()
    img, txt, _ = extract_features(split, encoder, progress=False)
    _sync(device)
    return ceiling, (img, txt), img.shape[0] / (time.perf_counter() - t0)


def extraction_profile(split, encoder, loading: dict, device: torch.device) -> None:
    """Where extraction's time goes: each stage alone, as images (or captions) per second."""
    from vlr_lib.features import captions_of, extraction_loaders

    def rate(fn, n: int) -> float:
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        return n / (time.perf_counter() - t0)

    n = len(split)
    texts, _ = captions_of(split)
    images, tokens, _ = extraction_loaders(split, encoder, loading["batch_size"], loading["num_workers"])
    ready = list(tokens)  # tokenised once, on the CPU as the loader hands them over
    on_device = [t.to(device) for t in ready]
    stages = {
        "images: decode + transform in the loader (no encoder)": (lambda: [x.to(device, non_blocking=True)
                                                                            for x in images], n, "images"),
        "captions: tokenise in the loader's workers": (lambda: list(tokens), len(texts), "captions"),
        "captions: tokenise in the main process": (lambda: encoder.tokenize(texts), len(texts), "captions"),
        "captions: text encoder alone, cut to each batch's longest": (
            lambda: [encoder.encode_tokens(t) for t in ready], len(texts), "captions"),
    }
    if hasattr(encoder.model, "encode_text"):  # open_clip: the full 77-token context, as before the cut
        stages["captions: text encoder, full context (no cut)"] = (
            lambda: [encoder.model.encode_text(t) for t in on_device], len(texts), "captions")
    print("  profile, each stage alone:")
    for name, (fn, count, unit) in stages.items():
        r = rate(fn, count)
        per_image = f" = {r * n / count:8.1f} images/s" if unit == "captions" else ""
        print(f"    {name:<55} {r:9.1f} {unit}/s{per_image}")


# --------------------------------------------------------------------------- 2. one epoch


def plain_epoch(data, batch: int, dim: int, device: torch.device) -> float:
    """The same steps without the trainer: heads, S, unified loss, backward, Adam (seconds)."""
    img, txt, c2i = (t.to(device) for t in data)
    torch.manual_seed(0)
    heads = (LinearHead(img.shape[1], dim).to(device), LinearHead(txt.shape[1], dim).to(device))
    opt = torch.optim.Adam([p for h in heads for p in h.parameters()], lr=2e-4)
    order = torch.randperm(txt.shape[0], device=device)
    steps = txt.shape[0] // batch
    _sync(device)
    t0 = time.perf_counter()
    for s in range(steps):
        idx = order[s * batch : (s + 1) * batch]
        S = heads[0](img[c2i[idx]]) @ heads[1](txt[idx]).T
        loss = losses.unified(S)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _sync(device)
    return time.perf_counter() - t0


def one_epoch(args, device: torch.device) -> float:
    from vlr_lib.train import fit

    data, val = synthetic(args.train_images, 512), synthetic(1_014, 512, seed=1)
    print(f"[2. one epoch] {args.train_images:,} images x 5 = {5 * args.train_images:,} captions, 512-d features on "
          f"{device}, batch 128, linear heads to 512-d, unified loss, validation 1,014 images")
    syncs = _count_step_syncs(device)
    timings, plain = [], []
    for _ in range(args.repeats):  # alternate: load from other processes hits both alike
        res = fit(*data, "unified", val=val, epochs=1, batch_size=128, dim=512, device=device, probe_batch=0,
                  progress=False)
        timings.append((res.history[0]["train_seconds"], res.history[0]["seconds"]))
        plain.append(plain_epoch(data, 128, 512, device))
    train_s, total_s = min(timings)
    base = min(plain)
    print(f"  vlr_lib.train.fit: {train_s:7.2f} s of training, {total_s:7.2f} s with the evaluation "
          f"(best of {args.repeats})")
    print(f"  baseline plain loop: {base:7.2f} s; ratio fit / plain {train_s / base:.2f}")
    scale = 29_000 / args.train_images
    print(f"  target < {EPOCH_TARGET_S:.0f} s per epoch of 145,000 captions: measured {total_s:.2f} s"
          + (f" for 1/{scale:.0f} of it" if scale != 1 else "")
          + f" -> {total_s * scale / EPOCH_TARGET_S:.2f} of the budget at full size (linear in captions)")
    if syncs is not None:
        print(f"  host synchronisations inside the trainer's steps: {syncs[0]} in {syncs[1]} steps (target 0)")
    return total_s * scale


def _count_step_syncs(device: torch.device):
    """(synchronisations, steps) inside engine._step over one epoch, from torch.cuda.set_sync_debug_mode."""
    if device.type != "cuda":
        return None
    from vlr_lib.train import engine, fit

    real, counts, where = engine._step, [0, 0], set()

    def watched(*a, **k):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                return real(*a, **k)
            finally:
                torch.cuda.set_sync_debug_mode("default")
                # torch's own notice that the debug mode is a prototype also says "Synchronization": not one
                found = [w for w in caught if "called a synchronizing CUDA operation" in str(w.message)]
                counts[0] += len(found)
                counts[1] += 1
                where.update(f"{Path(w.filename).name}:{w.lineno} (step {counts[1]})" for w in found)

    engine._step = watched
    try:
        fit(*synthetic(2_000, 512), "unified", epochs=1, batch_size=128, dim=512, device=device, probe_batch=0,
            progress=False)
    finally:
        engine._step = real
    if where:
        print(f"  where the step synchronised: {', '.join(sorted(where))}")
    return tuple(counts)


# --------------------------------------------------------------------------- 3. the showdown


def showdown(args, device: torch.device, work: Path, epoch_s: float | None) -> None:
    from vlr_lib.features import FeatureSet, default_cache_dir, save_features
    from vlr_lib.experiments import showdown as sd
    from vlr_lib.experiments.cells import spec_for

    sizes = {"train": args.train_images, "validation": args.val_images, "test": args.val_images}
    for i, (split, n) in enumerate(sizes.items()):
        img, txt, c2i = synthetic(n, 512, seed=10 + i)
        manifest = {"backbone": "clip-vit-b32", "pretrained": "openai", "dataset_id": "flickr30k:bench",
                    "revision": "", "split": split, "dtype": "float32"}
        save_features(default_cache_dir(work / "features", "flickr30k:bench", "", split, "clip-vit-b32"),
                      FeatureSet(img, txt, c2i, manifest))
    spec = spec_for("flickr30k", False, device=str(device), cache_root=str(work / "features"),
                    seeds=tuple(range(args.seeds)), epochs=args.epochs)
    runs = len(sd.configs()) * len(spec.seeds)
    print(f"[3. showdown] {runs} runs x {spec.epochs} epochs on {sizes['train']:,} / {sizes['validation']:,} / "
          f"{sizes['test']:,} images of cached 512-d features, {device}")
    t0 = time.perf_counter()
    with _progress_lines(len(sd.configs()) * len(spec.seeds), t0):
        result = sd.run(spec, out=work / "showdown", progress=False)
    wall = time.perf_counter() - t0
    assert len(result.runs) == runs
    whole = len(sd.configs()) * 3  # the showdown's contestants x its 3 seeds
    full = wall * (whole / runs) * (15 / spec.epochs) * (29_000 / sizes["train"])
    scaled = (runs, spec.epochs, sizes["train"]) != (whole, 15, 29_000)
    print(f"  wall time {wall:.1f} s for {runs} runs x {spec.epochs} epochs"
          + (f"; extrapolated linearly to {whole} runs x 15 epochs x 29,000 images: " if scaled else ": ")
          + f"{full / 60:.1f} min (target < {SHOWDOWN_TARGET_S / 60:.0f} min on a GPU: {full / SHOWDOWN_TARGET_S:.2f} "
          "of the budget)")
    if spec.epochs == 1:  # each run's one epoch: its training and validation, without the test split and COCOS
        epochs = float(result.runs["seconds"].sum())
        print(f"  of which the runs' epochs (training + validation): {epochs:.1f} s; the rest (data, models, test "
              f"split and COCOS per epoch): {wall - epochs:.1f} s")
    if epoch_s is not None:
        base = 66 * 15 * epoch_s
        print(f"  baseline 66 x 15 epochs of part 2: {base / 60:.1f} min; ratio showdown / baseline {full / base:.2f}")


@contextlib.contextmanager
def _progress_lines(runs: int, t0: float):
    """Print a line each time every run has trained one more epoch: a showdown stopped by a time limit still
    says how far it got, and when."""
    from vlr_lib.experiments.cells import ShowdownMetrics

    real, calls = ShowdownMetrics.__call__, [0]

    def counted(self, record, result):
        real(self, record, result)
        calls[0] += 1
        if calls[0] % runs == 0:
            print(f"  ... {calls[0] // runs} epoch(s) of all {runs} runs after {time.perf_counter() - t0:6.1f} s",
                  flush=True)

    ShowdownMetrics.__call__ = counted
    try:
        yield
    finally:
        ShowdownMetrics.__call__ = real


# --------------------------------------------------------------------------- 4. the losses


def loss_ratios(args, device: torch.device) -> None:
    """make bench's table (bench_losses.bench_size) at the sizes of a GPU, with the forward+backward matmul too."""
    from bench_losses import bench_size_if_it_fits

    print(f"[4. losses] forward+backward of each loss on S, as ratios to the matmul S = img @ txt.T (D = 512) "
          f"timed in the same run; float32, TF32 matmuls "
          f"{'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}; medians after a warm-up")
    for n in args.loss_sizes:
        bench_size_if_it_fits(n, 512, device, skip_pml_above=0, mm_backward=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--cpu-smoke", action="store_true", help="reduced sizes on the CPU (proves it runs)")
    p.add_argument("--images", type=int, default=4000, help="part 1: fixture images at 224 px")
    p.add_argument("--train-images", type=int, default=29_000, help="parts 2-3: training images (x 5 captions)")
    p.add_argument("--val-images", type=int, default=1_014, help="part 3: validation and test images")
    p.add_argument("--seeds", type=int, default=3, help="part 3: seeds per configuration")
    p.add_argument("--epochs", type=int, default=15, help="part 3: epochs per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--loss-sizes", type=int, nargs="+", default=[4096, 16_384], help="part 4: batch sizes N")
    p.add_argument("--skip", default="", help="comma-separated parts to skip: 1,2,3,4")
    args = p.parse_args(argv)
    if args.cpu_smoke:
        args.device, args.images, args.train_images, args.val_images = "cpu", 48, 2_900, 200
        args.seeds, args.epochs, args.repeats, args.loss_sizes = 1, 1, 1, [256]
        torch.set_num_threads(1)  # as the showdown on a CPU: tiny matmuls, threads only contend
    device = torch.device(args.device)
    skip = set(args.skip.split(","))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU"
    print(f"torch {torch.__version__}, device {device} ({name}), {torch.get_num_threads()} CPU threads"
          + (" -- CPU smoke run at reduced sizes: the GPU targets do not apply" if args.cpu_smoke else ""))
    datasets.disable_progress_bars()
    failed = []

    def part(number: str, fn, *a):
        """fn(*a) unless skipped; a part that raises prints its traceback and the next still runs."""
        if number in skip:
            return None
        try:
            return fn(*a)
        except Exception:  # noqa: BLE001 -- reported, and the exit status says so
            traceback.print_exc()
            print(f"[{number}] stopped by the error above", flush=True)
            failed.append(number)
            return None
        finally:
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()

    with tempfile.TemporaryDirectory(prefix="vlr-bench-gpu-") as tmp:
        work = Path(tmp)
        part("1", extraction, args, device, work)
        epoch_s = part("2", one_epoch, args, device)
        part("3", showdown, args, device, work, epoch_s)
        part("4", loss_ratios, args, device)
    if failed:
        sys.exit(f"parts {', '.join(failed)} stopped by an error")


if __name__ == "__main__":
    main()
