"""Figures of notebook 08: COCOS, counting the candidates that contribute to a query's gradient.

Bleeker & de Rijke (sec. 4, eqs. 9-13) count, per query, the candidates whose weight in the gradient w.r.t. the query
is non-zero (triplets) or above a threshold epsilon (NT-Xent, SmoothAP). The counts come from ``analysis.cocos``, the
marks of *which* candidates contribute from ``analysis.cocos_mask`` (checked in the tests against a Jacobian of the
library losses).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

import numpy as np
import plotly.graph_objects as go
from torch import Tensor

from .. import analysis, registry
from ..report.sweeps import history_frame, history_values
from ..analysis import CocosSettings
from .._checks import check_choice
from ..similarity import DIRECTIONS
from .readout import readout
from ._style import NEGATIVE, PALETTE, POSITIVE, SYMBOL, grid, matrix_axes, position, style, to_numpy

__all__ = ["RULE_TITLES", "cocos_figure", "cocos_history_figure"]

_LOSS_OF_RULE = {rule: loss for loss, rule in registry.cocos_rules().items()}
_EQUATION = {"triplet": "eq. 9b", "triplet_sh": "eq. 9a", "nt_xent": "eq. 11", "smooth_ap": "eq. 13"}
#: Panel title of each COCOS rule: the loss's one display name and the paper's equation.
RULE_TITLES = {rule: f"{registry.label(_LOSS_OF_RULE[rule])} ({_EQUATION[rule]})" for rule in analysis.COCOS_LOSSES}


def cocos_figure(S: Tensor, settings: CocosSettings = CocosSettings(), direction: str = "i2t") -> go.Figure:
    """Which candidates contribute to each query's gradient, for the four losses of Bleeker & de Rijke.

    Four heatmaps of S (queries of `direction` as rows), one per loss of ``analysis.COCOS_LOSSES``; orange dots mark
    the contributing candidates (``analysis.cocos_mask``), blue squares the positives. Each subplot title gives the
    counts of ``analysis.cocos`` in the layout of Tables 2-4: C^q (mean over the queries that have a gradient; "–"
    when none has), C^B (the batch total) and C^0 (queries without gradient). `settings` holds ε (NT-Xent and
    SmoothAP), the triplets' margin α and the two temperatures.
    """
    titles, masks = [], []
    for name in analysis.COCOS_LOSSES:
        masks.append(analysis.cocos_mask(S, name, settings, direction).cpu().numpy())
        c = analysis.cocos(S, name, **asdict(settings))[direction]
        c_q = "–" if np.isnan(c["C_q_mean_active"]) else f"{c['C_q_mean_active']:.2f}"
        c_b = f"{c['C_B']:.1f}" if isinstance(c["C_B"], float) else f"{c['C_B']}"
        titles.append(f"{RULE_TITLES[name]}<br>C<sup>q</sup> {c_q}, C<sup>B</sup> {c_b}, "
                      f"C<sup>0</sup> {c['C_0']}/{c['n_queries']}")
    S_np = to_numpy(S)
    Z = S_np if direction == "i2t" else S_np.T
    diag = np.arange(Z.shape[0])
    height = 900
    fig = grid(2, 2, titles, height=height)
    queries, cands = ("image", "caption") if direction == "i2t" else ("caption", "image")
    for i, mask in enumerate(masks):
        row, col = position(i, 2)
        rows, cols = np.nonzero(mask)
        fig.add_trace(go.Heatmap(z=Z, zmin=-1, zmax=1, colorscale="Greys", reversescale=True, showscale=i == 0,
                                 colorbar=dict(title=dict(text="s"), len=0.8),
                                 hovertemplate="query %{y}, candidate %{x}<br>s = %{z:.3f}<extra></extra>"),
                      row=row, col=col)
        fig.add_trace(go.Scatter(x=diag, y=diag, mode="markers", name="positive", showlegend=i == 0, hoverinfo="skip",
                                 legendgroup="positive",
                                 marker=dict(symbol=f"{SYMBOL['positive']}-open", size=11, color=POSITIVE,
                                             line=dict(width=2.5))),
                      row=row, col=col)
        fig.add_trace(go.Scatter(x=cols, y=rows, mode="markers", name="contributes to the query's gradient",
                                 showlegend=i == 0, hoverinfo="skip", legendgroup="contributes",
                                 marker=dict(symbol=SYMBOL["negative"], size=8, color=NEGATIVE,
                                             line=dict(color="black", width=0.5))),
                      row=row, col=col)
        matrix_axes(fig, row, col, f"{cands} candidate", f"{queries} query")
    style(fig, f"COCOS ({direction}): which candidates contribute to each query's gradient", height=height,
          subtitle=(f"ε = {readout(settings.eps)}, margin α = {settings.margin:.2f}, "
                    f"NT-Xent τ = {readout(settings.temperature)}, SmoothAP τ = {readout(settings.tau)}"))
    return fig


def cocos_history_figure(histories: Mapping[str, Sequence[Mapping]], direction: str = "i2t") -> go.Figure:
    """COCOS along training: C^q, C^0 and rsum per epoch, one line per loss.

    `histories` maps a label to ``FitResult.history`` (one dict per epoch with "epoch", "rsum" and "cocos" =
    {direction: {"C_q_mean_active", "C_0", ...}}, the trainer's probe batch). C^q is the tables' convention: the mean
    over the queries that still have a gradient. An epoch without COCOS (a loss without a counting rule) is left as a
    gap.
    """
    check_choice("direction", direction, DIRECTIONS)
    frame = history_frame(histories)  # the nested COCOS dicts flattened to columns cocos_<direction>_<count>
    fig = grid(1, 3, ["C<sup>q</sup>: contributing<br>candidates per query", "C<sup>0</sup>: queries<br>without gradient",
                      "rsum (validation)"], height=420)
    for i, name in enumerate(dict.fromkeys(frame["run"])):
        sub = frame[frame["run"] == name]
        for col, key in enumerate((f"cocos_{direction}_C_q_mean_active", f"cocos_{direction}_C_0", "rsum"), start=1):
            y = [None if np.isnan(v) else v for v in history_values(sub, key)]  # gaps, and strict JSON
            fig.add_trace(go.Scatter(x=sub["epoch"].tolist(), y=y, mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=col == 1, line=dict(color=PALETTE[i % len(PALETTE)])), row=1, col=col)
    style(fig, f"COCOS of the probe batch along training ({direction})", height=420)
    fig.update_xaxes(title_text="epoch", dtick=1)
    fig.update_yaxes(rangemode="tozero")
    return fig
