"""Figures of notebook 08: COCOS, counting the candidates that contribute to a query's gradient.

Bleeker & de Rijke (sec. 4, eqs. 9-13) count, per query, the candidates whose
weight in the gradient w.r.t. the query is non-zero (triplets) or above a
threshold epsilon (NT-Xent, SmoothAP). The counts come from ``analysis.cocos``;
the figures also show *which* candidates contribute, read off autograd of the
library losses (``query_gradients``), so the picture and the table are two
independent computations of the same thing.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor
from torch.autograd.functional import jacobian

from .. import analysis, losses
from .._checks import check_choice, check_nonnegative, check_positive, check_similarity
from ._style import NEGATIVE, PALETTE, POSITIVE, layout, to_numpy

__all__ = [
    "LOSS_LABELS",
    "query_gradients",
    "contributing_mask",
    "cocos_figure",
    "cocos_history_figure",
]

DIRECTIONS = ("i2t", "t2i")
LOSS_LABELS = {
    "triplet": "Triplet, all negatives (eq. 9b)",
    "triplet_sh": "Triplet-SH, hardest negative (eq. 9a)",
    "nt_xent": "NT-Xent (eq. 11)",
    "smooth_ap": "SmoothAP (eq. 13)",
}


def _per_pair(loss: str, margin: float, temperature: float, tau: float):
    """The library loss of a COCOS rule, one value per positive pair (query on the diagonal)."""
    if loss == "triplet":
        return lambda X: losses.triplet_all(X, margin, reduction="none")
    if loss == "triplet_sh":
        return lambda X: losses.triplet_hardest(X, margin, reduction="none")
    if loss == "nt_xent":
        return lambda X: losses.info_nce(X, temperature, reduction="none")
    return lambda X: losses.smooth_ap(X, tau, reduction="none")


def query_gradients(
    S: Tensor,
    loss: str,
    margin: float = 0.2,
    temperature: float = 0.1,
    tau: float = 0.01,
    direction: str = "i2t",
) -> Tensor:
    r"""G[q, j] = derivative of query q's own loss term w.r.t. its score with candidate j.

    `S` is square with the positives on the diagonal. The library loss of `loss`
    (triplet_all, triplet_hardest, info_nce or smooth_ap) with ``reduction="none"``
    gives one value per pair q; for the symmetric losses it is the image term of q
    plus the caption term of q. The image term touches only row q of S and the
    caption term only column q, so in the Jacobian J[q] = d value_q / dS, row q
    off the diagonal belongs to the image query q alone. For "t2i" the same is done
    on S.T (caption queries as rows; SmoothAP is row-wise, so S.T is its t2i loss).
    The diagonal of G mixes both directions for the symmetric losses and is not
    used by the counts. Computed in float64 with one vectorised Jacobian.
    """
    check_choice("loss", loss, analysis.COCOS_LOSSES)
    check_choice("direction", direction, DIRECTIONS)
    margin = check_nonnegative("margin", margin)
    temperature, tau = check_positive("temperature", temperature), check_positive("tau", tau)
    S, _ = check_similarity(S, None)
    S_dir = (S if direction == "i2t" else S.T).detach().double().contiguous()
    J = jacobian(_per_pair(loss, margin, temperature, tau), S_dir, vectorize=True)  # [N, N, N]
    idx = torch.arange(S_dir.shape[0])
    return J[idx, idx]  # row q of J[q]


def contributing_mask(
    S: Tensor,
    loss: str,
    eps: float = 0.01,
    margin: float = 0.2,
    temperature: float = 0.1,
    tau: float = 0.01,
    direction: str = "i2t",
) -> Tensor:
    r"""Bool [n_queries, n_candidates]: candidates that contribute to each query's gradient (eqs. 9-13).

    Rows are the queries of `direction`. From G = ``query_gradients``:
    Triplet and Triplet-SH: G != 0 at a negative (the hinge is active, eqs. 9a/9b);
    NT-Xent: the softmax weight :math:`\tau G > \epsilon` (eq. 11, G = p / \tau);
    SmoothAP: :math:`|G| > \epsilon` off the positive (eq. 13: with one positive per
    query the gradient of 1 - AP_q w.r.t. s_j is :math:`sim(D_{qj}) / R^2`).
    Summed over a row, this is ``analysis.cocos(...)[direction]["C_q"]``.
    """
    eps = check_positive("eps", eps)
    G = query_gradients(S, loss, margin, temperature, tau, direction)
    off = ~torch.eye(G.shape[0], dtype=torch.bool)
    if loss in ("triplet", "triplet_sh"):
        return (G != 0) & off
    if loss == "nt_xent":
        return (G * temperature > eps) & off
    return (G.abs() > eps) & off


def _summary(d: Mapping) -> str:
    c_q = d["C_q_mean_active"]
    c_q_text = "–" if np.isnan(c_q) else f"{c_q:.2f}"
    c_b = d["C_B"]
    c_b_text = f"{c_b:.1f}" if isinstance(c_b, float) else f"{c_b}"
    return f"C<sup>q</sup> {c_q_text}, C<sup>B</sup> {c_b_text}, C<sup>0</sup> {d['C_0']}/{d['n_queries']}"


def cocos_figure(
    S: Tensor,
    eps: float = 0.01,
    margin: float = 0.2,
    temperature: float = 0.1,
    tau: float = 0.01,
    direction: str = "i2t",
) -> go.Figure:
    """Which candidates contribute to each query's gradient, for the four losses of Bleeker & de Rijke.

    Four heatmaps of S (queries of `direction` as rows), one per loss of
    ``analysis.COCOS_LOSSES``; red dots mark the contributing candidates
    (``contributing_mask``), green squares the positives. Each subplot title gives
    the counts of ``analysis.cocos`` in the layout of Tables 2-4: C^q (mean over the
    queries that have a gradient; "–" when none has), C^B (the batch total) and C^0
    (queries without gradient). `eps` applies to NT-Xent and SmoothAP, `margin` to the triplets,
    `temperature` to NT-Xent, `tau` to SmoothAP.
    """
    check_choice("direction", direction, DIRECTIONS)
    S_np = to_numpy(S)
    n = S_np.shape[0]
    Z = S_np if direction == "i2t" else S_np.T
    titles, masks = [], []
    for name in analysis.COCOS_LOSSES:
        counts = analysis.cocos(S, name, eps=eps, margin=margin, temperature=temperature, tau=tau)[direction]
        masks.append(to_numpy(contributing_mask(S, name, eps, margin, temperature, tau, direction)).astype(bool))
        titles.append(f"{LOSS_LABELS[name]}<br>{_summary(counts)}")
    fig = make_subplots(2, 2, subplot_titles=titles, horizontal_spacing=0.1, vertical_spacing=0.14)
    diag = np.arange(n)
    for i, mask in enumerate(masks):
        row, col = divmod(i, 2)
        rows, cols = np.nonzero(mask)
        fig.add_trace(go.Heatmap(z=Z, zmin=-1, zmax=1, colorscale="Greys", reversescale=True, showscale=i == 0,
                                 colorbar=dict(title="s", len=0.8),
                                 hovertemplate="query %{y}, candidate %{x}<br>s = %{z:.3f}<extra></extra>"),
                      row=row + 1, col=col + 1)
        fig.add_trace(go.Scatter(x=diag, y=diag, mode="markers", name="positive", showlegend=i == 0, hoverinfo="skip",
                                 marker=dict(symbol="square-open", size=11, color=POSITIVE, line=dict(width=2.5))),
                      row=row + 1, col=col + 1)
        fig.add_trace(go.Scatter(x=cols, y=rows, mode="markers", name="contributes to the query's gradient",
                                 showlegend=i == 0, hoverinfo="skip",
                                 marker=dict(symbol="circle", size=8, color=NEGATIVE)),
                      row=row + 1, col=col + 1)
        fig.update_yaxes(scaleanchor="x" if i == 0 else f"x{i + 1}", row=row + 1, col=col + 1)
    queries, cands = ("image", "caption") if direction == "i2t" else ("caption", "image")
    fig.update_layout(**layout(
        f"COCOS ({direction}): ε = {eps:g}, margin α = {margin:g}, "
        f"NT-Xent τ = {temperature:g}, SmoothAP τ = {tau:g}",
        height=820, width=820, margin=dict(l=50, r=20, t=100, b=40), legend=dict(orientation="h", y=-0.06),
    ))
    fig.update_yaxes(autorange="reversed", constrain="domain", title_text=f"{queries} query")
    fig.update_xaxes(constrain="domain", title_text=f"{cands} candidate")
    for ann in fig.layout.annotations:
        ann.font.size = 12
    return fig


def _history_value(record: Mapping, direction: str, key: str) -> float:
    cocos = record.get("cocos")
    if not cocos or direction not in cocos or key not in cocos[direction]:
        return float("nan")
    return float(cocos[direction][key])


def cocos_history_figure(histories: Mapping[str, Sequence[Mapping]], direction: str = "i2t") -> go.Figure:
    """COCOS along training: C^q, C^0 and rsum per epoch, one line per loss.

    `histories` maps a label to ``FitResult.history`` (one dict per epoch with
    "epoch", "rsum" and "cocos" = {direction: {"C_q_mean_active", "C_0", ...}}, the
    trainer's probe batch). C^q is the tables' convention: the mean over the
    queries that still have a gradient. An epoch without COCOS (a loss without a
    counting rule) is left as a gap.
    """
    check_choice("direction", direction, DIRECTIONS)
    if not isinstance(histories, Mapping) or not histories:
        raise ValueError("histories must be a non-empty mapping label -> FitResult.history")
    fig = make_subplots(1, 3, horizontal_spacing=0.08, subplot_titles=[
        "C<sup>q</sup>: contributing candidates per query", "C<sup>0</sup>: queries without gradient",
        "rsum (validation)"])
    for i, (name, history) in enumerate(histories.items()):
        if not history:
            raise ValueError(f"histories[{name!r}] is empty")
        epochs = [int(r["epoch"]) for r in history]
        colour = PALETTE[i % len(PALETTE)]
        series = (
            [_history_value(r, direction, "C_q_mean_active") for r in history],
            [_history_value(r, direction, "C_0") for r in history],
            [float(r.get("rsum", float("nan"))) for r in history],
        )
        for col, y in enumerate(series, start=1):
            y = [None if np.isnan(v) else v for v in y]  # gaps, and strict JSON
            fig.add_trace(go.Scatter(x=epochs, y=y, mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=col == 1, line=dict(color=colour)), row=1, col=col)
    fig.update_layout(**layout(f"COCOS of the probe batch along training ({direction})", height=380,
                               legend=dict(orientation="h", y=-0.25)))
    fig.update_xaxes(title_text="epoch", dtick=1)
    fig.update_yaxes(rangemode="tozero")
    return fig
