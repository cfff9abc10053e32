"""Input validation shared by every public function of vlr_lib.

Every check raises a ValueError (or TypeError for a wrong type) whose message
starts with the argument's name, so a student sees at once which knob is wrong.

Checks of tensor *values* (finite entries, a positive and a negative for every query,
the positions of a mask's positives) read the tensor on the host: on a GPU each one
waits for every queued kernel. A caller that validated its inputs once and watches for
NaN itself -- the trainer, whose step loop must not synchronise -- runs inside
:func:`validated`, where those checks are skipped (type, shape and parameter checks stay)
and the positives of a mask it describes are taken from it. Direct callers keep every check.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import Tensor

from .env import check_choice  # noqa: F401 - re-exported: the checks import it from here

REDUCTIONS = ("sum", "mean", "none")


def check_tensor(name: str, x: object, ndim: int | None = None) -> Tensor:
    """A floating-point tensor of `ndim` dimensions with only finite values."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(x.shape)}")
    if not torch.is_floating_point(x):
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.is_meta:  # a shape without values: every check and formula below would fail in .item()
        raise ValueError(f"{name} is a meta tensor (a shape without values); create it on cpu or cuda")
    if x.numel() and values_checked() and not _all_finite(x):
        raise ValueError(f"{name} contains NaN or inf")
    return x


def _all_finite(x: Tensor) -> bool:
    """Whether every entry of `x` is finite, in one read of it: its min and max are finite exactly then
    (min and max propagate NaN). ``torch.isfinite(x).all()`` writes a bool tensor of x's size first,
    which on the CPU cost as much as a whole loss on S (docs/benchmarks.md, 2026-11-26)."""
    if x.is_complex():
        return bool(torch.isfinite(x).all())
    lo, hi = torch.aminmax(x.detach())
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


@dataclass(frozen=True)
class _Validated:
    pos_mask: Tensor | None
    pairs: tuple[Tensor, Tensor] | None
    pairs_t: tuple[Tensor, Tensor] | None


_VALIDATED: ContextVar[_Validated | None] = ContextVar("vlr_lib_validated", default=None)


@contextmanager
def validated(
    pos_mask: Tensor | None = None,
    pairs: tuple[Tensor, Tensor] | None = None,
    pairs_t: tuple[Tensor, Tensor] | None = None,
) -> Iterator[None]:
    """Inside the block, skip the checks of tensor values: the caller validated its inputs and watches for NaN.

    For the trainer's step loop, which must never wait for the device: finiteness (of S and of
    the losses' results), every query having a positive and a negative, and -- for `pos_mask`
    -- the ``nonzero`` that locates its positives. `pairs` are the (rows, cols) of
    ``pos_mask.nonzero()`` (row-major) and `pairs_t` those of ``pos_mask.T``, worked out by the
    caller without a synchronisation; check_similarity takes them for that mask (or a view of
    it with the same storage) and calls nonzero for any other mask.
    """
    token = _VALIDATED.set(_Validated(pos_mask, pairs, pairs_t))
    try:
        yield
    finally:
        _VALIDATED.reset(token)


def values_checked() -> bool:
    """False inside :func:`validated`: the per-call checks of tensor values are the caller's job."""
    return _VALIDATED.get() is None


def _known_pairs(mask: Tensor) -> tuple[Tensor, Tensor] | None:
    """The positives of `mask` given to :func:`validated` (for the mask or its transpose), else None."""
    given = _VALIDATED.get()
    if given is None or given.pos_mask is None or mask.data_ptr() != given.pos_mask.data_ptr():
        return None
    if mask.shape == given.pos_mask.shape and mask.stride() == given.pos_mask.stride():
        return given.pairs
    if mask.shape == given.pos_mask.T.shape and mask.stride() == given.pos_mask.T.stride():
        return given.pairs_t
    return None


