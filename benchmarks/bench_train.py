"""Trainer throughput beside a plain DataLoader loop, and time-to-rsum of the shapes end-to-end mode.

    python benchmarks/bench_train.py            # (make bench-train)
    python benchmarks/bench_train.py --quick    # smaller, for a smoke run

Part 1 -- heads on fixed features. The same model (two LinearHeads), loss
(unified, false negatives masked), optimiser (Adam) and batch size, trained
for the same number of epochs, in the same process:
  * vlr_lib.train.fit: features on the device, batches drawn by index on the device;
  * a plain loop over torch.utils.data.DataLoader(TensorDataset(...), shuffle=True).
Throughput is captions per second of training (evaluation excluded: the
trainer's ``train_seconds``; the first epoch of each is a warm-up and not timed).

Step overhead (issue 25) -- a step of the trainer on features (train_seconds / steps of fit's second
epoch) against its pure compute on pre-built tensors (heads, S, unified loss, backward, Adam), target
<= 1.3x, and the cost of the per-step gradient norm the trainer records (accumulated on the device).

Part 2 -- shapes end to end (CPU): TinyCNN + TextGRU from scratch; wall-clock
seconds until the validation rsum first passes several levels, and the chance
rsum of the validation split.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib import losses, metrics
from vlr_lib.models import LinearHead
from vlr_lib.similarity import positive_mask
from vlr_lib.train import fit, fit_end_to_end


def synthetic(n_images: int, dim: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    img = torch.randn(n_images, dim, generator=g)
    c2i = torch.arange(n_images).repeat_interleave(5)
    txt = img[c2i] @ torch.randn(dim, dim, generator=g) / dim**0.5 + torch.randn(5 * n_images, dim, generator=g)
    return img, txt, c2i


def trainer_throughput(data, epochs: int, batch_size: int, dim: int, device: str) -> float:
    res = fit(*data, "unified", dim=dim, epochs=epochs, batch_size=batch_size, device=device, probe_batch=0,
              progress=False, lr_decay_epoch=epochs)
    timed = res.history[1:]
    return sum(r["steps"] for r in timed) * batch_size / sum(r["train_seconds"] for r in timed)


def dataloader_throughput(data, epochs: int, batch_size: int, dim: int, device: str) -> float:
    img, txt, c2i = data
    ds = torch.utils.data.TensorDataset(img[c2i], txt, c2i)  # the usual way: one row per caption
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    heads = (LinearHead(img.shape[1], dim).to(device), LinearHead(txt.shape[1], dim).to(device))
    opt = torch.optim.Adam([p for h in heads for p in h.parameters()], lr=2e-4)
    seconds, captions = 0.0, 0
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for x_img, x_txt, ids in loader:
            x_img, x_txt, ids = x_img.to(device), x_txt.to(device), ids.to(device)
            mask = positive_mask(ids)
            S = heads[0](x_img) @ heads[1](x_txt).T
            loss = losses.unified(S, pos_mask=mask if int(mask.sum()) > ids.numel() else None)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if epoch:
                captions += ids.numel()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if epoch:
            seconds += time.perf_counter() - t0
    return captions / seconds


def pure_step_seconds(data, steps: int, batch_size: int, dim: int, device: str, grad_norm: bool) -> float:
    """Seconds per step of the pure compute of a trainer step on pre-built batch tensors: heads forward, S,
    unified loss (false negatives masked), backward, Adam step (and, if `grad_norm`, the gradient's total norm accumulated on the
    device, as the trainer records it); no sampling, no masks, no flags."""
    img, txt, c2i = data
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(txt.shape[0], generator=g)[: steps * batch_size].view(steps, batch_size)
    # pre-built, on the device, with the positive mask of a batch that repeats an image (as the trainer masks it)
    batches = [(img[c2i[b]].to(device), txt[b].to(device), positive_mask(c2i[b]).to(device)) for b in order]
    batches = [(x, y, m if int(m.sum()) > m.shape[0] else None) for x, y, m in batches]
    torch.manual_seed(0)
    heads = (LinearHead(img.shape[1], dim).to(device), LinearHead(txt.shape[1], dim).to(device))
    params = [p for h in heads for p in h.parameters()]
    opt = torch.optim.Adam(params, lr=2e-4)
    norms = torch.zeros((), device=device)

    def run(pairs) -> None:
        nonlocal norms
        for x_img, x_txt, mask in pairs:
            S = heads[0](x_img) @ heads[1](x_txt).T
            loss = losses.unified(S, pos_mask=mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_norm:
                norms = norms + torch.nn.utils.get_total_norm([p.grad for p in params])
            opt.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    run(batches[:3])  # warm-up
    t0 = time.perf_counter()
    run(batches)
    return (time.perf_counter() - t0) / len(batches)


def step_overhead(args) -> None:
    """Issue 25, item 2: a trainer step of heads on features against its pure compute (target <= 1.3x)."""
    data = synthetic(args.n_images, args.feat_dim)
    steps = 5 * args.n_images // args.batch_size
    print(f"[step overhead] heads on features: a step of vlr_lib.train.fit against its pure compute (heads, S, "
          f"unified loss, backward, Adam on pre-built tensors), {steps} steps per epoch, batch {args.batch_size}, "
          f"device {args.device}, {torch.get_num_threads()} CPU threads; alternating, {args.repeats} repeats")
    fit_s, pure_s, pure_norm_s = [], [], []
    for _ in range(args.repeats):
        res = fit(*data, "unified", dim=args.dim, epochs=2, batch_size=args.batch_size, device=args.device,
                  probe_batch=0, progress=False, lr_decay_epoch=2)
        rec = res.history[-1]  # the first epoch is a warm-up
        fit_s.append(rec["train_seconds"] / rec["steps"])
        pure_s.append(pure_step_seconds(data, steps, args.batch_size, args.dim, args.device, grad_norm=False))
        pure_norm_s.append(pure_step_seconds(data, steps, args.batch_size, args.dim, args.device, grad_norm=True))
    a, b, c = (statistics.median(x) for x in (fit_s, pure_s, pure_norm_s))
    ratios = [x / y for x, y in zip(fit_s, pure_s)]
    print(f"  trainer step (fit, train_seconds / steps)  {a * 1e3:8.3f} ms  (each: {_fmt_ms(fit_s)})")
    print(f"  pure compute step                          {b * 1e3:8.3f} ms  (each: {_fmt_ms(pure_s)})")
    print(f"  pure compute + gradient norm on device     {c * 1e3:8.3f} ms  (each: {_fmt_ms(pure_norm_s)}); "
          f"the norm costs {(c - b) * 1e3:+.3f} ms per step ({c / b:.2f}x)")
    r = statistics.median(ratios)
    print(f"  ratio trainer / pure compute               {r:8.2f}x  (target <= 1.30x: {'ok' if r <= 1.3 else 'MISSED'}; "
          f"median of the per-repeat ratios {', '.join(f'{x:.2f}' for x in ratios)})")


def _fmt_ms(values) -> str:
    return ", ".join(f"{v * 1e3:.3f}" for v in values)


def part1(args) -> None:
    data = synthetic(args.n_images, args.feat_dim)
    print(f"[features] {args.n_images} images x 5 captions, D={args.feat_dim}, batch {args.batch_size}, "
          f"{args.epochs} epochs (first not timed), device {args.device}")
    ours, plain = [], []
    for _ in range(args.repeats):  # alternate, so that load from other processes hits both alike
        ours.append(trainer_throughput(data, args.epochs, args.batch_size, args.dim, args.device))
        plain.append(dataloader_throughput(data, args.epochs, args.batch_size, args.dim, args.device))
    a, b = statistics.median(ours), statistics.median(plain)
    print(f"  vlr_lib.train.fit          {a:10.0f} captions/s  (median of {args.repeats}: {_fmt(ours)})")
    print(f"  DataLoader(TensorDataset)  {b:10.0f} captions/s  (median of {args.repeats}: {_fmt(plain)})")
    print(f"  ratio fit / DataLoader     {a / b:10.2f}")


def _fmt(values) -> str:
    return ", ".join(f"{v:.0f}" for v in values)


class _Budget(Exception):
    pass


def part2(args) -> None:
    from vlr_lib.data.shapes import make_shapes

    dd = make_shapes(n_train=args.shapes_train, n_val=args.shapes_val, n_test=1, seed=0)
    n_val_caps = sum(len(c) for c in dd["validation"]["caption"])
    chance = metrics.chance_rsum(torch.arange(args.shapes_val).repeat_interleave(n_val_caps // args.shapes_val))
    levels = [2 * chance, 100.0, 200.0, 300.0, 400.0]
    reached: dict[float, float] = {}
    history = []
    t0 = time.perf_counter()

    def watch(record, result):
        elapsed = time.perf_counter() - t0
        history.append((record["epoch"], elapsed, record["rsum"]))
        for level in levels:
            if record["rsum"] >= level and level not in reached:
                reached[level] = elapsed
        if elapsed > args.budget:
            raise _Budget

    print(f"[shapes end to end] {args.shapes_train} train / {args.shapes_val} val images, loss {args.loss}, "
          f"budget {args.budget:.0f} s, CPU threads {torch.get_num_threads()}")
    try:
        fit_end_to_end(dd, args.loss, epochs=args.e2e_epochs, device="cpu", progress=False, callbacks=watch,
                       lr_decay_epoch=args.e2e_epochs)
    except _Budget:
        pass
    every = max(1, len(history) // 15)  # about 15 lines, always the last epoch
    for i, (epoch, elapsed, rsum) in enumerate(history):
        if i % every == 0 or i == len(history) - 1:
            print(f"  epoch {epoch:3d}  {elapsed:7.1f} s  val rsum {rsum:6.1f}")
    best = max(history, key=lambda h: h[2])
    print(f"  best val rsum {best[2]:.1f} at epoch {best[0]} ({best[1]:.1f} s)")
    print(f"  chance rsum (validation, {args.shapes_val} images x 5 captions): {chance:.2f}")
    for level in levels:
        when = f"{reached[level]:.1f} s" if level in reached else "not reached"
        print(f"  rsum >= {level:6.1f}: {when}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--n-images", type=int, default=4000)
    p.add_argument("--feat-dim", type=int, default=512)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3, help="alternating repetitions of each throughput run")
    p.add_argument("--shapes-train", type=int, default=1000)
    p.add_argument("--shapes-val", type=int, default=200)
    p.add_argument("--loss", default="info_nce")
    p.add_argument("--budget", type=float, default=60.0, help="seconds for the end-to-end part")
    p.add_argument("--e2e-epochs", type=int, default=200)
    p.add_argument("--skip-features", action="store_true")
    p.add_argument("--skip-shapes", action="store_true")
    p.add_argument("--skip-overhead", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.n_images, args.feat_dim, args.dim, args.epochs = 500, 64, 32, 2
        args.shapes_train, args.shapes_val, args.budget = 200, 50, 10.0
    if not args.skip_overhead:
        step_overhead(args)
    if not args.skip_features:
        part1(args)
    if not args.skip_shapes:
        part2(args)


if __name__ == "__main__":
    main()
