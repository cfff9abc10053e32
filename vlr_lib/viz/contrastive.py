"""Figures for NT-Xent / InfoNCE / VLC: temperature as soft hard-negative mining.

The weight of a negative in the gradient of NT-Xent w.r.t. its query is its
softmax probability (Bleeker & de Rijke eq. 11). We never re-implement the loss:
the weights are read off autograd of the library's one-direction softmax loss,
``vlr_lib.losses.sampled_softmax`` at scale 1/tau, whose row terms are exactly
the per-query NT-Xent terms of Bleeker eq. 4.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import losses
from .._checks import check_choice, check_positive, check_similarity, check_tensor
from ._style import NEGATIVE, NEUTRAL, PALETTE, layout, to_numpy
from .matrix import similarity_heatmap

__all__ = [
    "loss_gradient",
    "softmax_weights",
    "effective_number",
    "negative_weight_bars",
    "temperature_sweep",
    "gradient_heatmap",
]

DIRECTIONS = ("i2t", "t2i")


def loss_gradient(S: Tensor, loss_fn: Callable[[Tensor], Tensor]) -> Tensor:
    """dL/dS of a scalar loss `loss_fn(S)` by autograd, detached (S itself is not touched)."""
    check_tensor("S", S, ndim=2)
    with torch.enable_grad():
        leaf = S.detach().clone().requires_grad_()
        (grad,) = torch.autograd.grad(loss_fn(leaf), leaf)
    return grad.detach()


def _oriented(S: Tensor, pos_mask: Tensor | None, direction: str) -> tuple[Tensor, Tensor | None]:
    """S (and mask) with the queries of `direction` as rows: images for i2t, captions for t2i."""
    check_choice("direction", direction, DIRECTIONS)
    if direction == "i2t":
        return S, pos_mask
    return S.T, None if pos_mask is None else pos_mask.T


def softmax_weights(
    S: Tensor, temperature: float, pos_mask: Tensor | None = None, direction: str = "i2t"
) -> Tensor:
    r"""Weight of every negative in the NT-Xent gradient of its query (Bleeker eq. 11).

    Row q of the result holds, for each negative n of query q,
    :math:`p_{qn} = e^{s_{qn}/\tau} / Z(q)` -- the factor of :math:`\tau^{-1} v_n` in
    eq. 11 -- and 0 at the query's positives. Obtained as
    :math:`\tau\,\partial L / \partial s_{qn}` of the one-direction loss
    ``losses.sampled_softmax(S, scale=1/tau, reduction="sum")``. With one positive
    per query each row sums to :math:`1 - p_{q+}`, the weight of the positive; with
    several (a `pos_mask`), the weights of the query's positive pairs add up. Rows
    are the queries of `direction` ("i2t": images, "t2i": captions).
    """
    t = check_positive("temperature", temperature)
    S_q, mask_q = _oriented(S, pos_mask, direction)
    _, pos = check_similarity(S_q, mask_q, both_directions=False)
    grad = loss_gradient(
        S_q, lambda X: losses.sampled_softmax(X, scale=1.0 / t, reduction="sum", pos_mask=mask_q)
    )
    return (grad * t).masked_fill(~pos.neg, 0.0)


def effective_number(weights) -> float:
    r"""Effective number of negatives :math:`\exp(H(p))`, p the weights normalised to sum 1.

    The perplexity of the weight distribution: k for k equal weights, 1 when one
    negative takes all the weight. A display statistic of this workbook (not from
    the papers). Returns 0.0 when every weight is 0 (no negative gets gradient).
    """
    w = to_numpy(weights).ravel()
    if w.size == 0 or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be a non-empty array of finite values >= 0")
    total = w.sum()
    if total <= 0:
        return 0.0
    p = w[w > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def _query_negatives(W: Tensor, pos_mask: Tensor | None, query: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate indices and weights of one query's negatives, heaviest first."""
    if not 0 <= query < W.shape[0]:
        raise ValueError(f"query must be in [0, {W.shape[0] - 1}], got {query}")
    neg = ~torch.eye(*W.shape, dtype=torch.bool) if pos_mask is None else ~pos_mask
    idx = torch.nonzero(neg[query]).flatten()
    w = W[query, idx]
    order = torch.argsort(w, descending=True, stable=True)
    return to_numpy(idx[order]).astype(int), to_numpy(w[order])


