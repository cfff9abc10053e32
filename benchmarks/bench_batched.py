"""Runs trained together (``fit_many``, heads stacked) against the same runs one by one (``fit``), in one process.

    python benchmarks/bench_batched.py                  # the device's default (cuda when available), GPU sizes
    python benchmarks/bench_batched.py --cpu-smoke      # reduced sizes on the CPU, one thread (as the showdown)

R runs of the features setting: the showdown's contestants (``experiments.showdown.configs``, the 22 losses, cycled
with seeds 0, 1, ... when R > 22) on random 512-d features with a learnable signal, linear heads into 512-d,
batch 128, the showdown's lr. Timed: the trainer's ``train_seconds`` of every epoch after the first (a warm-up;
evaluation and COCOS excluded: ``val=None``, ``probe_batch=0``), summed over the sequential runs, against the
group's own. Printed per R: seconds per step of one run alone (mean), of the whole group, and the ratio
sequential / batched (> 1: batching is faster). GPU sizes: 29,000 images x 5 captions (1,132 steps an epoch, the
Flickr30K showdown's), R = 1, 22, 66. A ratio is what to read: it is measured in the same run, on the same load.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib.experiments.showdown import configs
from vlr_lib.train import default_device, fit, fit_many


def synthetic(n_images: int, dim: int, device: torch.device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    img = torch.randn(n_images, dim, generator=g)
    c2i = torch.arange(n_images).repeat_interleave(5)
    txt = img[c2i] @ torch.randn(dim, dim, generator=g) / dim**0.5 + torch.randn(5 * n_images, dim, generator=g)
    return img.to(device), txt.to(device), c2i.to(device)


def runs(n: int) -> list[dict]:
    contestants = configs()
    out = []
    for i in range(n):
        config = dict(contestants[i % len(contestants)])
        loss = config.pop("loss")
        out.append({"loss": loss, "loss_kwargs": config, "seed": i // len(contestants)})
    return out


def timed_seconds(history: list[dict]) -> tuple[float, int]:
    """(train seconds, steps) of the epochs after the first."""
    return sum(r["train_seconds"] for r in history[1:]), sum(r["steps"] for r in history[1:])


def compare(data, n_runs: int, shared: dict) -> None:
    members = runs(n_runs)
    t0 = time.perf_counter()
    seq = [timed_seconds(fit(*data, **{**shared, **m}).history) for m in members]
    t_seq = time.perf_counter() - t0
    t0 = time.perf_counter()
    together = fit_many(members, train=data, **shared)
    t_bat = time.perf_counter() - t0
    seq_s, steps = sum(s for s, _ in seq), seq[0][1]
    bat_s, _ = timed_seconds(together[0].history)
    print(f"R = {n_runs:3d}: one run alone {1e3 * seq_s / n_runs / steps:7.2f} ms/step, "
          f"{n_runs} together {1e3 * bat_s / steps:8.2f} ms/step ({1e3 * bat_s / steps / n_runs:6.2f} per run); "
          f"sequential / batched = {seq_s / bat_s:5.2f}x  (wall, warm-up included: {t_seq:.1f} s vs {t_bat:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-smoke", action="store_true", help="reduced sizes on the CPU, one thread")
    ap.add_argument("--runs", type=int, nargs="+", default=None, help="group sizes R (default: 1 22 66; smoke: 1 4 8)")
    ap.add_argument("--images", type=int, default=None, help="training images, 5 captions each")
    ap.add_argument("--epochs", type=int, default=2, help="epochs (the first is a warm-up, not timed); >= 2")
    args = ap.parse_args(argv)
    if args.epochs < 2:
        ap.error("--epochs must be >= 2: the first epoch is a warm-up")
    device = torch.device("cpu") if args.cpu_smoke else default_device(None)
    if device.type == "cpu":
        torch.set_num_threads(1)  # as the showdown on a CPU (experiments.cells.cpu_threads)
    n_images = args.images or (1_280 if args.cpu_smoke else 29_000)
    sizes = args.runs or ([1, 4, 8] if args.cpu_smoke else [1, 22, 66])
    data = synthetic(n_images, 512, device)
    shared = dict(dim=512, batch_size=128, epochs=args.epochs, lr=2e-4, lr_decay_epoch=args.epochs, probe_batch=0,
                  device=device, progress=False)
    steps = 5 * n_images // 128
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}), "
          f"torch {torch.__version__}, threads {torch.get_num_threads()}; {n_images} images x 5 captions, "
          f"{steps} steps/epoch, linear heads 512 -> 512, batch 128, {args.epochs - 1} timed epoch(s)")
    for n in sizes:
        compare(data, n, shared)
    return 0


if __name__ == "__main__":
    sys.exit(main())
