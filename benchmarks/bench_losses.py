"""Loss speed benchmark: every ratio is against a baseline timed in the same run.

For N in {128, 256, 1024, 4096} and D = 512 it prints, per loss (the two-way losses in both
directions, the row-wise ones -- sampled/cross-example softmax, SmoothAP -- over rows, as
the library defines each):
- loss-only forward+backward on a given S, as a ratio to the matmul S = img @ txt.T that makes S,
  forward+backward (its forward and the two products of its backward: 3.2 GFLOP at N = 1024), the
  target of issue 25 beside it: <= 1.25x at N = 1024, <= 2x at N = 4096, and "ok" or "MISSED";
  also the ratio to the matmul's forward alone. The loss and the matmul are timed alternately,
  call by call, and each ratio is the median of the per-pair ratios, so that load from other
  processes on a shared CPU hits both alike;
- end to end from the embeddings (normalise, S, loss, backward), beside
  pytorch-metric-learning's equivalent where one exists (target: ratio <= 1);
- every GOAL combination (3 triplet x 5 pair weights) on S, with the same ratios and target;
- goal_objective beside autograd through the closed-form loss with the same gradient
  (target: ratio <= 1).
An N that does not fit in memory is reported in one line and skipped; the benchmark never fails.
Run: `make bench` (or `python benchmarks/bench_losses.py --sizes 128 1024`; `--profile` adds a
torch.profiler table per loss at the first size).
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
        "cross_example_topk10%": lambda S: L.cross_example_softmax(S, topk=0.1),
        "sampled_softmax_topk50%": lambda S: L.sampled_softmax(S, topk=0.5),
        "smooth_ap": lambda S: L.smooth_ap(S),
        # Learned scalars as the trainer holds them (0-D tensors that receive a gradient).
        "clip_learned": lambda S: L.clip_learned(S, _learned(L.CLIP_LOGIT_SCALE_INIT)),
        "siglip": lambda S: L.siglip(S, _learned(L.SIGLIP_LOGIT_SCALE_INIT), _learned(L.SIGLIP_LOGIT_BIAS_INIT)),
    }


def _learned(value: float) -> torch.Tensor:
    return torch.tensor(value, requires_grad=True)


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


#: Issue 25's targets for a loss's forward+backward on S, as a ratio to the matmul's forward+backward.
TARGETS = {1024: 1.25, 4096: 2.0}
#: Fewest alternating pairs per ratio (--min-reps).
MIN_REPS = 5


def paired_ratio(fn: Callable[[], object], base: Callable[[], object], device: torch.device, min_time: float = 0.4,
                 max_reps: int = 25) -> tuple[float, float, float]:
    """(median seconds of fn, median seconds of base, median of the per-pair ratios fn/base), the two called
    alternately after a warm-up of each."""
    cuda = device.type == "cuda"

    def once(f) -> float:
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        f()
        if cuda:
            torch.cuda.synchronize(device)
        return time.perf_counter() - t0

    fn(), base()
    a: list[float] = []
    b: list[float] = []
    start = time.perf_counter()
    while len(a) < MIN_REPS or (time.perf_counter() - start < min_time and len(a) < max_reps):
        b.append(once(base))
        a.append(once(fn))
    ratios = [x / y for x, y in zip(a, b)]
    return statistics.median(a), statistics.median(b), statistics.median(ratios)


def goal_losses() -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Every GOAL combination at its defaults (ms_form="ms-loss")."""
    return {f"goal({t},{p})": (lambda t, p: lambda S: G.goal_objective(S, t, p))(t, p)
            for t in G.GOAL_TRIPLETS for p in G.GOAL_PAIRS}


def _verdict(ratio: float, n: int) -> str:
    target = TARGETS.get(n)
    return f"{'':>10}" if target is None else f"{target:>7.2f}x {'ok' if ratio <= target else 'MISSED':<7}"


