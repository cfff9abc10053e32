"""The one statistical rule of the workbook: paired 95% t intervals over seeds, Holm-corrected over a declared family.

Two losses trained with the same seed share their initialisation and their batches, so the
per-seed difference a_s - b_s removes what the seed does to both; its mean and a paired
t interval (Student, 1908; any statistics text, e.g. Wasserman, *All of Statistics*, sec. 10.6)
say how sure the difference is. A notebook that reads several comparisons at once declares them
first, as a *family*: the chance that at least one of them looks real by luck grows with their
number, and Holm's step-down method (Holm, "A simple sequentially rejective multiple test
procedure", Scand. J. Statist. 6, 1979) keeps that chance under 5% for the family as a whole.
Every verdict word is read from the Holm-corrected test (:func:`verdicts`):

- with a claimed direction (a paper says a > b): "holds" / "reverses" / "cannot tell";
- without one (a ranking): "ahead" / "behind" / "not told apart" -- "not told apart" says the
  seeds cannot order the two, never that they are equal.

A comparison outside the declared family is refused: it is exploratory, and may be shown with its
uncorrected interval (:func:`paired_test`) but not given a verdict.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Student t quantiles t_{0.975, df} for df = 1..30 (two-sided 95%); beyond, the Cornish-Fisher expansion.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
_Z975 = 1.959964
ALPHA = 0.05
VERDICTS = ("holds", "reverses", "cannot tell")
RANK_VERDICTS = ("ahead", "behind", "not told apart")


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` >= 1 degrees of freedom (3 decimals)."""
    _check_df(df)
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _check_df(df: int) -> None:
    if isinstance(df, bool) or not isinstance(df, (int, np.integer)) or df < 1:
        raise ValueError(f"df must be an integer >= 1, got {df!r}")


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with an integer `df` >= 1, exactly.

    Abramowitz & Stegun 26.7.3 (odd df) and 26.7.4 (even df): with theta = atan(|t| / sqrt(df)),
    P(|T| < |t|) is a finite sum of powers of cos(theta).
    """
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t must be a number, got nan")
    if math.isinf(t):
        return 0.0
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd: (2/pi)(theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ... up to cos^(df-3)))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 3) // 2 + 1):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        inside = 2 / math.pi * (theta + s * math.cos(theta) * total)
    else:  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ... up to cos^(df-2))
        term = total = 1.0
        for k in range(1, (df - 2) // 2 + 1):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = s * total
    return min(1.0, max(0.0, 1.0 - inside))


def t_quantile(p_two_sided: float, df: int) -> float:
    """The t with P(|T| >= t) = `p_two_sided` (0 < p <= 1), by bisection on :func:`t_two_sided_p`."""
    if not 0.0 < p_two_sided <= 1.0:
        raise ValueError(f"p_two_sided must lie in (0, 1], got {p_two_sided!r}")
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > p_two_sided:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if t_two_sided_p(mid, df) > p_two_sided:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * high:
            break
    return (low + high) / 2


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"a and b must be equally long, non-empty sequences, got shapes {a.shape} and {b.shape}")
    d = a - b
    if not np.isfinite(d).all():
        raise ValueError("a and b must be finite numbers (a run without a result cannot be compared)")
    return d


def paired_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(mean difference, low, high): the paired t 95% interval of a - b over matched seeds.

    With one pair the interval is unbounded (-inf, inf): one seed cannot tell. A NaN is an error.
    """
    d = _differences(a, b)
    mean = float(d.mean())
    if d.size == 1:
        return mean, -math.inf, math.inf
    half = t_quantile_975(d.size - 1) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return mean, mean - half, mean + half


