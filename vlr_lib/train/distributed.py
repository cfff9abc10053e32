"""Data-parallel training with torch.distributed (torchrun, or any initialised process group).

Entry points (``python -m vlr_lib train|grid|showdown`` and ``vlr-train`` / ``vlr-grid``) run
inside :func:`process_group`: under torchrun (``WORLD_SIZE > 1``) it initialises the group
(nccl on CUDA, gloo on the CPU), gives each rank its device from ``LOCAL_RANK``, and tears the
group down on exit and on error. ``--batch-size`` stays the *global* batch, as in open_clip:
each rank embeds its ``batch_size / world`` share (``engine._train_epoch``).

Every loss of the workbook is a function of the whole batch similarity matrix S:
each query's negatives are the other examples of the batch. Splitting a batch
of N over R ranks must therefore not split S into R small blocks. Each rank
embeds its N/R examples, all-gathers the embeddings of every rank -- *with
gradients* -- and evaluates the loss on the full N x N matrix, so all ranks hold
the same loss as one process with the whole batch.

Gradients. Let L be that common loss and e_r the embeddings of rank r. Each
rank's autograd produces dL/de for *all* gathered embeddings; the backward of
the gather sums these over ranks (an all_reduce, i.e. a reduce-scatter when
only the own slice is kept) and keeps the own slice: R * dL/de_r. Averaging the
parameter gradients over ranks (as DistributedDataParallel does) then gives
(1/R) * sum_r R * dL/de_r * de_r/dtheta = dL/dtheta, the single-process gradient.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .device import default_device, parse_device

#: Seconds a collective may wait for the other ranks before failing (a dead rank must not hang the rest).
DEFAULT_TIMEOUT_S = 600.0


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank_and_world() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside a process group."""
    if not is_distributed():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


class _GatherWithGrad(torch.autograd.Function):
    """all_gather along dim 0 whose backward is the all_reduce of the gradient, own slice kept."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        rank, world = rank_and_world()
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        ctx.slice = (rank * x.shape[0], (rank + 1) * x.shape[0])
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)  # gloo has no reduce_scatter; the own slice of the sum is the same
        a, b = ctx.slice
        return grad[a:b]


def gather_with_grad(x: Tensor) -> Tensor:
    """Concatenate `x` from every rank (rank order) keeping the autograd graph; identity on one process.

    Every rank must pass a tensor of the same shape.
    """
    return _GatherWithGrad.apply(x) if is_distributed() else x


def average_gradients(modules: list[nn.Module]) -> None:
    """Average parameter gradients over ranks (what DistributedDataParallel does), one flat all_reduce."""
    if not is_distributed():
        return
    grads = [p.grad for m in modules for p in m.parameters() if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def broadcast_modules(modules: list[nn.Module]) -> None:
    """Give every rank rank 0's parameters (same seed already makes them equal; this makes it certain)."""
    if not is_distributed():
        return
    for m in modules:
        for t in list(m.parameters()) + list(m.buffers()):
            dist.broadcast(t.data, src=0)


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def broadcast_object(obj: Any) -> Any:
    """Rank 0's `obj` on every rank (a picklable object, e.g. an epoch's history record); identity on one process."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def env_world_size() -> int:
    """WORLD_SIZE as torchrun sets it (1 when not launched by torchrun)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ValueError(f"WORLD_SIZE must be an integer, got {os.environ['WORLD_SIZE']!r}") from None


def rank_device(device: str | torch.device | None) -> torch.device:
    """This rank's device: ``cuda`` (or None with a GPU) becomes ``cuda:LOCAL_RANK`` under torchrun."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device is None:
        return default_device(None)
    dev = parse_device(device)
    if dev.type == "cuda" and dev.index is None and env_world_size() > 1:
        dev = parse_device(torch.device("cuda", local))
    return dev


@contextmanager
def process_group(device: str | torch.device | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[torch.device]:
    """Run the block as one rank of the torchrun job when ``WORLD_SIZE > 1``; yields this rank's device.

    Initialises the default process group from torchrun's environment (nccl when the rank's
    device is CUDA, gloo otherwise) with a timeout of `timeout_s` seconds for every
    collective, sets the CUDA device, and destroys the group when the block ends, normally or
    not. Outside torchrun (or when a group already exists) it only resolves the device.
    """
    dev = rank_device(device)
    if env_world_size() <= 1 or dist.is_initialized():
        yield dev
        return
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", timeout=timedelta(seconds=timeout_s))
    try:
        yield dev
        dist.barrier()  # tear down together: a rank leaving while rank 0 still writes aborts gloo's threads
    finally:
        dist.destroy_process_group()