def negative_weight_bars(
    S: Tensor,
    temperature: float,
    query: int = 0,
    pos_mask: Tensor | None = None,
    direction: str = "i2t",
) -> go.Figure:
    """Bars: each negative's share of query `query`'s negative pull, heaviest first.

    The share is :math:`p_{qn} / \\sum_{n'} p_{qn'}` (Bleeker eq. 11 renormalised over
    the negatives); as tau -> 0 it concentrates on the hardest negative (Triplet-SH,
    drawn as a marker), as tau grows it flattens towards uniform (dashed line). The
    title reads out the effective number of negatives and the positive's weight.
    """
    W = softmax_weights(S, temperature, pos_mask, direction)
    S_q, mask_q = _oriented(S, pos_mask, direction)
    idx, w = _query_negatives(W, mask_q, query)
    total = w.sum()
    share = w / total if total > 0 else np.zeros_like(w)
    scores = to_numpy(S_q[query, torch.as_tensor(idx)])
    rank = np.arange(1, len(w) + 1)
    other = "caption" if direction == "i2t" else "image"
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=rank, y=share, name="softmax weight share", marker_color=PALETTE[0],
        customdata=np.stack([idx, scores], axis=1),
        hovertemplate=(f"{other} %{{customdata[0]:.0f}}<br>s = %{{customdata[1]:.3f}}"
                       "<br>share %{y:.3f}<extra></extra>"),
    ))
    fig.add_trace(go.Scatter(
        x=[1], y=[1.0], mode="markers", name="Triplet-SH (tau -> 0): hardest only",
        marker=dict(color=NEGATIVE, size=12, symbol="diamond-open", line=dict(width=2)),
    ))
    fig.add_trace(go.Scatter(
        x=[0.5, len(w) + 0.5], y=[1.0 / len(w)] * 2, mode="lines", name="uniform (tau -> inf)",
        line=dict(color=NEUTRAL, dash="dash"),
    ))
    n_eff = effective_number(w)
    title = (f"{direction} query {query}, τ = {temperature:.3g}: effective number of negatives "
             f"{n_eff:.2f} of {len(w)}; positive weight 1 - p+ = {total:.3g}")
    if total == 0:  # e^{-gap/tau} below float64's range: this query gets no gradient at all
        title += " (every weight underflows to 0)"

    fig.update_layout(**layout(title, "negatives, hardest first (rank)", "share of the negative weight",
                               legend=dict(orientation="h", y=-0.2)))
    fig.update_yaxes(range=[0.0, 1.05])
    fig.update_xaxes(range=[0.5, len(w) + 0.5])
    return fig


def temperature_sweep(
    S: Tensor,
    temperatures: Sequence[float],
    query: int = 0,
    pos_mask: Tensor | None = None,
    direction: str = "i2t",
) -> go.Figure:
    """Effective number of negatives and the hardest negative's share against tau (log axis).

    For the query `query` and the mean over the queries of the batch that get any
    gradient (at tiny tau the weights of an easy query underflow to exactly 0):
    both curves show the soft mining of NT-Xent -- one negative as tau -> 0, all
    of them equally as tau -> inf.
    """
    taus = np.asarray(sorted(float(check_positive("temperatures", float(t))) for t in temperatures))
    if taus.size < 2:
        raise ValueError("temperatures must hold at least two values")
    S_q, mask_q = _oriented(S, pos_mask, direction)
    n_eff_q, n_eff_mean, top_q = [], [], []
    for t in taus:
        W = softmax_weights(S, float(t), pos_mask, direction)
        _, w = _query_negatives(W, mask_q, query)
        n_eff_q.append(effective_number(w))
        top_q.append(w[0] / w.sum() if w.sum() > 0 else np.nan)
        # queries whose weights all underflow to 0 get no gradient at all: leave them out of the mean
        live = [effective_number(row) for row in to_numpy(W) if (row > 0).any()]
        n_eff_mean.append(np.mean(live) if live else np.nan)
    fig = make_subplots(rows=1, cols=2,
                        subplot_titles=("effective number of negatives", "share of the hardest negative"))
    fig.add_trace(go.Scatter(x=taus, y=n_eff_q, name=f"query {query}", line=dict(color=PALETTE[0])), row=1, col=1)
    fig.add_trace(go.Scatter(x=taus, y=n_eff_mean, name="mean over queries", line=dict(color=PALETTE[1], dash="dot")),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=taus, y=top_q, name=f"query {query}: hardest share", line=dict(color=NEGATIVE)),
                  row=1, col=2)
    fig.update_layout(**layout(f"NT-Xent ({direction}): temperature as soft hard-negative mining",
                               legend=dict(orientation="h", y=-0.25)))
    fig.update_xaxes(type="log", title_text="temperature τ")
    fig.update_yaxes(range=[0.0, 1.05], row=1, col=2)
    return fig


def gradient_heatmap(S: Tensor, temperature: float, pos_mask: Tensor | None = None) -> go.Figure:
    """dL/dS of info_nce(S, tau, "sum") by autograd, hardest negatives of each row outlined.

    Blue pulls a similarity up (the positives), red pushes it down (negatives);
    each off-diagonal entry collects its row's and its column's softmax weight / tau.
    """
    t = check_positive("temperature", temperature)
    S, pos = check_similarity(S, pos_mask)
    grad = loss_gradient(S, lambda X: losses.info_nce(X, t, reduction="sum", pos_mask=pos_mask))
    hardest = S.masked_fill(~pos.neg, -torch.inf).argmax(dim=1)
    hn = torch.zeros_like(pos.neg)
    hn[torch.arange(S.shape[0]), hardest] = True
    bound = float(grad.abs().max().clamp_min(1e-12))
    return similarity_heatmap(
        grad, marks={"positive": ~pos.neg, "hardest negative (row)": hn},
        title=f"dL/dS of NT-Xent (both directions, sum), τ = {t:.3g}",
        zrange=(-bound, bound), diverging=True, colorbar_title="dL/ds",
    )
