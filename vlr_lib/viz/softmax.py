"""Figures of notebook 05: sampled softmax, negative mining and cross-example softmax.

Veit & Wilber compare four losses that differ only in *which negatives enter the partition function* of a positive
pair's softmax (their Fig. 2): sampled softmax (eq. 2, the query's own row), stochastic negative mining (eq. 3, the
top k of the row), cross-example softmax (eq. 5, every negative of the batch) and cross-example negative mining (eq.
6, the top share of the batch's negatives). The partition of a query is ``analysis.partition_weights``, read off
autograd of the library's ``losses.sampled_softmax`` / ``losses.cross_example_softmax``, their `topk` meaning a count
(int) or a fraction of the negatives (float).

The calibration figures (their Fig. 4 and Table 1) take trained similarity matrices and use ``vlr_lib.metrics`` for
the PR curve, PR-AUC, precision and recall at a threshold and the neighbour counts.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import torch
from torch import Tensor

from .. import analysis, metrics, registry
from .._checks import check_int
from .readout import readout
from ._style import CURVE, NEGATIVE, NEUTRAL, PALETTE, POSITIVE, SYMBOL, grid, matrix_axes, position, style, to_numpy
from .matrix import mark_traces

__all__ = ["VARIANTS", "TITLES", "partition_figure", "pr_figure", "query_scores_figure", "neighbor_count_figure"]

VARIANTS = ("sampled_softmax", "snm", "cross_example_softmax", "cross_example_mining")
"""The four losses of Veit & Wilber Fig. 2 (B), in the figure's order."""

TITLES = {
    "sampled_softmax": f"{registry.label('sampled_softmax')} (eq. 2)",
    "snm": "Stochastic negative mining (eq. 3)",
    "cross_example_softmax": f"{registry.label('cross_example_softmax')} (eq. 5)",
    "cross_example_mining": "Cross-example negative mining (eq. 6)",
}
LOG_FLOOR = -6.0  # weights below 1e-6 share the palest colour (a dot still marks them)


def _panel_traces(S: np.ndarray, W: np.ndarray, query: int, first: bool) -> list[go.BaseTraceType]:
    """Grey S underneath, the partition's weights (log10, orange) on top, a dot on each negative in Z, the positive
    outlined."""
    inside = W > 0
    inside[query, query] = False  # the positive gets its own marker
    logw = np.maximum(np.log10(np.clip(W, 1e-300, None)), LOG_FLOOR)
    # Cells outside Z are gaps; None (not NaN) keeps the JSON strictly valid.
    z = np.where(inside, logw, None)
    hover = np.stack([S, W], axis=-1)
    rows, cols = np.nonzero(inside)
    positive = np.zeros_like(inside)
    positive[query, query] = True
    halo, mark = mark_traces(positive, "positive s_qq")
    mark.update(showlegend=first, hovertemplate=f"positive of query {query}<br>p₊ = {W[query, query]:.3g}<extra></extra>")
    halo.update(showlegend=False)
    return [
        go.Heatmap(z=S, zmin=-1, zmax=1, colorscale="Greys", showscale=False, hoverinfo="skip", opacity=0.35),
        go.Heatmap(
            z=z, zmin=LOG_FLOOR, zmax=0.0, colorscale="Oranges", customdata=hover,
            showscale=first, colorbar=dict(title=dict(text="log10 p"), len=0.8), hoverongaps=False,
            hovertemplate=("row %{y}, column %{x}<br>s = %{customdata[0]:.3f}"
                           "<br>p = %{customdata[1]:.2e}<extra></extra>"),
        ),
        go.Scatter(
            x=cols, y=rows, mode="markers", name="negative in Z", showlegend=first, hoverinfo="skip",
            legendgroup="negative in Z", marker=dict(symbol=SYMBOL["negative"], size=5, color="black"),
        ),
        halo, mark,
    ]