def check_int(name: str, value: object, low: int = 1, high: int | None = None) -> int:
    """An integer (Python or numpy, never bool) in [low, high]; the one integer check of vlr_lib."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f" and <= {high}" if high is not None else ""
        raise ValueError(f"{name} must be >= {low}{bound}, got {value}")
    return int(value)


def check_finite(name: str, value: object) -> float:
    """A finite real number (a threshold, the lambda of GOAL's sigmoid weights)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return float(value)


def check_positive(name: str, value: float) -> float:
    """A finite number > 0 (temperatures, scales, gamma, tau)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return float(value)


def check_nonnegative(name: str, value: float) -> float:
    """A finite number >= 0 (margins, thresholds)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return float(value)


def check_scalar(name: str, value: object, like: Tensor, low: float | None = None,
                 high: float | None = None) -> Tensor:
    """A finite number or 0-D floating-point tensor (a learned temperature or bias), within [low, high] where
    given, as a 0-D tensor of `like`'s dtype and device. A tensor stays in the graph: gradients reach it.

    A tensor's range is checked in its own dtype, before the cast: a float32 parameter that ``clamp_`` left at
    the bound passes. Inside :func:`validated` a tensor's value is not read (no wait for the device).
    """
    if isinstance(value, Tensor):
        check_tensor(name, value, ndim=0)
        if values_checked() and not _within(value, low, high):
            raise ValueError(f"{name} must lie in {_interval(low, high)}, got {float(value.detach()):g}")
        return value.to(dtype=like.dtype, device=like.device)
    v = check_finite(name, value)
    if not _within(v, low, high):
        raise ValueError(f"{name} must lie in {_interval(low, high)}, got {v:g}")
    return torch.tensor(v, dtype=like.dtype, device=like.device)


def _within(value: float | Tensor, low: float | None, high: float | None) -> bool:
    return (low is None or bool(value >= low)) and (high is None or bool(value <= high))


def _interval(low: float | None, high: float | None) -> str:
    return f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"


def check_reduction(reduction: str) -> str:
    return check_choice("reduction", reduction, REDUCTIONS)


class Positives:
    """Which entries of S are positives, in the form the losses need.

    rows[p], cols[p] locate positive pair p (image rows[p], caption cols[p]);
    `neg` is True where an entry is a negative. `diagonal` marks the default
    layout (one caption per image, positives on the diagonal), which lets the
    losses skip gathers -- and the N x N mask: in that layout `neg` is built
    only when something reads it (the losses' diagonal paths index the diagonal
    instead).
    """

    __slots__ = ("rows", "cols", "diagonal", "_neg")

    def __init__(self, rows: Tensor, cols: Tensor, neg: Tensor | None, diagonal: bool) -> None:
        if neg is None and not diagonal:
            raise ValueError("neg may be left out (None) only in the diagonal layout")
        self.rows, self.cols, self.diagonal, self._neg = rows, cols, diagonal, neg

    @property
    def neg(self) -> Tensor:
        if self._neg is None:  # the diagonal layout: every off-diagonal entry
            n = self.rows.numel()
            self._neg = ~torch.eye(n, dtype=torch.bool, device=self.rows.device)
        return self._neg

    @property
    def count(self) -> int:
        return int(self.rows.numel())

    def transposed(self) -> "Positives":
        """The same pairs seen from the columns (caption -> image queries)."""
        return Positives(self.cols, self.rows, None if self._neg is None else self._neg.T, self.diagonal)


def check_similarity(S: object, pos_mask: object = None, both_directions: bool = True) -> tuple[Tensor, Positives]:
    """Validate the similarity-matrix contract and locate the positives.

    S is [n_images, n_captions]; without `pos_mask` it must be square with the
    positives on its diagonal. Every query (every row, and every column when
    `both_directions`) needs at least one positive and one negative.
    """
    S = check_tensor("S", S, ndim=2)
    n_rows, n_cols = S.shape
    if pos_mask is None:
        if n_rows != n_cols:
            raise ValueError(
                f"S must be square when pos_mask is None (positives on the diagonal), got shape {tuple(S.shape)}"
            )
        if n_rows < 2:
            raise ValueError(f"S must be at least 2x2 so that every query has a negative, got shape {tuple(S.shape)}")
        idx = torch.arange(n_rows, device=S.device)
        return S, Positives(idx, idx, None, diagonal=True)
    if not isinstance(pos_mask, Tensor):
        raise TypeError(f"pos_mask must be a bool torch.Tensor, got {type(pos_mask).__name__}")
    if pos_mask.dtype != torch.bool:
        raise TypeError(f"pos_mask must have dtype torch.bool, got {pos_mask.dtype}")
    if pos_mask.shape != S.shape:
        raise ValueError(f"pos_mask must have the shape of S {tuple(S.shape)}, got {tuple(pos_mask.shape)}")
    pos_mask = pos_mask.to(S.device)
    if values_checked():
        _check_queries(pos_mask, "row")
        if both_directions:
            _check_queries(pos_mask.T, "column")
    rows, cols = _known_pairs(pos_mask) or pos_mask.nonzero(as_tuple=True)
    return S, Positives(rows, cols, ~pos_mask, diagonal=False)


def _check_queries(mask: Tensor, what: str) -> None:
    n_pos = mask.sum(dim=1)
    if bool((n_pos == 0).any()):
        bad = int((n_pos == 0).nonzero()[0])
        raise ValueError(f"pos_mask has a {what} without positives ({what} {bad}); every query needs one")
    if bool((n_pos == mask.shape[1]).any()):
        bad = int((n_pos == mask.shape[1]).nonzero()[0])
        raise ValueError(f"pos_mask has a {what} without negatives ({what} {bad}); every query needs one")


def reduce(per_pair: Tensor, reduction: str) -> Tensor:
    """Sum, mean over positive pairs, or the per-pair values themselves."""
    if reduction == "sum":
        return per_pair.sum()
    if reduction == "mean":
        return per_pair.mean()
    return per_pair
