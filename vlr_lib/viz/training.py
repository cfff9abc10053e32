"""Figures of notebooks 09 and 11: training curves per epoch (Li et al. Figs. 3-4) and sweeps (Fig. 5).

Builders are pure: histories (``FitResult.history`` lists or ``FitResult.frame()`` tables) or a grid's runs table
(``GridResult.runs``) in, a ``go.Figure`` out. The tables behind them are ``vlr_lib.report.sweeps``'s
(``history_frame``, ``history_values``, ``sweep_values``, ``sweep_slice``, ``sweep_grid``); each builder's docstring
says which figure of the paper it draws.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .._checks import check_choice
from ..report.labels import metric_label
from ..report.sweeps import history_frame, history_values, is_close, loss_means, sweep_grid, sweep_slice, sweep_values
from .readout import fmt
from ._style import (HARDEST, NEUTRAL, PALETTE, POSITIVE, SEQUENTIAL, SYMBOL, fitted_range, frame_best, level_line,
                     panels, position, style)

# --------------------------------------------------------------------------- histories


def _runs(runs: Sequence[str] | str | None, names: list[str]) -> list[str]:
    """The runs to draw: `runs` (one name or several, each one of `names`), or all of them."""
    if runs is None:
        return names
    return [check_choice("runs", n, tuple(names)) for n in ([runs] if isinstance(runs, str) else runs)]


def run_colors(names: Sequence[str]) -> dict[str, str]:
    """One fixed colour per run name, in order (the same run keeps its colour in every figure)."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def curves_figure(
    histories: Mapping[str, object],
    metrics: Sequence[str] = ("loss", "rsum"),
    runs: Sequence[str] | None = None,
    relative_loss: bool = True,
    chance: float | None = None,
    subtitle: str | None = None,
) -> go.Figure:
    """Per-epoch curves (Li et al. Fig. 3): one panel per metric, one line per run (`subtitle` under the title).

    `histories`: {run name: history} (see ``report.sweeps.history_frame``); `runs` selects and orders the runs drawn
    (default all; colours stay tied to the position in `histories`). `relative_loss` divides each training loss by its
    first recorded value, because the losses live on different scales (sums vs means, 1/gamma). A `chance` rsum is
    drawn as a dashed line on the rsum panel, "grad_norm" on a log axis. Every run gets a trace in every panel, so a
    run toggled off is an invisible trace and the figure's structure depends only on `metrics`.
    """
    frame = history_frame(histories)
    names = list(dict.fromkeys(frame["run"]))
    shown = set(_runs(runs, names))
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    colors = run_colors(names)
    if not metrics:
        return style(go.Figure(), "choose at least one metric", height=300, xaxis="epoch", legend=False)
    titles = [("relative " if m == "loss" and relative_loss else "") + metric_label(m) for m in metrics]
    # more than three metrics wrap onto a new row
    fig, cols, height = panels(titles, 3, first_px=380, row_px=300, column_gap_px=60)
    label = ", ".join(n for n in names if n in shown)
    if len(label) > 60 or not label:
        label = f"{len(shown)} of {len(names)} runs"
    style(fig, f"Training curves: {label}", height=height, subtitle=subtitle)
    for k, metric in enumerate(metrics):
        row, col = position(k, cols)
        relative = relative_loss and metric == "loss"
        for name in names:
            sub = frame[frame["run"] == name]
            y = history_values(sub, metric, relative)
            fig.add_trace(go.Scatter(x=sub["epoch"].to_numpy(dtype=float), y=y, mode="lines+markers", name=name,
                                     legendgroup=name, showlegend=k == 0, line=dict(color=colors[name]),
                                     visible=name in shown), row=row, col=col)
        fig.update_xaxes(title_text="epoch", row=row, col=col)
        fig.update_yaxes(type="log" if metric == "grad_norm" else "linear", row=row, col=col)  # norms span 10^4
        if metric == "rsum" and chance is not None:
            fig.add_hline(y=float(chance), line_dash="dash", line_color=NEUTRAL, row=row, col=col,
                          annotation_text="chance", annotation_position="bottom right")
    return fig


def similarity_figure(histories: Mapping[str, object], runs: Sequence[str] | None = None,
                      subtitle: str | None = None) -> go.Figure:
    """Mean positive vs mean hardest-negative similarity per epoch, one panel per run (Li et al. Fig. 4).

    Blue squares: ``pos_sim``, vermillion diamonds: ``hardneg_sim`` (``vlr_lib.train.evaluate``: per validation image,
    its captions' mean similarity and its most similar wrong caption). The shaded band between them is the gap; the
    y-axes are shared.
    """
    frame = history_frame(histories)
    names = _runs(runs, list(dict.fromkeys(frame["run"])))
    for col in ("pos_sim", "hardneg_sim"):
        if col not in frame:
            raise ValueError(f"histories must record {col} (train with a validation split)")
    fig, cols, height = panels(names or ["no run selected"], 3, first_px=380, row_px=300, shared_yaxes=True,
                               column_gap_px=30)
    style(fig, "Positive vs hardest-negative similarity on the validation split", height=height, subtitle=subtitle)
    for k, name in enumerate(names):
        row, col = position(k, cols)
        sub = frame[frame["run"] == name]
        x = sub["epoch"].to_numpy(dtype=float)
        for key, color, symbol, label in (("hardneg_sim", HARDEST, SYMBOL["hardest"], "hardest negative"),
                                          ("pos_sim", POSITIVE, SYMBOL["positive"], "positive")):
            fig.add_trace(
                go.Scatter(x=x, y=history_values(sub, key), mode="lines+markers", name=label,
                           legendgroup=key, showlegend=k == 0, line=dict(color=color), marker=dict(symbol=symbol),
                           fill="tonexty" if key == "pos_sim" else None, fillcolor="rgba(127,127,127,0.15)"),
                row=row, col=col,
            )
        fig.update_xaxes(title_text="epoch", row=row, col=col)
        if col == 1:
            fig.update_yaxes(title_text="cosine similarity", row=row, col=col)
    return fig


