"""Reading a pre-declared family of paired cells: notebook 03's batch-size and difficulty experiments.

Both experiments train every loss at a few values of one factor (``batch_size``, ``difficulty``) with the same
seeds, so each seed is one initialisation and batch order shared by every cell: differences are paired. A family
is a tuple of (name, a, b, expected sign of a - b or None); each side is a (loss, value) cell or, for an
interaction, a pair of cells whose difference is taken seed by seed. :func:`findings` reads the whole family
through ``stats.verdicts`` (paired 95% t intervals over the seeds, Holm-corrected over the family).
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..report.readings import interval_text
from ..stats import Comparison, verdicts

Family = Sequence[tuple[str, object, object, int | None]]


def by_seed(runs: pd.DataFrame, loss: str, value: float, column: str, metric: str, what: str) -> pd.Series:
    """`metric` of the cell (loss, ``runs[column] == value``) per seed, sorted by seed; a KeyError naming the
    cell (``what``: the factor in words) when the table lacks it."""
    part = runs[(runs["loss"] == loss) & (runs[column].astype(float) == float(value))]
    if part.empty:
        raise KeyError(f"no runs of {loss} at {what} {value:g}")
    return part.set_index("seed")[metric].astype(float).sort_index()


def _side(runs: pd.DataFrame, side, column: str, metric: str, what: str) -> pd.Series:
    if isinstance(side[0], str):
        return by_seed(runs, *side, column, metric, what)
    (a, b) = side
    return by_seed(runs, *a, column, metric, what) - by_seed(runs, *b, column, metric, what)


def findings(runs: pd.DataFrame, family: Family, column: str, metric: str, what: str) -> pd.DataFrame:
    """`family`, read: one row per comparison with ``stats.verdicts``' columns (delta, the uncorrected interval,
    p, p_holm, the Holm-level interval, verdict, uncorrected, expected)."""
    comps = []
    for name, a, b, expected in family:
        x, y = _side(runs, a, column, metric, what), _side(runs, b, column, metric, what)
        comps.append(Comparison(name, x.to_numpy(), y.reindex(x.index).to_numpy(), expected))
    return verdicts(comps, family=[name for name, *_ in family])


def shown(found: pd.DataFrame) -> pd.DataFrame:
    """:func:`findings` as a chapter prints them: the difference of the test rsum with its uncorrected 95% interval
    and the interval at Holm's level beside it, p, Holm's p over the family and the verdict read from it."""
    return pd.DataFrame({
        "comparison": found["name"],
        "a - b [95% interval]": [interval_text(d, lo, hi, "rsum") for d, lo, hi in
                                 zip(found["delta"], found["low"], found["high"])],
        "[Holm interval]": [f"[{lo + 0.0:.1f}, {hi + 0.0:.1f}]" for lo, hi in zip(found["low_holm"], found["high_holm"])],
        "p": found["p"].round(3), "p (Holm)": found["p_holm"].round(3), "verdict": found["verdict"],
    }).set_index("comparison")


__all__ = ["Family", "by_seed", "findings", "shown"]