def partition_figure(
    S: Tensor, query: int = 0, k: int = 3, fraction: float = 0.5, scale: float = 20.0
) -> go.Figure:
    """Veit & Wilber Fig. 2 (B) on a live S: which entries enter the partition function of one query.

    Four heatmaps, one per loss of :data:`VARIANTS`. Orange cells (each with a dot) are the negatives in the softmax
    of query `query`'s positive pair (the blue square), coloured by their softmax weight p (log scale); grey cells are
    left out. The query's row is outlined. Per-query mining (SNM) keeps the top `k` of the row; cross-example mining
    keeps the top `fraction` of all off-diagonal entries, wherever they lie. Each subplot title reads out the query's
    term ℓ_q = -log p+ and the size of its partition's negative set.
    """
    # (library loss, topk) of each variant: SNM keeps `k` negatives of the row, cross-example mining a `fraction`
    # of the batch's negatives (the library's one meaning of topk: int count, float fraction).
    losses_topk = [("sampled_softmax", None), ("sampled_softmax", k), ("cross_example_softmax", None),
                   ("cross_example_softmax", float(fraction))]
    titles, panels = [], []
    for v, (loss, topk) in zip(VARIANTS, losses_topk):
        W = to_numpy(analysis.partition_weights(S, query, loss, topk, scale))
        titles.append(f"{TITLES[v]}<br>ℓ_q = {-np.log(W[query, query]):.3f}, {int((W > 0).sum()) - 1} negatives in Z")
        panels.append(W)
    S_np, n = to_numpy(S), panels[0].shape[0]
    height = 900
    fig = grid(2, 2, titles, height=height)
    for i, W in enumerate(panels):
        row, col = position(i, 2)
        fig.add_traces(_panel_traces(S_np, W, query, first=i == 0), rows=row, cols=col)
        fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=query - 0.5, y1=query + 0.5,
                      line=dict(color=POSITIVE, width=1.5, dash="dot"), row=row, col=col)
        matrix_axes(fig, row, col, "document (column)", "query (row)")
    return style(fig, f"Partition function of query {query}", height=height,
                 subtitle=f"scale λ = {readout(scale)}, SNM k = {k}, cross-example mining batch share = {fraction:.2f}")


# --------------------------------------------------------------------------- calibration


Results = Mapping[str, tuple[Tensor, Tensor]]


def _results(results: Results) -> dict[str, tuple[Tensor, Tensor]]:
    if not isinstance(results, Mapping) or not results:
        raise ValueError("results must be a non-empty mapping name -> (S, caption_to_image)")
    out = {}
    for name, value in results.items():
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise ValueError(f"results[{name!r}] must be a pair (S, caption_to_image)")
        S, c2i = torch.as_tensor(value[0]).detach().cpu(), torch.as_tensor(value[1]).cpu()
        metrics.positive_pairs(S, c2i)  # validates S and caption_to_image with the metrics' messages
        out[str(name)] = (S, c2i.long())
    return out


def pr_figure(results: Results) -> go.Figure:
    """Global precision-recall curves over all image-caption pairs (Veit & Wilber Fig. 4 left).

    `results` maps a model name to (S [n_images, n_captions], caption_to_image). Curves from ``metrics.pr_curve``,
    drawn as the steps that ``metrics.pr_auc`` integrates (precision P_n held over (R_{n-1}, R_n]); the legend gives
    PR-AUC. The dotted line is a random scorer's precision: the share of matching pairs.
    """
    res = _results(results)
    fig = go.Figure()
    base = None
    for i, (name, (S, c2i)) in enumerate(res.items()):
        precision, recall = (t.numpy() for t in metrics.pr_curve(S, c2i))
        auc = metrics.pr_auc(S, c2i)
        x, y = np.concatenate([[0.0], recall]), np.concatenate([[precision[0]], precision])
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="vh", name=f"{name}: PR-AUC {auc:.3f}",
                                 line=dict(color=PALETTE[i % len(PALETTE)], width=2.5)))
        base = c2i.numel() / S.numel()
    fig.add_trace(go.Scatter(x=[0, 1], y=[base, base], mode="lines", name=f"random: {base:.3f}",
                             line=dict(color=NEUTRAL, dash="dot")))
    return style(fig, "Precision-recall over all pairs (one global threshold)", height=440, xaxis="recall",
                 yaxis="precision", xaxis_range=[0.0, 1.0], yaxis_range=[0.0, 1.02])


