"""Figures of notebook 10, the loss showdown (:func:`metric_errorbars`, :func:`goal_heatmaps`, :func:`cocos_heatmap`):
pure functions from a summary table to a ``go.Figure``. The numbers come from ``vlr_lib.report``
(``summary.summarize``, ``readings.ranking``, ``layouts.goal_matrix``, ``summary.cocos_summary``); these only draw.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..report.labels import METRIC_LABELS, check_metric, mean_std, table1_name
from ..report.layouts import goal_matrix
from ..report import readings
from .._checks import check_choice
from ..goal import GOAL_PAIRS, GOAL_TRIPLETS
from ._style import (ACCENT, FONT_PX, NEUTRAL, PALETTE, SEQUENTIAL, fitted_range, frame_best, grid, level_line,
                     style, symmetric_range)

__all__ = ["metric_errorbars", "goal_heatmaps", "cocos_heatmap"]


def metric_errorbars(summary: pd.DataFrame, metric: str = "rsum", group: str = "all",
                     chance: float | None = None, checkpoint: str | None = None) -> go.Figure:
    """Mean ± std over seeds per configuration, best at the top; colour = relation to the best.

    Green diamond: the highest mean; sky-blue circles: bars that overlap its bar; grey crosses: bars clear of it. That
    is a picture of the spread, not a test (which losses the seeds tell apart: ``report.readings.separations``). The
    shaded band is the best's mean ± std; `chance` draws the chance level (rsum only); `checkpoint` (e.g. "last
    epoch") says in the title which epoch of each run is shown.
    """
    rank = readings.ranking(readings.group(summary, group), metric)
    kinds = np.where(rank["rank"] == 1, "best", np.where(rank["overlaps_best"], "tied", "separated"))
    looks = {"best": (ACCENT, "diamond", "best"), "tied": (PALETTE[2], "circle", "bar overlaps the best's"),
             "separated": (NEUTRAL, "x", "bar clear of the best's")}  # colour, marker, legend
    fig = go.Figure()
    for kind, (colour, symbol, label) in looks.items():
        part = rank[kinds == kind]
        fig.add_trace(go.Scatter(
            x=part["mean"], y=part["name"], mode="markers", name=label,
            marker=dict(color=colour, symbol=symbol, size=10),
            error_x=dict(type="data", array=part["std"], visible=True, color=colour),
            customdata=np.stack([part["std"], part["rank"]], axis=1) if len(part) else None,
            hovertemplate="%{y}<br>%{x:.3f} ± %{customdata[0]:.3f} (rank %{customdata[1]})<extra></extra>",
        ))
    best = rank.iloc[0]
    fig.add_vrect(x0=best["mean"] - best["std"], x1=best["mean"] + best["std"], fillcolor=ACCENT, opacity=0.12,
                  line_width=0)
    # zoomed to the bars, never stretched to chance: far below trained models it would squash them together
    span = fitted_range(np.concatenate([rank["mean"] - rank["std"], rank["mean"] + rank["std"]]))
    label = METRIC_LABELS[metric]
    title = f"{label} per loss, mean ± std over seeds ({group}{f', {checkpoint}' if checkpoint else ''})"
    style(fig, title, height=max(340, 26 * len(rank) + 170), xaxis=label, margin=dict(l=160), xaxis_range=span)
    if chance is not None:
        level_line(fig, float(chance), f"chance {chance:.1f}", "x", span)
    fig.update_yaxes(categoryorder="array", categoryarray=list(rank["name"])[::-1])
    return fig


def goal_heatmaps(summary: pd.DataFrame, metric: str = "r1", color: str = "mean") -> go.Figure:
    """The GOAL grid as annotated heatmaps, Xuan & Chen Tables 3-5 layout (rows P, columns T).

    ``metric="r1"``: two panels, i2t R@1 and t2i R@1 (the papers' tables); any key of
    ``report.labels.TABLE1_COLUMNS``: one panel. Cells show "mean ± std" and the loss of Table 1 where the combination
    is one. ``color="mean"`` colours by the mean; ``"delta"`` by the difference to (T^con, P^con), the triplet
    baseline of the paper (Table 2), on a diverging scale; panels share one colour scale. A green frame (a layout
    shape named "best <metric>") marks each panel's best cell.
    """
    check_choice("color", color, ("mean", "delta"))
    panels = ["i2t_r1", "t2i_r1"] if metric == "r1" else [check_metric(metric)]
    # One panel under the other, each the full width: the cells hold "mean ± std" and a loss's name.
    height = 130 + 330 * len(panels)
    fig = grid(len(panels), 1, [METRIC_LABELS[m] for m in panels], height=height)
    xs, ys = [f"T<sup>{t}</sup>" for t in GOAL_TRIPLETS], [f"P<sup>{p}</sup>" for p in GOAL_PAIRS]
    names = [[table1_name(t, p) for t in GOAL_TRIPLETS] for p in GOAL_PAIRS]
    zs = []
    for k, m in enumerate(panels):
        mean, std = goal_matrix(summary, m)
        z = mean - mean[0, 0] if color == "delta" else mean
        zs.append(z)
        text = [[(mean_std(a, b, m) + ("" if n == "New" else f"<br>{n}")) if np.isfinite(a) else ""
                 for a, b, n in zip(ra, rs, rn)] for ra, rs, rn in zip(mean, std, names)]
        fig.add_trace(go.Heatmap(z=z, x=xs, y=ys, text=text, texttemplate="%{text}", textfont=dict(size=FONT_PX),
                                 name=METRIC_LABELS[m], coloraxis="coloraxis", xgap=1, ygap=1,
                                 hovertemplate="%{y} · %{x}<br>%{text}<extra></extra>"), k + 1, 1)
        frame_best(fig, mean, name=f"best {m}", row=k + 1, col=1)
        fig.update_yaxes(autorange="reversed", row=k + 1, col=1)
    finite = np.concatenate([z[np.isfinite(z)] for z in zs])
    if color == "delta":  # one diverging scale for every panel, centred on the baseline
        lo, hi = symmetric_range(finite)
        axis = dict(colorscale="RdBu", cmid=0.0, cmin=lo, cmax=hi, colorbar=dict(title=dict(text="Δ")))
    else:  # one scale for every panel: both are recalls of the same kind
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        axis = dict(colorscale=SEQUENTIAL, cmin=lo, cmax=hi if hi > lo else lo + 1.0)
    title = "GOAL grid: " + ("Δ vs (T<sup>con</sup>, P<sup>con</sup>), " if color == "delta" else "") + \
        "mean ± std over seeds"
    return style(fig, title, height=height, legend=False, coloraxis=axis)


def cocos_heatmap(table: pd.DataFrame, stat: str = "C_q") -> go.Figure:
    """A ``report.summary.cocos_summary`` table as a heatmap; colour normalised per column, the cells show the values."""
    values = table.to_numpy(dtype=float)
    finite = np.isfinite(values)
    peak = np.where(finite, np.abs(values), 0.0).max(axis=0, keepdims=True)  # columns without values: 0
    z = np.where(finite, values / np.where(peak > 0, peak, 1.0), np.nan)
    text = [[f"{v:.2f}" if np.isfinite(v) else "" for v in row] for row in values]
    fig = go.Figure(go.Heatmap(z=z, x=list(table.columns), y=list(table.index), text=text, texttemplate="%{text}",
                               textfont=dict(size=FONT_PX), colorscale=SEQUENTIAL, zmin=0, zmax=1,
                               colorbar=dict(title=dict(text="/ column max")),
                               hovertemplate="%{y}<br>%{x}: %{text}<extra></extra>"))
    return style(fig, f"COCOS {stat} at the selected epoch", height=max(360, 26 * len(table) + 190),
                 subtitle="probe batch, mean over seeds; colour: the value over its column's largest",
                 xaxis="rule and direction", legend=False, margin=dict(l=160), yaxis_autorange="reversed")
