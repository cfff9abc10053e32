"""Figures of notebooks 09 and 11: training curves per epoch and hyperparameter sweeps.

Builders are pure: histories (``FitResult.history`` lists or ``FitResult.frame()``
tables) or a grid's runs table (``GridResult.runs``) in, a ``go.Figure`` out.

- :func:`curves_figure` -- one panel per metric, one line per run, against the epoch
  (Li et al. Fig. 3: loss and RSUM per epoch);
- :func:`similarity_figure` -- mean positive vs mean hardest-negative similarity per
  epoch, one panel per run (Li et al. Fig. 4);
- :func:`sweep_figure` -- a metric (mean +- std over seeds) against one loss
  parameter with the others fixed, every other slice faint (Li et al. Fig. 5);
- :func:`sweep_heatmap` -- a metric over a two-parameter grid (m x gamma).
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ._style import NEGATIVE, NEUTRAL, PALETTE, POSITIVE, SEQUENTIAL, layout

#: Metrics a history row carries (``vlr_lib.train.fit``) plus the derived ``sim_gap``.
METRIC_LABELS = {
    "loss": "training loss",
    "rsum": "validation rsum",
    "i2t_r1": "i2t R@1",
    "i2t_r5": "i2t R@5",
    "i2t_r10": "i2t R@10",
    "t2i_r1": "t2i R@1",
    "t2i_r5": "t2i R@5",
    "t2i_r10": "t2i R@10",
    "map5": "i2t mAP@5",
    "pr_auc": "PR-AUC (all pairs)",
    "pos_sim": "mean positive similarity",
    "hardneg_sim": "mean hardest-negative similarity",
    "sim_gap": "positive − hardest negative",
    "best_rsum": "best validation rsum",
    "train_loss": "final training loss",
}
#: Columns of a grid's runs table that are never loss parameters.
_NOT_PARAMS = {"S", "pos_mask", "reduction", "weights"}


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


# --------------------------------------------------------------------------- histories


def history_frame(histories: Mapping[str, object]) -> pd.DataFrame:
    """Histories {run name: list of per-epoch dicts or a DataFrame} as one long table.

    Columns: ``run``, ``epoch`` and every metric (nested COCOS dicts flattened as in
    ``FitResult.frame``), plus ``sim_gap = pos_sim - hardneg_sim`` when both exist.
    Runs keep their order; rows are sorted by epoch within a run.
    """
    from ..train.engine import flatten_record

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


def _metric_values(frame: pd.DataFrame, metric: str, relative_loss: bool) -> np.ndarray:
    """One run's metric per epoch as floats (NaN where missing); the loss divided by its first finite value."""
    if metric not in frame:
        return np.full(len(frame), np.nan)
    y = pd.to_numeric(frame[metric], errors="coerce").to_numpy(dtype=float)
    if metric == "loss" and relative_loss:
        finite = y[np.isfinite(y)]
        if finite.size and finite[0] != 0:
            y = y / finite[0]
    return y


def _check_names(what: str, names: Sequence[str] | None, allowed: Sequence[str]) -> list[str]:
    if names is None:
        return list(allowed)
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise ValueError(f"{what} has {unknown}, not among {list(allowed)}")
    return list(names)


