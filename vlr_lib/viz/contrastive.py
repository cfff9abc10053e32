"""Figures for NT-Xent / InfoNCE / VLC: temperature as soft hard-negative mining.

The weight of a negative in the gradient of NT-Xent w.r.t. its query is its softmax probability (Bleeker & de Rijke
eq. 11): ``analysis.softmax_weights``, read off the library's loss; the effective number of negatives is
``analysis.effective_number``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from torch import Tensor

from .. import analysis, losses, registry
from .._checks import check_int, check_positive, check_similarity
from .readout import readout
from ._style import CURVE, HARDEST, NEGATIVE, NEUTRAL, SYMBOL, grid, style, to_numpy
from .matrix import batch_marks, oriented
from .matrix import gradient_heatmap as _gradient_heatmap

__all__ = ["negative_weight_bars", "temperature_sweep", "gradient_heatmap", "sigmoid_weights_figure"]


def _query_negatives(S: Tensor, W: Tensor, pos_mask: Tensor | None, direction: str,
                     query: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate indices, weights (row `query` of W, queries of `direction` as rows) and scores of one query's
    negatives, heaviest first."""
    S_q, neg = oriented(S, check_similarity(S, pos_mask)[1].neg, direction)
    query = check_int("query", query, 0, W.shape[0] - 1)
    idx = torch.nonzero(neg[query]).flatten()
    idx = idx[torch.argsort(W[query, idx], descending=True, stable=True)]
    return to_numpy(idx).astype(int), to_numpy(W[query, idx]), to_numpy(S_q[query, idx])


def negative_weight_bars(
    S: Tensor,
    temperature: float,
    query: int = 0,
    pos_mask: Tensor | None = None,
    direction: str = "i2t",
) -> go.Figure:
    """Bars: each negative's share of query `query`'s negative pull, heaviest first.

    The share is :math:`p_{qn} / \\sum_{n'} p_{qn'}` (Bleeker eq. 11 renormalised over the negatives); as tau -> 0 it
    concentrates on the hardest negative (Triplet-SH, drawn as a marker), as tau grows it flattens towards uniform
    (dashed line). The title reads out the effective number of negatives and the positive's weight.
    """
    W = analysis.softmax_weights(S, temperature, pos_mask, direction)
    idx, w, scores = _query_negatives(S, W, pos_mask, direction, query)
    total = w.sum()
    share = w / total if total > 0 else np.zeros_like(w)
    rank = np.arange(1, len(w) + 1)
    other = "caption" if direction == "i2t" else "image"
    fig = go.Figure([
        go.Bar(x=rank, y=share, name="negative: its share of the softmax weight", marker_color=NEGATIVE,
               customdata=np.stack([idx, scores], axis=1),
               hovertemplate=(f"{other} %{{customdata[0]:.0f}}<br>s = %{{customdata[1]:.3f}}"
                              "<br>share %{y:.3f}<extra></extra>")),
        go.Scatter(x=[1], y=[1.0], mode="markers",
                   name=f"{registry.label('triplet_hardest')} (τ → 0): the hardest only",
                   marker=dict(color=HARDEST, size=12, symbol=f"{SYMBOL['hardest']}-open", line=dict(width=2.5))),
        go.Scatter(x=[0.5, len(w) + 0.5], y=[1.0 / len(w)] * 2, mode="lines", name="uniform (τ → ∞)",
                   line=dict(color=NEUTRAL, dash="dash")),
    ])
    n_eff = analysis.effective_number(w)
    reading = (f"effective number of negatives {n_eff:.2f} of {len(w)}, hardest share {share[0]:.3f}, "
               f"positive weight 1 − p₊ = {total:.3g}")
    if total == 0:  # e^{-gap/tau} below float64's range: this query gets no gradient at all
        reading += " (every weight underflows to 0)"
    return style(fig, f"NT-Xent weights of {direction} query {query}'s negatives, τ = {readout(temperature)}",
                 height=440, subtitle=reading, xaxis="negatives, hardest first (rank)",
                 yaxis="share of the negative weight", xaxis_range=[0.5, len(w) + 0.5], yaxis_range=[0.0, 1.05])