# --------------------------------------------------------------------------- sweeps


def _slice_label(fixed: Mapping) -> str:
    return ", ".join(f"{k} = {fmt(v)}" for k, v in fixed.items())


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

    The slice chosen by `fixed` (the other swept parameters; see ``report.sweeps.sweep_slice``) is drawn bold with
    error bars; every other slice of a two-parameter sweep is a faint line, so the reader sees where the chosen one
    sits. `references` are other losses of the table drawn as dashed horizontal lines at their mean `metric` (e.g.
    "triplet_hardest", the gamma -> infinity limit); `chance` adds the chance rsum when `metric` is rsum. `log_x`
    (None: automatic when x spans >= 20x). The y-axis fits the slices and the references (chance, far below, is noted
    at the axis, never drawn there: it would flatten every slice).
    """
    values = sweep_values(runs, loss)
    fixed = {p: (fixed or {}).get(p, vals[0]) for p, vals in values.items() if p != x}
    main = sweep_slice(runs, loss, x, fixed, metric)
    fig = go.Figure()
    shown = [main["mean"] - main["std"].fillna(0), main["mean"] + main["std"].fillna(0)]  # what the y-axis fits
    if len(fixed) == 1:  # a two-parameter sweep: every other slice, faint
        (p, at), = fixed.items()
        rest = [v for v in values[p] if not is_close(pd.Series([v]), at)[0]]
        for i, v in enumerate(rest):
            s = sweep_slice(runs, loss, x, {p: v}, metric)
            shown.append(s["mean"])
            fig.add_trace(go.Scatter(x=s[x], y=s["mean"], mode="lines", name=f"other {p} values",
                                     line=dict(color=NEUTRAL, width=1), opacity=0.35, showlegend=i == 0,
                                     legendgroup="others",
                                     hovertemplate=f"{p} = {fmt(v)}<br>{x} = %{{x}}<br>{metric} = %{{y:.2f}}"))
    fig.add_trace(go.Scatter(
        x=main[x], y=main["mean"], mode="lines+markers", name=_slice_label(fixed) or loss,
        error_y=dict(type="data", array=main["std"].to_numpy(), visible=True),
        line=dict(color=PALETTE[0], width=3),
    ))
    for i, (ref, y) in enumerate(loss_means(runs, references, metric).items()):
        shown.append(pd.Series([y]))
        fig.add_hline(y=y, line_dash="dash", line_color=PALETTE[(i + 1) % len(PALETTE)],
                      annotation_text=ref, annotation_position="top left")
    title = f"{loss}: {metric_label(metric)} vs {x}" + (f" at {_slice_label(fixed)}" if fixed else "")
    span = fitted_range(pd.concat(shown, ignore_index=True).astype(float))
    style(fig, title, height=420, xaxis=x, yaxis=metric_label(metric), yaxis_range=span)
    if chance is not None and metric == "rsum":
        level_line(fig, float(chance), f"chance {float(chance):.1f}", "y", span)
    v = np.asarray([float(a) for a in values[x]], dtype=float)
    if log_x or (log_x is None and v.size > 2 and (v > 0).all() and v.max() / v.min() >= 20):
        fig.update_xaxes(type="log")
    return fig


def sweep_heatmap(runs: pd.DataFrame, loss: str, x: str, y: str, metric: str = "rsum") -> go.Figure:
    """Mean `metric` over seeds on the grid of two swept parameters of `loss` (e.g. margin x gamma).

    Cells are placed by rank (equal spacing, labelled with the values); the best cell is outlined. Missing
    combinations stay empty (NaN).
    """
    cells = sweep_grid(runs, loss, x, y, metric)
    z = cells.to_numpy()
    text = [[("" if np.isnan(v) else f"{v:.1f}") for v in row] for row in z]
    xl, yl = [fmt(v) for v in cells.columns], [fmt(v) for v in cells.index]
    fig = go.Figure(go.Heatmap(z=z, x=xl, y=yl, colorscale=SEQUENTIAL, text=text, texttemplate="%{text}",
                               textfont=dict(size=12), colorbar=dict(title=dict(text=metric)), hoverongaps=False))
    frame_best(fig, z)
    return style(fig, f"{loss}: mean {metric_label(metric)} over {x} × {y}", height=420, xaxis=x, yaxis=y,
                 legend=False, xaxis_type="category", yaxis_type="category")