def run_colors(names: Sequence[str]) -> dict[str, str]:
    """One fixed colour per run name, in order (the same run keeps its colour in every figure)."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def curves_figure(
    histories: Mapping[str, object],
    metrics: Sequence[str] = ("loss", "rsum"),
    runs: Sequence[str] | None = None,
    relative_loss: bool = True,
    chance: float | None = None,
) -> go.Figure:
    """Per-epoch curves (Li et al. Fig. 3): one panel per metric, one line per run.

    `histories`: {run name: history} (see :func:`history_frame`); `runs` selects and
    orders the runs drawn (default all; colours stay tied to the position in
    `histories`). `relative_loss` divides each training loss by its first recorded
    value, because the losses live on different scales (sums vs means, 1/gamma). A
    `chance` rsum is drawn as a dashed line on the rsum panel. Every run gets a
    trace in every panel, so a run toggled off is an invisible trace and the
    figure's structure depends only on `metrics`.
    """
    frame = history_frame(histories)
    names = list(dict.fromkeys(frame["run"]))
    shown = set(_check_names("runs", runs, names))
    if isinstance(metrics, str):
        metrics = [metrics]
    metrics = list(metrics)
    colors = run_colors(names)
    if not metrics:
        fig = go.Figure()
        fig.update_layout(**layout("choose at least one metric", "epoch"))
        return fig
    titles = [("relative " if m == "loss" and relative_loss else "") + metric_label(m) for m in metrics]
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=titles, horizontal_spacing=0.08)
    label = ", ".join(n for n in names if n in shown)
    if len(label) > 60 or not label:
        label = f"{len(shown)} of {len(names)} runs"
    fig.update_layout(**layout(f"Training curves: {label}", height=380))  # before the axes: layout() resets titles
    for col, metric in enumerate(metrics, start=1):
        for name in names:
            sub = frame[frame["run"] == name]
            fig.add_trace(
                go.Scatter(
                    x=sub["epoch"].to_numpy(dtype=float), y=_metric_values(sub, metric, relative_loss),
                    mode="lines+markers", name=name, legendgroup=name, showlegend=col == 1,
                    line=dict(color=colors[name]), visible=name in shown,
                ),
                row=1, col=col,
            )
        fig.update_xaxes(title_text="epoch", row=1, col=col)
        if metric == "rsum" and chance is not None:
            fig.add_hline(y=float(chance), line_dash="dash", line_color=NEUTRAL, row=1, col=col,
                          annotation_text="chance", annotation_position="bottom right")
    return fig


def similarity_figure(histories: Mapping[str, object], runs: Sequence[str] | None = None) -> go.Figure:
    """Mean positive vs mean hardest-negative similarity per epoch, one panel per run (Li et al. Fig. 4).

    Green: ``pos_sim``, red: ``hardneg_sim`` (``vlr_lib.train.evaluate``: per validation
    image, its captions' mean similarity and its most similar wrong caption). The
    shaded band between them is the gap; the y-axes are shared.
    """
    frame = history_frame(histories)
    names = _check_names("runs", runs, list(dict.fromkeys(frame["run"])))
    for col in ("pos_sim", "hardneg_sim"):
        if col not in frame:
            raise ValueError(f"histories must record {col} (train with a validation split)")
    fig = make_subplots(rows=1, cols=max(1, len(names)), subplot_titles=names or ["no run selected"],
                        shared_yaxes=True, horizontal_spacing=0.04)
    fig.update_layout(**layout("Positive vs hardest-negative similarity on the validation split", height=360))
    for col, name in enumerate(names, start=1):
        sub = frame[frame["run"] == name]
        x = sub["epoch"].to_numpy(dtype=float)
        for key, color, label in (("hardneg_sim", NEGATIVE, "hardest negative"), ("pos_sim", POSITIVE, "positive")):
            fig.add_trace(
                go.Scatter(x=x, y=_metric_values(sub, key, False), mode="lines+markers", name=label,
                           legendgroup=key, showlegend=col == 1, line=dict(color=color),
                           fill="tonexty" if key == "pos_sim" else None, fillcolor="rgba(127,127,127,0.15)"),
                row=1, col=col,
            )
        fig.update_xaxes(title_text="epoch", row=1, col=col)
    fig.update_yaxes(title_text="cosine similarity", row=1, col=1)
    return fig


# --------------------------------------------------------------------------- sweeps


def _loss_rows(runs: pd.DataFrame, loss: str) -> pd.DataFrame:
    if not isinstance(runs, pd.DataFrame) or "loss" not in runs:
        raise TypeError("runs must be a grid's runs table (GridResult.runs) with a 'loss' column")
    rows = runs[runs["loss"] == loss]
    if rows.empty:
        raise ValueError(f"loss {loss!r} has no runs; the table holds {sorted(runs['loss'].unique())}")
    return rows


def _candidate_params(loss: str) -> list[str]:
    """Loss parameters by the loss's signature (``vlr_lib.losses.LOSSES``) plus the training settings."""
    from ..losses import LOSSES
    from ..train.grid_search import FIT_KEYS

    fn = LOSSES.get(loss)
    names = [p for p in inspect.signature(fn).parameters if p not in _NOT_PARAMS] if fn is not None else []
    return names + [k for k in FIT_KEYS if k not in names]


def sweep_values(runs: pd.DataFrame, loss: str) -> dict[str, list]:
    """{parameter: sorted distinct values} of the parameters that vary over the runs of `loss`.

    Parameters are the loss's keyword arguments (and the training settings of
    ``grid``'s FIT_KEYS) that are columns of `runs` and take two or more values.
    """
    rows = _loss_rows(runs, loss)
    out = {}
    for p in _candidate_params(loss):
        if p in rows:
            values = pd.unique(rows[p].dropna())
            if len(values) > 1:
                out[p] = sorted(values.tolist())
    return out


def sweep_losses(runs: pd.DataFrame) -> list[str]:
    """Losses of the table that have at least one swept parameter (in order of appearance)."""
    return [loss for loss in dict.fromkeys(runs["loss"]) if sweep_values(runs, loss)]


def _close(column: pd.Series, value) -> np.ndarray:
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
    rows = _loss_rows(runs, loss)
    if metric not in rows:
        raise ValueError(f"metric {metric!r} is not a column of runs")
    fixed = dict(fixed or {})
    unknown = sorted(set(fixed) - set(values))
    if unknown:
        raise ValueError(f"fixed has {unknown}, not swept parameters of {loss!r} ({list(values)})")
    mask = np.ones(len(rows), dtype=bool)
    for p, vals in values.items():
        if p != x:
            at = fixed.get(p, vals[0])
            mask &= _close(rows[p], at)
    sub = rows[mask]
    y = pd.to_numeric(sub[metric], errors="coerce")
    g = y.groupby(sub[x].to_numpy())
    out = pd.DataFrame({"mean": g.mean(), "std": g.std().fillna(0.0), "n": g.size()})
    return out.rename_axis(x).reset_index().sort_values(x, kind="stable", ignore_index=True)


def fmt(value) -> str:
    """A parameter value for labels: numbers with %g, anything else as str."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return str(value)


def _slice_label(fixed: Mapping) -> str:
    return ", ".join(f"{k} = {fmt(v)}" for k, v in fixed.items())


def _use_log(values: Sequence[float], log_x: bool | None) -> bool:
    if log_x is not None:
        return bool(log_x)
    v = np.asarray([float(a) for a in values], dtype=float)
    return bool(v.size > 2 and (v > 0).all() and v.max() / v.min() >= 20)


def sweep_figure(
    runs: pd.DataFrame,
    loss: str,
    x: str,
    fixed: Mapping | None = None,
    metric: str = "rsum",
    references: Sequence[str] = (),
    chance: float | None = None,
    log_x: bool | None = None,
) -> go.Figure:
    """`metric` (mean +- std over seeds) against parameter `x` of `loss` (Li et al. Fig. 5).

    The slice chosen by `fixed` (the other swept parameters; see :func:`sweep_slice`)
    is drawn bold with error bars; every other slice of a two-parameter sweep is a
    faint line, so the reader sees where the chosen one sits. `references` are other
    losses of the table drawn as dashed horizontal lines at their mean `metric`
    (e.g. "triplet_hardest", the gamma -> infinity limit); `chance` adds the chance
    rsum when `metric` is rsum. `log_x` (None: automatic when x spans >= 20x).
    """
    values = sweep_values(runs, loss)
    fixed = {p: (fixed or {}).get(p, vals[0]) for p, vals in values.items() if p != x}
    main = sweep_slice(runs, loss, x, fixed, metric)
    fig = go.Figure()
    others = [p for p in values if p != x]
    if len(others) == 1:
        p = others[0]
        rest = [v for v in values[p] if not _close(pd.Series([v]), fixed[p])[0]]
        for i, v in enumerate(rest):
            s = sweep_slice(runs, loss, x, {p: v}, metric)
            fig.add_trace(go.Scatter(x=s[x], y=s["mean"], mode="lines", name=f"other {p} values",
                                     line=dict(color=NEUTRAL, width=1), opacity=0.35, showlegend=i == 0,
                                     legendgroup="others",
                                     hovertemplate=f"{p} = {fmt(v)}<br>{x} = %{{x}}<br>{metric} = %{{y:.2f}}"))
    fig.add_trace(go.Scatter(
        x=main[x], y=main["mean"], mode="lines+markers", name=_slice_label(fixed) or loss,
        error_y=dict(type="data", array=main["std"].to_numpy(), visible=True),
        line=dict(color=PALETTE[0], width=3),
    ))
    ref_names = list(references)
    for i, ref in enumerate(ref_names):
        y = float(pd.to_numeric(_loss_rows(runs, ref)[metric], errors="coerce").mean())
        fig.add_hline(y=y, line_dash="dash", line_color=PALETTE[(i + 1) % len(PALETTE)],
                      annotation_text=ref, annotation_position="top left")
    if chance is not None and metric == "rsum":
        fig.add_hline(y=float(chance), line_dash="dot", line_color=NEUTRAL,
                      annotation_text="chance", annotation_position="bottom left")
    title = f"{loss}: {metric_label(metric)} vs {x}" + (f" at {_slice_label(fixed)}" if fixed else "")
    fig.update_layout(**layout(title, x, metric_label(metric), height=380, showlegend=True))
    if _use_log(values[x], log_x):
        fig.update_xaxes(type="log")
    return fig


def sweep_heatmap(runs: pd.DataFrame, loss: str, x: str, y: str, metric: str = "rsum") -> go.Figure:
    """Mean `metric` over seeds on the grid of two swept parameters of `loss` (e.g. margin x gamma).

    Cells are placed by rank (equal spacing, labelled with the values); the best cell
    is outlined. Missing combinations stay empty (NaN).
    """
    values = sweep_values(runs, loss)
    for name, p in (("x", x), ("y", y)):
        if p not in values:
            raise ValueError(f"{name} must be a swept parameter of {loss!r}, one of {list(values)}; got {p!r}")
    if x == y:
        raise ValueError("x and y must be different parameters")
    rows = _loss_rows(runs, loss)
    xs, ys = values[x], values[y]
    z = np.full((len(ys), len(xs)), np.nan)
    for i, yv in enumerate(ys):
        for j, xv in enumerate(xs):
            m = _close(rows[x], xv) & _close(rows[y], yv)
            if m.any():
                z[i, j] = float(pd.to_numeric(rows[metric][m], errors="coerce").mean())
    text = [[("" if math.isnan(v) else f"{v:.1f}") for v in row] for row in z]
    xl, yl = [fmt(v) for v in xs], [fmt(v) for v in ys]
    fig = go.Figure(go.Heatmap(z=z, x=xl, y=yl, colorscale=SEQUENTIAL, text=text, texttemplate="%{text}",
                               colorbar=dict(title=metric), hoverongaps=False))
    if np.isfinite(z).any():
        i, j = np.unravel_index(np.nanargmax(z), z.shape)
        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                      line=dict(color=NEGATIVE, width=3))
    fig.update_layout(**layout(f"{loss}: mean {metric_label(metric)} over {x} x {y}", x, y, height=380))
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    return fig