def temperature_sweep(
    S: Tensor,
    temperatures: Sequence[float],
    query: int = 0,
    pos_mask: Tensor | None = None,
    direction: str = "i2t",
) -> go.Figure:
    """Effective number of negatives and the hardest negative's share against tau (log axis).

    For the query `query` and the mean over the queries of the batch that get any gradient (at tiny tau the weights of
    an easy query underflow to exactly 0): both curves show the soft mining of NT-Xent -- one negative as tau -> 0,
    all of them equally as tau -> inf.
    """
    taus, n_eff_q, n_eff_mean, top_q = analysis.temperature_sweep(S, temperatures, query, pos_mask, direction)
    fig = grid(1, 2, ("effective number of negatives", "share of the hardest negative"), height=420)
    fig.add_traces([go.Scatter(x=taus, y=n_eff_q, name=f"query {query}", line=dict(color=CURVE)),
                    go.Scatter(x=taus, y=n_eff_mean, name="mean over queries", line=dict(color=NEUTRAL, dash="dot"))],
                   rows=1, cols=1)
    fig.add_trace(go.Scatter(x=taus, y=top_q, name=f"query {query}: hardest share", line=dict(color=HARDEST)),
                  row=1, col=2)
    style(fig, f"NT-Xent ({direction}): temperature as soft hard-negative mining", height=420)
    fig.update_xaxes(type="log", dtick=1, title_text="temperature τ")  # labels at powers of ten only
    fig.update_yaxes(range=[0.0, 1.05], row=1, col=2)
    return fig


def gradient_heatmap(S: Tensor, temperature: float, pos_mask: Tensor | None = None) -> go.Figure:
    """dL/dS of info_nce(S, tau, "sum") (``analysis.loss_gradient``), the hardest negative of each row outlined.

    Blue pulls a similarity up (the positives), red pushes it down (negatives); each off-diagonal entry collects its
    row's and its column's softmax weight / tau. Triangles (▶) mark each row's hardest negative.
    """
    grad = analysis.loss_gradient(S, lambda X: losses.info_nce(X, temperature, reduction="sum", pos_mask=pos_mask))
    title = f"dL/dS of {registry.label('info_nce')} (both directions, sum), τ = {readout(temperature)}"
    return _gradient_heatmap(grad, batch_marks(S, pos_mask, ("i2t",)), title)


def _one_query(s: float, others: float, n_neg: int, positive: float) -> Tensor:
    """A batch whose query 0 has its positive at `positive`, one negative at `s` and `n_neg` - 1 more at `others`."""
    S = torch.full((n_neg + 1, n_neg + 1), float(others), dtype=torch.float64)
    S.fill_diagonal_(float(positive))
    S[0, 1] = float(s)
    return S


def sigmoid_weights_figure(logit_scale: float, logit_bias: float, temperature: float, n_neg: int = 15,
                           positive: float = 0.5, points: int = 81) -> go.Figure:
    """The weight of one negative against its similarity s, under SigLIP and under NT-Xent, while the query's other
    negatives are easy (at 0) or hard (at 0.4).

    SigLIP's weight is ``analysis.siglip_weights`` (sigma(t s + b), t = exp(`logit_scale`)): a curve of s alone, the
    same whatever the other negatives do. NT-Xent's is ``analysis.softmax_weights`` (its share of the query's
    softmax): the harder the other negatives, the smaller it gets, because they share one normaliser.
    """
    check_positive("temperature", temperature)
    n_neg = check_int("n_neg", n_neg, 2)
    xs = np.linspace(-1.0, 1.0, check_int("points", points, 3))
    fig = go.Figure()
    for others, dash in ((0.0, None), (0.4, "dash")):
        batches = [_one_query(float(x), others, n_neg, positive) for x in xs]
        sig = [float(analysis.siglip_weights(S, logit_scale, logit_bias)[0, 1]) for S in batches]
        soft = [float(analysis.softmax_weights(S, temperature)[0, 1]) for S in batches]
        fig.add_trace(go.Scatter(x=xs, y=sig, name=f"SigLIP, other negatives at {others:g}",
                                 line=dict(color=CURVE, dash=dash)))
        fig.add_trace(go.Scatter(x=xs, y=soft, name=f"NT-Xent, other negatives at {others:g}",
                                 line=dict(color=HARDEST, dash=dash)))
    t = float(np.exp(logit_scale))
    return style(fig, f"weight of one negative: SigLIP t = {readout(t)}, b = {readout(logit_bias)}; NT-Xent τ = "
                      f"{readout(temperature)}", height=420, xaxis="similarity s of the negative",
                 yaxis="weight in the gradient", xaxis_range=[-1.0, 1.0], yaxis_range=[0.0, 1.05])