def query_scores_figure(
    results: Results, threshold: float | None = None, n_queries: int = 12, direction: str = "t2i"
) -> go.Figure:
    """Per-query score distributions (Veit & Wilber Fig. 4): negatives as boxes, the positive as a dot.

    One panel per model, the same `n_queries` queries (evenly spaced indices) in each, ordered by their positive's
    score. A well calibrated model puts every query's positive above one common line and its negatives below it; a
    model that only ranks within each query may shift whole queries up or down. With a `threshold`, that global line
    is drawn and the subplot titles give precision and recall over all pairs at it (``metrics.precision_recall_at``).
    The y range spans the shown scores and the threshold, within [-1, 1]. `direction` "t2i": caption queries over
    images (the paper's text queries); "i2t": image queries.
    """
    res = _results(results)
    fig = grid(1, len(res), list(res), height=480, shared_yaxes=True, column_gap_px=30)
    lo, hi = (threshold, threshold) if threshold is not None else (np.inf, -np.inf)
    for col, (name, (S, c2i)) in enumerate(res.items(), start=1):
        order, Sq, pos = metrics.queries_by_positive(S, c2i, n_queries, direction)
        labels = [f"q{q}" for q in order]
        fig.add_trace(go.Box(x=np.repeat(labels, (~pos).sum(axis=1)), y=Sq[~pos], name="negatives",
                             marker_color=NEGATIVE, boxpoints=False, showlegend=col == 1, legendgroup="negatives",
                             line=dict(width=1)), row=1, col=col)
        lo, hi = min(lo, float(Sq.min())), max(hi, float(Sq.max()))
        fig.add_trace(go.Scatter(x=np.repeat(labels, pos.sum(axis=1)), y=Sq[pos], mode="markers", name="positive",
                                 marker=dict(color=POSITIVE, size=9, symbol=SYMBOL["positive"]), showlegend=col == 1,
                                 legendgroup="positive"),
                      row=1, col=col)
        if threshold is not None:
            p, r = metrics.precision_recall_at(S, c2i, threshold)
            reading = f"at s ≥ {threshold:.2f}: precision {p:.2f}, recall {r:.2f}"
            fig.layout.annotations[col - 1].text = f"{name}<br><sub>{reading}</sub>"
            fig.add_hline(y=threshold, line=dict(color="black", dash="dash", width=1.5), row=1, col=col)
    who = "caption" if direction == "t2i" else "image"
    style(fig, f"Scores of {who} queries: positives (blue squares) against negatives (orange boxes)", height=480)
    pad = 0.05 * max(hi - lo, 0.1)  # the shown scores (and the threshold), clipped to the cosine range
    fig.update_yaxes(range=[max(-1.0, lo - pad), min(1.0, hi + pad)])
    fig.update_yaxes(title_text="similarity s", row=1, col=1)
    fig.update_xaxes(title_text=f"{who} query, by its positive's score", showticklabels=False)
    return fig


def neighbor_count_figure(
    results: Results, direction: str = "t2i", max_lines: int = 40, percentiles: tuple[float, float] = (5.0, 95.0),
    grid_size: int = 81,
) -> go.Figure:
    """Veit & Wilber Fig. 4 right: per query, the number of neighbours scoring at least s.

    One thin line per query (at most `max_lines`, evenly spaced) and, in black, the 5th and 95th percentile over *all*
    queries at every s: 90% of the queries lie between them. The narrower that band along s, the more every query's
    scores live on one global scale -- the calibration that cross-example softmax aims for. The y axis is logarithmic
    (counts of 0 are not drawn).
    """
    res = _results(results)
    metrics.count_percentiles(np.zeros((1, 1)), percentiles, how_many=2)  # a lower and an upper band; before counting
    thresholds = np.linspace(-1.0, 1.0, check_int("grid_size", grid_size, 2))
    fig = grid(1, len(res), list(res), height=460, shared_yaxes=True, column_gap_px=30)
    for col, (name, (S, _)) in enumerate(res.items(), start=1):
        counts = metrics.neighbor_counts(S, thresholds, direction).numpy().astype(float)
        show = metrics.spaced_queries(max_lines, counts.shape[0])
        for n, q in enumerate(show):
            fig.add_trace(go.Scatter(x=thresholds, y=np.where(counts[q] > 0, counts[q], None), mode="lines",
                                     line=dict(color=PALETTE[2], width=0.8), opacity=0.5, hoverinfo="skip",
                                     name="one query", legendgroup="one query", showlegend=col == 1 and n == 0),
                          row=1, col=col)
        for p, dash, band in zip(percentiles, ("dash", "solid"), metrics.count_percentiles(counts, percentiles)):
            fig.add_trace(go.Scatter(x=thresholds, y=np.where(band > 0, band, None), mode="lines",
                                     line=dict(color=CURVE, width=2.5, dash=dash), name=f"{p:g}th percentile",
                                     legendgroup=f"p{p:g}", showlegend=col == 1), row=1, col=col)
    who = "caption" if direction == "t2i" else "image"
    style(fig, f"Neighbours of each {who} query scoring at least s", height=460)
    fig.update_xaxes(title_text="similarity s", range=[-1.0, 1.0])
    fig.update_yaxes(type="log", dtick=1)  # ticks at powers of ten only
    fig.update_yaxes(title_text="number of neighbours with score ≥ s", row=1, col=1)
    return fig
