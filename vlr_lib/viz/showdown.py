"""Figures of notebook 10, the loss showdown: pure functions from a summary table to a ``go.Figure``.

The numbers come from ``vlr_lib.report`` (``summarize``, ``ranking``, ``goal_matrix``,
``cocos_summary``); these builders only draw them:

- :func:`metric_errorbars` -- every configuration's mean ± std on one metric, coloured by
  its relation to the best (the noise rule of ``vlr_lib.report``);
- :func:`goal_heatmaps` -- the 3 x 5 GOAL grid in Xuan & Chen's Tables 3-5 layout (pair
  weights as rows, triplet weights as columns);
- :func:`cocos_heatmap` -- COCOS at the selected epoch.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import report
from ..goal import GOAL_PAIRS, GOAL_TRIPLETS
from ._style import NEUTRAL, PALETTE, POSITIVE, SEQUENTIAL, layout

__all__ = ["metric_errorbars", "goal_heatmaps", "cocos_heatmap"]


def metric_errorbars(summary: pd.DataFrame, metric: str = "rsum", group: str = "all",
                     chance: float | None = None) -> go.Figure:
    """Mean ± std over seeds per configuration, best at the top; colour = relation to the best.

    Green: the best; blue: within its seed noise (intervals overlap); grey:
    separated from it. The shaded band is the best's mean ± std; `chance` draws
    the chance level (rsum only makes sense there).
    """
    rank = report.ranking(report.group(summary, group), metric)
    kinds = np.where(rank["rank"] == 1, "best", np.where(rank["tied_with_best"], "tied", "separated"))
    colours = {"best": POSITIVE, "tied": PALETTE[0], "separated": NEUTRAL}
    labels = {"best": "best", "tied": "within the best's seed noise", "separated": "separated from the best"}
    fig = go.Figure()
    for kind in ("best", "tied", "separated"):
        part = rank[kinds == kind]
        fig.add_trace(go.Scatter(
            x=part["mean"], y=part["name"], mode="markers", name=labels[kind],
            marker=dict(color=colours[kind], size=9),
            error_x=dict(type="data", array=part["std"], visible=True, color=colours[kind]),
            customdata=np.stack([part["std"], part["rank"]], axis=1) if len(part) else None,
            hovertemplate="%{y}<br>%{x:.3f} ± %{customdata[0]:.3f} (rank %{customdata[1]})<extra></extra>",
        ))
    best = rank.iloc[0]
    fig.add_vrect(x0=best["mean"] - best["std"], x1=best["mean"] + best["std"], fillcolor=POSITIVE, opacity=0.12,
                  line_width=0)
    if chance is not None:
        fig.add_vline(x=float(chance), line_dash="dot", line_color=NEUTRAL,
                      annotation_text=f"chance {chance:.1f}", annotation_position="bottom right")
    lo = float((rank["mean"] - rank["std"]).min())
    hi = float((rank["mean"] + rank["std"]).max())
    if chance is not None:
        lo, hi = min(lo, float(chance)), max(hi, float(chance))
    pad = 0.05 * max(hi - lo, 1e-6)
    label = report.METRIC_LABELS[metric]
    fig.update_layout(**layout(f"{label} per loss, mean ± std over seeds ({group})", label),
                      height=max(300, 28 * len(rank) + 120), legend=dict(orientation="h", y=-0.15))
    fig.update_xaxes(range=[lo - pad, hi + pad])
    fig.update_yaxes(categoryorder="array", categoryarray=list(rank["name"])[::-1])
    return fig


def goal_heatmaps(summary: pd.DataFrame, metric: str = "r1", color: str = "mean") -> go.Figure:
    """The GOAL grid as annotated heatmaps, Xuan & Chen Tables 3-5 layout (rows P, columns T).

    ``metric="r1"``: two panels, i2t R@1 and t2i R@1 (the papers' tables);
    any key of ``report.TABLE1_COLUMNS``: one panel. Cells show "mean ± std" and the loss of
    Table 1 where the combination is one. ``color="mean"`` colours by the mean;
    ``"delta"`` by the difference to (T^con, P^con), the triplet baseline of the
    paper (Table 2), on a diverging scale. A green frame (a layout shape named
    "best <metric>") marks each panel's best cell.
    """
    if color not in ("mean", "delta"):
        raise ValueError(f"color must be 'mean' or 'delta', got {color!r}")
    panels = ["i2t_r1", "t2i_r1"] if metric == "r1" else [report.check_metric(metric)]
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[report.METRIC_LABELS[m] for m in panels],
                        horizontal_spacing=0.14)
    xs, ys = [f"T<sup>{t}</sup>" for t in GOAL_TRIPLETS], [f"P<sup>{p}</sup>" for p in GOAL_PAIRS]
    names = [[report.table1_name(t, p) for t in GOAL_TRIPLETS] for p in GOAL_PAIRS]
    for k, m in enumerate(panels):
        mean, std = report.goal_matrix(summary, m)
        z = mean - mean[0, 0] if color == "delta" else mean
        text = [[(report.mean_std(a, b, m) + ("" if n == "New" else f"<br>{n}")) if np.isfinite(a) else ""
                 for a, b, n in zip(ra, rs, rn)] for ra, rs, rn in zip(mean, std, names)]
        span = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
        extra = dict(colorscale="RdBu", zmid=0.0, zmin=-span, zmax=span) if color == "delta" else \
            dict(colorscale=SEQUENTIAL)
        fig.add_trace(go.Heatmap(z=z, x=xs, y=ys, text=text, texttemplate="%{text}", name=report.METRIC_LABELS[m],
                                 colorbar=dict(x=fig.layout[f"xaxis{k + 1}"].domain[1] + 0.01, len=0.9,
                                               title="Δ" if color == "delta" else ""),
                                 hovertemplate="%{y} · %{x}<br>%{text}<extra></extra>", **extra), 1, k + 1)
        if np.isfinite(mean).any():  # frame the best cell (category axes: cell j spans j - 0.5 .. j + 0.5)
            i, j = np.unravel_index(np.nanargmax(mean), mean.shape)
            fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5, row=1, col=k + 1,
                          line=dict(color=POSITIVE, width=4), name=f"best {m}")
        fig.update_yaxes(autorange="reversed", row=1, col=k + 1)
    title = "GOAL grid: " + ("Δ vs (T<sup>con</sup>, P<sup>con</sup>), " if color == "delta" else "") + \
        "mean ± std over seeds"
    fig.update_layout(**layout(title), height=430, width=None)
    return fig


def cocos_heatmap(table: pd.DataFrame, stat: str = "C_q") -> go.Figure:
    """A ``report.cocos_summary`` table as a heatmap; colour normalised per column, the cells show the values."""
    values = table.to_numpy(dtype=float)
    finite = np.isfinite(values)
    peak = np.where(finite, np.abs(values), 0.0).max(axis=0, keepdims=True)  # columns without values: 0
    z = np.where(finite, values / np.where(peak > 0, peak, 1.0), np.nan)
    text = [[f"{v:.2f}" if np.isfinite(v) else "" for v in row] for row in values]
    fig = go.Figure(go.Heatmap(z=z, x=list(table.columns), y=list(table.index), text=text, texttemplate="%{text}",
                               colorscale=SEQUENTIAL, zmin=0, zmax=1, colorbar=dict(title="/ column max"),
                               hovertemplate="%{y}<br>%{x}: %{text}<extra></extra>"))
    fig.update_layout(**layout(f"COCOS {stat} at the selected epoch (probe batch, mean over seeds)",
                               "rule and direction"), height=max(320, 26 * len(table) + 140))
    fig.update_yaxes(autorange="reversed")
    return fig
