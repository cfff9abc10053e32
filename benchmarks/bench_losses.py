"""Loss speed benchmark: every ratio is against a baseline timed in the same run.

For N in {128, 1024, 4096} and D = 512 it prints, per loss (the two-way losses in both
directions, the row-wise ones -- sampled/cross-example softmax, SmoothAP -- over rows, as
the library defines each):
- loss-only forward+backward on a given S, as a ratio to the matmul S = img @ txt.T
  (target at N = 1024: <= 3x);
- end to end from the embeddings (normalise, S, loss, backward), beside
  pytorch-metric-learning's equivalent where one exists (target: ratio <= 1);
- goal_objective beside autograd through the closed-form loss with the same gradient
  (target: ratio <= 1).
Run: `make bench` (or `python benchmarks/bench_losses.py --sizes 128 1024`).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import torch

from vlr_lib import goal as G
from vlr_lib import losses as L
from vlr_lib.similarity import similarity


def timeit(fn: Callable[[], object], device: torch.device, min_time: float = 0.3, max_reps: int = 50) -> float:
    """Median seconds of fn() after one warm-up call (on CUDA: between CUDA events, each call awaited)."""
    cuda = device.type == "cuda"

    def once() -> float:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    fn()
    if cuda:
        torch.cuda.synchronize(device)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < min_time and len(times) < max_reps):
        times.append(once())
    return statistics.median(times)


def closed_form_losses() -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    return {
        "triplet_all": lambda S: L.triplet_all(S),
        "triplet_hardest": lambda S: L.triplet_hardest(S),
        "info_nce": lambda S: L.info_nce(S),
        "unified": lambda S: L.unified(S),
        # Row-wise losses as the library defines them: one direction (rows as queries).
        "sampled_softmax": lambda S: L.sampled_softmax(S),
        "sampled_softmax_topk8": lambda S: L.sampled_softmax(S, topk=8),
        "cross_example_softmax": lambda S: L.cross_example_softmax(S),
        "cross_example_topk50%": lambda S: L.cross_example_softmax(S, topk=0.5),
        "sampled_softmax_topk50%": lambda S: L.sampled_softmax(S, topk=0.5),
        "goal(cir,sig-ms)": lambda S: G.goal_objective(S, "cir", "sig-ms"),
        "smooth_ap": lambda S: L.smooth_ap(S),
    }


def pml_equivalents() -> dict[str, tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], int]]:
    """Both directions, as in tests/core/test_peers.py (where the mappings are proven), each with the
    largest N it is timed at: NTXentLoss's cost grows much faster than N^2 (one call at N = 1024
    did not finish in 8 minutes on a 2-core CPU), the triplet losses run to N = 1024."""
    try:
        from pytorch_metric_learning import losses as pl, miners as pm
        from pytorch_metric_learning.distances import CosineSimilarity
        from pytorch_metric_learning.reducers import SumReducer
    except ImportError:  # pragma: no cover
        return {}

    def two_way(loss, miner=None):
        def run(img, txt):
            labels = torch.arange(img.shape[0], device=img.device)
            total = 0.0
            for a, c in ((img, txt), (txt, img)):
                ref = labels.clone()
                idx = miner(a, labels, c, ref) if miner else None
                total = total + loss(a, labels, indices_tuple=idx, ref_emb=c, ref_labels=ref)
            return total

        return run

    cos = CosineSimilarity()
    return {
        "info_nce": (two_way(pl.NTXentLoss(temperature=0.1)), 256),
        "triplet_hardest": (
            two_way(pl.TripletMarginLoss(0.2, distance=cos, reducer=SumReducer()), pm.BatchHardMiner(distance=cos)),
            1024,
        ),
        "triplet_all": (two_way(pl.TripletMarginLoss(0.2, distance=cos, reducer=SumReducer())), 1024),
    }


def goal_pairs() -> list[tuple[str, Callable, Callable]]:
    """goal_objective beside autograd through the closed-form loss of the same gradient."""
    # Xuan eq. 6, the hard-negative NCA loss, is softplus(tau (s_neg - s_pos)) per query:
    # sampled softmax with scale tau over the top-1 negative, in both directions.
    tau = 10.0
    return [
        ("goal(con,con) vs triplet_hardest", lambda S: G.goal_objective(S, "con", "con"), lambda S: L.triplet_hardest(S)),
        (
            "goal(nca,con) vs hard-negative NCA",
            lambda S: G.goal_objective(S, "nca", "con", tau=tau),
            lambda S: L.sampled_softmax(S, tau, topk=1, reduction="sum") + L.sampled_softmax(S.T, tau, 1, "sum"),
        ),
    ]


def bench_size(n: int, d: int, device: torch.device, skip_pml_above: int, mm_backward: bool = False) -> None:
    """Print one table for this N; each row as soon as it is measured.

    `mm_backward`: also time the matmul forward+backward (the two products of its backward against a
    given gradient) and add each loss's ratio to it as a column.
    """
    g = torch.Generator(device="cpu").manual_seed(0)
    img = torch.randn(n, d, generator=g).to(device).requires_grad_()
    txt = torch.randn(n, d, generator=g).to(device).requires_grad_()
    S0 = similarity(img.detach(), txt.detach())
    t_mm = timeit(lambda: img.detach() @ txt.detach().T, device)
    show = lambda line: print(line, flush=True)  # noqa: E731
    line = f"\nN = {n}, D = {d}, device = {device.type}: matmul S = img @ txt.T takes {t_mm * 1e3:.2f} ms"
    if mm_backward:
        grad = torch.randn(n, n, generator=g).to(device)
        t_fb = timeit(lambda: (img @ txt.T).backward(grad), device)
        del grad
        img.grad = txt.grad = None
        line += f", forward+backward {t_fb * 1e3:.2f} ms"
    show(line)
    show(f"{'loss':<28}{'fwd+bwd on S':>14}{'/ matmul':>10}" + (f"{'/ mm f+b':>10}" if mm_backward else "")
         + f"{'from emb.':>12}{'PML':>12}{'ours/PML':>10}")
    pml = {k: fn for k, (fn, max_n) in pml_equivalents().items() if n <= min(max_n, skip_pml_above)}
    for name, fn in closed_form_losses().items():
        S = S0.clone().requires_grad_()
        t_loss = timeit(lambda: fn(S).backward(), device)
        t_e2e = timeit(lambda: fn(similarity(img, txt)).backward(), device)
        row = f"{name:<28}{t_loss * 1e3:>11.2f} ms{t_loss / t_mm:>9.2f}x"
        row += (f"{t_loss / t_fb:>9.2f}x" if mm_backward else "") + f"{t_e2e * 1e3:>9.2f} ms"
        if name in pml:
            t_pml = timeit(lambda: pml[name](img, txt).backward(), device, min_time=0.0, max_reps=3)
            row += f"{t_pml * 1e3:>9.2f} ms{t_e2e / t_pml:>9.2f}x"
        show(row)
    for label, goal_fn, loss_fn in goal_pairs():
        S = S0.clone().requires_grad_()
        t_goal = timeit(lambda: goal_fn(S).backward(), device)
        t_ref = timeit(lambda: loss_fn(S).backward(), device)
        show(f"{label:<36}{t_goal * 1e3:>9.2f} ms vs {t_ref * 1e3:.2f} ms  ratio {t_goal / t_ref:.2f}x")


def _out_of_memory(exc: BaseException) -> bool:
    """A CUDA out-of-memory error, or the CPU allocator's refusal."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc))


def bench_size_if_it_fits(n: int, d: int, device: torch.device, skip_pml_above: int, mm_backward: bool = False) -> bool:
    """:func:`bench_size`, or one line saying that N does not fit the device's memory (False)."""
    try:
        bench_size(n, d, device, skip_pml_above, mm_backward)
        return True
    except (RuntimeError, MemoryError) as exc:
        if not (isinstance(exc, MemoryError) or _out_of_memory(exc)):
            raise
    gc.collect()
    where = device.type
    if device.type == "cuda":
        torch.cuda.empty_cache()
        total = torch.cuda.get_device_properties(device).total_memory
        where = f"{torch.cuda.get_device_name(device)}, {total / 2**30:.0f} GiB"
    print(f"N = {n}: does not fit in the memory of {device} ({where}); skipped (rows above, if any, were measured)",
          flush=True)
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 1024, 4096])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--skip-pml-above", type=int, default=4096, help="no PML timings above this N")
    args = parser.parse_args()
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    for device in devices:
        for n in args.sizes:
            bench_size_if_it_fits(n, args.dim, device, args.skip_pml_above)


if __name__ == "__main__":
    main()