def bench_size(n: int, d: int, device: torch.device, skip_pml_above: int, mm_backward: bool = True,
               e2e: bool = True) -> None:
    """Print one table for this N; each row as soon as it is measured."""
    g = torch.Generator(device="cpu").manual_seed(0)
    img = torch.randn(n, d, generator=g).to(device).requires_grad_()
    txt = torch.randn(n, d, generator=g).to(device).requires_grad_()
    S0 = similarity(img.detach(), txt.detach())
    grad = torch.randn(n, n, generator=g).to(device)
    mm_fwd = lambda: img.detach() @ txt.detach().T  # noqa: E731

    def mm_fb() -> None:
        (img @ txt.T).backward(grad)
        img.grad = txt.grad = None

    t_mm, t_fb, _ = paired_ratio(mm_fwd, mm_fb, device)
    show = lambda line: print(line, flush=True)  # noqa: E731
    show(f"\nN = {n}, D = {d}, device = {device.type}: matmul S = img @ txt.T takes {t_mm * 1e3:.2f} ms, "
         f"forward+backward {t_fb * 1e3:.2f} ms")
    header = (f"{'loss':<28}{'fwd+bwd on S':>14}{'/ mm f+b':>10}{'target':>10} {'':<7}{'/ mm fwd':>10}")
    show(header + (f"{'from emb.':>12}{'PML':>12}{'ours/PML':>10}" if e2e else ""))
    pml = {k: fn for k, (fn, max_n) in pml_equivalents().items() if n <= min(max_n, skip_pml_above)}

    def row(name: str, fn: Callable, with_e2e: bool) -> None:
        S = S0.clone().requires_grad_()

        def step() -> None:
            fn(S).backward()
            S.grad = None

        t_loss, _, r_fb = paired_ratio(step, mm_fb, device)
        _, _, r_fwd = paired_ratio(step, mm_fwd, device)
        line = f"{name:<28}{t_loss * 1e3:>11.2f} ms{r_fb:>9.2f}x{_verdict(r_fb, n)}{r_fwd:>9.2f}x"
        if with_e2e:
            t_e2e = timeit(lambda: fn(similarity(img, txt)).backward(), device)
            img.grad = txt.grad = None
            line += f"{t_e2e * 1e3:>9.2f} ms"
            if name in pml:
                t_pml = timeit(lambda: pml[name](img, txt).backward(), device, min_time=0.0, max_reps=3)
                img.grad = txt.grad = None
                line += f"{t_pml * 1e3:>9.2f} ms{t_e2e / t_pml:>9.2f}x"
        show(line)

    for name, fn in closed_form_losses().items():
        row(name, fn, e2e)
    show("every GOAL combination (goal_objective on S, defaults):")
    for name, fn in goal_losses().items():
        row(name, fn, False)
    for label, goal_fn, loss_fn in goal_pairs():
        S = S0.clone().requires_grad_()
        t_goal = timeit(lambda: goal_fn(S).backward(), device)
        t_ref = timeit(lambda: loss_fn(S).backward(), device)
        show(f"{label:<36}{t_goal * 1e3:>9.2f} ms vs {t_ref * 1e3:.2f} ms  ratio {t_goal / t_ref:.2f}x")


def profile_losses(n: int, d: int, device: torch.device, rows: int = 6) -> None:
    """A torch.profiler table per loss: forward+backward on S at this N, self CPU time of the top ops."""
    from torch.profiler import ProfilerActivity, profile

    g = torch.Generator(device="cpu").manual_seed(0)
    S0 = similarity(torch.randn(n, d, generator=g), torch.randn(n, d, generator=g)).to(device)
    for name, fn in {**closed_form_losses(), **goal_losses()}.items():
        S = S0.clone().requires_grad_()
        fn(S).backward()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=activities) as prof:
            for _ in range(3):
                fn(S).backward()
        print(f"\n[profile] {name}, N = {n}, 3 calls of forward+backward")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows,
                                        max_name_column_width=38), flush=True)


def _out_of_memory(exc: BaseException) -> bool:
    """A CUDA out-of-memory error, or the CPU allocator's refusal."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc))


def bench_size_if_it_fits(n: int, d: int, device: torch.device, skip_pml_above: int, mm_backward: bool = True,
                          e2e: bool = True) -> bool:
    """:func:`bench_size`, or one line saying that N does not fit the device's memory (False)."""
    try:
        bench_size(n, d, device, skip_pml_above, mm_backward, e2e)
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
    parser.add_argument("--no-e2e", action="store_true", help="only the loss on S (no end-to-end, no PML columns)")
    parser.add_argument("--profile", action="store_true", help="a torch.profiler table per loss at the first size")
    parser.add_argument("--cpu-only", action="store_true")
    parser.add_argument("--min-reps", type=int, default=MIN_REPS, help="fewest alternating pairs per ratio")
    args = parser.parse_args()
    globals()["MIN_REPS"] = args.min_reps
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() and not args.cpu_only
                                       else [])
    import os
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}), load average {os.getloadavg()[0]:.1f} at the start")
    for device in devices:
        if args.profile:
            profile_losses(args.sizes[0], args.dim, device)
        for n in args.sizes:
            bench_size_if_it_fits(n, args.dim, device, args.skip_pml_above, e2e=not args.no_e2e)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
