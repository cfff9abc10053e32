"""Per-epoch histories and hyperparameter sweeps as tables (notebooks 09 and 11, ``viz.training``)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import registry
from .labels import SETTING_COLUMNS, flatten_record

def history_frame(histories: Mapping[str, object]) -> pd.DataFrame:
    """Histories {run name: list of per-epoch dicts or a DataFrame} as one long table.

    Columns: ``run``, ``epoch`` and every metric (nested COCOS dicts flattened as in
    ``FitResult.frame``), plus ``sim_gap = pos_sim - hardneg_sim`` when both exist.
    Runs keep their order; rows are sorted by epoch within a run.
    """
    if not isinstance(histories, Mapping) or not histories:
        raise ValueError("histories must be a non-empty mapping {run name: history}")
    parts = []
    for name, hist in histories.items():
        frame = hist.copy() if isinstance(hist, pd.DataFrame) else pd.DataFrame([flatten_record(r) for r in hist])
        if frame.empty or "epoch" not in frame:
            raise ValueError(f"histories[{name!r}] must hold at least one epoch with an 'epoch' field")
        frame.insert(0, "run", str(name))
        parts.append(frame.sort_values("epoch", kind="stable"))
    out = pd.concat(parts, ignore_index=True)
    if {"pos_sim", "hardneg_sim"} <= set(out.columns):
        out["sim_gap"] = out["pos_sim"] - out["hardneg_sim"]
    return out


def history_values(history: pd.DataFrame, metric: str, relative: bool = False) -> np.ndarray:
    """One run's `metric` per epoch (its rows of a :func:`history_frame`) as floats, NaN where not recorded.

    `relative` divides by the first finite value: a training loss relative to its start, because the
    losses live on different scales (sums vs means, 1/gamma).
    """
    if metric not in history:
        return np.full(len(history), np.nan)
    y = pd.to_numeric(history[metric], errors="coerce").to_numpy(dtype=float)
    finite = y[np.isfinite(y)]
    return y / finite[0] if relative and finite.size and finite[0] != 0 else y


def loss_rows(runs: pd.DataFrame, loss: str) -> pd.DataFrame:
    """The rows of one loss in a runs table (a ValueError naming the losses it holds otherwise)."""
    if not isinstance(runs, pd.DataFrame) or "loss" not in runs:
        raise TypeError("runs must be a grid's runs table (GridResult.runs) with a 'loss' column")
    rows = runs[runs["loss"] == loss]
    if rows.empty:
        raise ValueError(f"loss {loss!r} has no runs; the table holds {sorted(runs['loss'].unique())}")
    return rows


def loss_means(runs: pd.DataFrame, losses: Sequence[str], metric: str = "rsum") -> dict[str, float]:
    """Each loss of `losses` -> the mean `metric` over all its runs (values that are not numbers left out): the
    reference levels a sweep figure draws."""
    return {loss: float(pd.to_numeric(loss_rows(runs, loss)[metric], errors="coerce").mean()) for loss in losses}


def sweep_values(runs: pd.DataFrame, loss: str) -> dict[str, list]:
    """{parameter: sorted distinct values} of the parameters that vary over the runs of `loss`.

    Parameters are the loss's keyword arguments (``registry.parameters``) and the training
    settings (:data:`SETTING_COLUMNS`) that are columns of `runs` and take two or more values.
    """
    rows = loss_rows(runs, loss)
    names = [p for p in registry.parameters(loss) if p != "reduction"]
    out = {}
    for p in names + [k for k in SETTING_COLUMNS if k not in names]:
        if p in rows:
            values = pd.unique(rows[p].dropna())
            if len(values) > 1:
                out[p] = sorted(values.tolist())
    return out


def sweep_losses(runs: pd.DataFrame) -> list[str]:
    """Losses of the table that have at least one swept parameter (in order of appearance)."""
    return [loss for loss in dict.fromkeys(runs["loss"]) if sweep_values(runs, loss)]


def is_close(column: pd.Series, value) -> np.ndarray:
    """Rows equal to `value` (floats compared with a relative tolerance: values went through JSON/CSV)."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        col = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
        return np.isclose(col, float(value), rtol=1e-9, atol=0.0)
    return (column == value).to_numpy()


def sweep_slice(runs: pd.DataFrame, loss: str, x: str, fixed: Mapping | None = None,
                metric: str = "rsum") -> pd.DataFrame:
    """Mean, std and count over seeds of `metric` per value of `x`, other swept parameters at `fixed`.

    Swept parameters missing from `fixed` are held at their first value. Returns a
    frame with columns x, mean, std (0 for one seed), n, sorted by x.
    """
    values = sweep_values(runs, loss)
    if x not in values:
        raise ValueError(f"x must be a swept parameter of {loss!r}, one of {list(values)}; got {x!r}")
    rows = loss_rows(runs, loss)
    if metric not in rows:
        raise ValueError(f"metric {metric!r} is not a column of runs")
    fixed = dict(fixed or {})
    unknown = sorted(set(fixed) - set(values))
    if unknown:
        raise ValueError(f"fixed has {unknown}, not swept parameters of {loss!r} ({list(values)})")
    mask = np.ones(len(rows), dtype=bool)
    for p, vals in values.items():
        if p != x:
            mask &= is_close(rows[p], fixed.get(p, vals[0]))
    sub = rows[mask]
    y = pd.to_numeric(sub[metric], errors="coerce")
    g = y.groupby(sub[x].to_numpy())
    out = pd.DataFrame({"mean": g.mean(), "std": g.std().fillna(0.0), "n": g.size()})
    return out.rename_axis(x).reset_index().sort_values(x, kind="stable", ignore_index=True)


def sweep_grid(runs: pd.DataFrame, loss: str, x: str, y: str, metric: str = "rsum") -> pd.DataFrame:
    """Mean `metric` over seeds on the grid of two swept parameters of `loss` (e.g. margin x gamma).

    Rows are the values of `y`, columns those of `x` (both sorted, :func:`sweep_values`); a
    combination without runs is NaN.
    """
    values = sweep_values(runs, loss)
    for name, p in (("x", x), ("y", y)):
        if p not in values:
            raise ValueError(f"{name} must be a swept parameter of {loss!r}, one of {list(values)}; got {p!r}")
    if x == y:
        raise ValueError("x and y must be different parameters")
    rows = loss_rows(runs, loss)
    if metric not in rows:
        raise ValueError(f"metric {metric!r} is not a column of runs")
    z = np.full((len(values[y]), len(values[x])), np.nan)
    for i, yv in enumerate(values[y]):
        for j, xv in enumerate(values[x]):
            cell = is_close(rows[x], xv) & is_close(rows[y], yv)
            if cell.any():
                z[i, j] = float(pd.to_numeric(rows[metric][cell], errors="coerce").mean())
    return pd.DataFrame(z, index=pd.Index(values[y], name=y), columns=pd.Index(values[x], name=x))