def paired_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p value of the paired t test of a - b = 0 (1.0 with one pair; 0.0 when every seed differs
    by the same non-zero amount)."""
    d = _differences(a, b)
    if d.size == 1:
        return 1.0
    se = float(d.std(ddof=1)) / math.sqrt(d.size)
    mean = float(d.mean())
    if se == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    return t_two_sided_p(mean / se, d.size - 1)


def holm(pvalues: Iterable[float]) -> np.ndarray:
    """Holm's step-down adjusted p values, in the order given (Holm 1979).

    Sorted ascending, the k-th smallest of m p values is multiplied by m - k + 1, capped at 1, and
    never smaller than the adjusted value before it. A comparison is significant at level alpha for the
    family exactly when its adjusted p is below alpha.
    """
    p = np.asarray(list(pvalues), dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("pvalues must be a non-empty sequence of numbers")
    if not ((p >= 0) & (p <= 1)).all():
        raise ValueError(f"pvalues must lie in [0, 1], got {p.tolist()}")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.maximum.accumulate(stepped)
    return out


@dataclass(frozen=True)
class Comparison:
    """One comparison of a family: `a` and `b` per seed (same seeds, same order), `expected` the claimed sign of
    a - b (+1, -1) or None for no claim (then the verdict reads "ahead" / "behind" / "not told apart")."""
    name: str
    a: Sequence[float]
    b: Sequence[float]
    expected: int | None = None


def _verdict_word(sign: float, significant: bool, expected: int | None) -> str:
    if expected is None:
        return ("ahead" if sign > 0 else "behind") if significant else "not told apart"
    if not significant:
        return "cannot tell"
    return "holds" if (sign > 0) == (expected > 0) else "reverses"


def verdicts(comparisons: Sequence[Comparison], family: Sequence[str], alpha: float = ALPHA) -> pd.DataFrame:
    """The family's comparisons, Holm-corrected: one row per comparison, in the family's order.

    `family` names every comparison read together, declared before the numbers are looked at; each
    must be given once in `comparisons`, and a comparison whose name is not in `family` is refused
    (it is exploratory). Columns: ``name``, ``n`` (seeds), ``delta`` (mean a - b), ``low`` / ``high``
    (the uncorrected paired t 95% interval), ``p`` and ``p_holm``, ``low_holm`` / ``high_holm`` (the
    interval at the level Holm tested it, 1 - alpha * p / p_holm: it excludes 0 exactly when the
    corrected test does), ``verdict`` (read from ``p_holm``) and ``uncorrected`` (the same words read
    from the uncorrected interval), ``expected``.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if isinstance(family, str) or not family or len(set(family)) != len(family):
        raise ValueError("family must be a non-empty sequence of distinct comparison names")
    given: dict[str, Comparison] = {}
    for c in comparisons:
        if not isinstance(c, Comparison):
            raise TypeError(f"comparisons must be vlr_lib.stats.Comparison, got {type(c).__name__}")
        if c.name not in family:
            raise ValueError(f"comparison {c.name!r} is not in the declared family {list(family)}: it is exploratory; "
                             "show its uncorrected interval (stats.paired_interval) and give it no verdict")
        if c.name in given:
            raise ValueError(f"comparison {c.name!r} is given twice")
        if c.expected not in (None, 1, -1):
            raise ValueError(f"expected of {c.name!r} must be +1, -1 or None, got {c.expected!r}")
        given[c.name] = c
    missing = [name for name in family if name not in given]
    if missing:
        raise ValueError(f"the family's comparisons {missing} were not given: Holm's correction needs them all")
    rows = []
    for name in family:
        c = given[name]
        delta, low, high = paired_interval(c.a, c.b)
        rows.append({"name": name, "n": len(c.a), "delta": delta, "low": low, "high": high,
                     "p": paired_p(c.a, c.b), "expected": c.expected})
    out = pd.DataFrame(rows)
    out["expected"] = pd.Series([given[n].expected for n in family], dtype=object)  # None stays None, not NaN
    out["p_holm"] = holm(out["p"])
    bounds = [_holm_interval(given[r.name], r.p, r.p_holm, alpha) for r in out.itertuples()]
    out["low_holm"] = np.minimum([b[0] for b in bounds], out["low"])  # never narrower than the uncorrected one
    out["high_holm"] = np.maximum([b[1] for b in bounds], out["high"])
    expected = [given[n].expected for n in family]
    out["verdict"] = [_verdict_word(d, ph < alpha, e) for d, ph, e in zip(out["delta"], out["p_holm"], expected)]
    out["uncorrected"] = [_verdict_word(d, p < alpha, e) for d, p, e in zip(out["delta"], out["p"], expected)]
    return out


def _holm_interval(c: Comparison, p: float, p_holm: float, alpha: float) -> tuple[float, float]:
    d = _differences(c.a, c.b)
    mean = float(d.mean())
    if d.size == 1:
        return -math.inf, math.inf
    se = float(d.std(ddof=1)) / math.sqrt(d.size)
    if se == 0.0:
        return mean, mean
    half = t_quantile(alpha * p / p_holm, d.size - 1) * se
    return mean - half, mean + half


def verdict(low: float, high: float, expected: int) -> str:
    """"holds" when the interval lies on the `expected` side of 0 (+1: a > b, -1: a < b), "reverses" when it lies
    on the other side, else "cannot tell". One comparison alone: a family reads :func:`verdicts`."""
    if expected not in (1, -1):
        raise ValueError(f"expected must be +1 or -1, got {expected!r}")
    if low > 0 or high < 0:
        return "holds" if (low > 0) == (expected > 0) else "reverses"
    return "cannot tell"
