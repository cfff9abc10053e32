"""Paired comparisons of two losses over seeds: the 95% interval the lessons and the showdown read their verdicts from.

Two losses trained with the same seed share their initialisation and their batches, so the
per-seed difference a_s - b_s removes what the seed does to both; its mean and a paired
t interval (Student, 1908; any statistics text, e.g. Wasserman, *All of Statistics*, sec. 10.6)
say how sure the difference is. "holds" / "reverses" / "cannot tell" is then read from the
interval: entirely on the papers' side, entirely against it, or straddling zero.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Student t quantiles t_{0.975, df} for df = 1..30 (two-sided 95%); beyond, the Cornish-Fisher expansion.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
_Z975 = 1.959964
VERDICTS = ("holds", "reverses", "cannot tell")


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` >= 1 degrees of freedom (3 decimals)."""
    if isinstance(df, bool) or not isinstance(df, (int, np.integer)) or df < 1:
        raise ValueError(f"df must be an integer >= 1, got {df!r}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def paired_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(mean difference, low, high): the paired t 95% interval of a - b over matched seeds.

    With one pair the interval is unbounded (-inf, inf): one seed cannot tell. A NaN is an error.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"a and b must be equally long, non-empty sequences, got shapes {a.shape} and {b.shape}")
    d = a - b
    if not np.isfinite(d).all():
        raise ValueError("a and b must be finite numbers (a run without a result cannot be compared)")
    mean = float(d.mean())
    if d.size == 1:
        return mean, -math.inf, math.inf
    half = t_quantile_975(d.size - 1) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return mean, mean - half, mean + half


def verdict(low: float, high: float, expected: int) -> str:
    """"holds" when the interval lies on the `expected` side of 0 (+1: a > b, -1: a < b), "reverses" when it lies
    on the other side, else "cannot tell"."""
    if expected not in (1, -1):
        raise ValueError(f"expected must be +1 or -1, got {expected!r}")
    if low > 0 or high < 0:
        return "holds" if (low > 0) == (expected > 0) else "reverses"
    return "cannot tell"
