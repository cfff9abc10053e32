"""Figures of notebook 05: sampled softmax, negative mining and cross-example softmax.

Veit & Wilber compare four losses that differ only in *which negatives enter the
partition function* of a positive pair's softmax (their Fig. 2): sampled softmax
(eq. 2, the query's own row), stochastic negative mining (eq. 3, the top k of the
row), cross-example softmax (eq. 5, every negative of the batch) and
cross-example negative mining (eq. 6, the top share of the batch's negatives).
Nothing here re-implements a loss: the partition of a query is read off autograd
of the library's ``losses.sampled_softmax`` / ``losses.cross_example_softmax``.

The calibration figures (their Fig. 4 and Table 1) take trained similarity
matrices and use ``vlr_lib.metrics`` for the PR curve and PR-AUC over all pairs.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import losses, metrics
from .._checks import check_choice, check_positive, check_similarity
from ..similarity import positive_mask
from ._style import NEGATIVE, NEUTRAL, PALETTE, POSITIVE, layout, to_numpy

__all__ = [
    "VARIANTS",
    "TITLES",
    "query_term",
    "partition_weights",
    "partition_figure",
    "precision_recall_at",
    "pr_figure",
    "query_scores_figure",
    "neighbor_counts",
    "neighbor_count_figure",
]

VARIANTS = ("sampled_softmax", "snm", "cross_example_softmax", "cross_example_mining")
"""The four losses of Veit & Wilber Fig. 2 (B), in the figure's order."""

TITLES = {
    "sampled_softmax": "Sampled softmax (eq. 2)",
    "snm": "Stochastic negative mining (eq. 3)",
    "cross_example_softmax": "Cross-example softmax (eq. 5)",
    "cross_example_mining": "Cross-example negative mining (eq. 6)",
}
DIRECTIONS = ("i2t", "t2i")
LOG_FLOOR = -6.0  # weights below 1e-6 share the palest colour (a dot still marks them)


# --------------------------------------------------------------------------- the partition function


def _check_query(query: object, n: int) -> int:
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not 0 <= query < n:
        raise ValueError(f"query must be an int in [0, {n - 1}], got {query!r}")
    return int(query)


def query_term(
    S: Tensor, query: int, variant: str, k: int = 3, fraction: float = 0.5, scale: float = 20.0
) -> Tensor:
    r"""The loss term :math:`\ell_q` of query (row) `query` under `variant`, from the library.

    :math:`\ell_q = -\log \frac{e^{\lambda s_{qq}}}{e^{\lambda s_{qq}} + \sum_{s \in \mathcal{N}} e^{\lambda s}}`
    with :math:`\mathcal{N}` the row's negatives ("sampled_softmax", eq. 2), their top
    `k` ("snm", eq. 3), all off-diagonal entries ("cross_example_softmax", eq. 5) or
    the top `fraction` of them ("cross_example_mining", eq. 6). `S` is square with
    positives on the diagonal; rows are the queries. The batch losses are the mean
    of these terms over the queries.
    """
    check_choice("variant", variant, VARIANTS)
    S, _ = check_similarity(S, None, both_directions=False)
    q = _check_query(query, S.shape[0])
    n = S.shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n - 1:
        raise ValueError(f"k must be an int in [1, {n - 1}] (negatives per query), got {k!r}")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
    if variant == "sampled_softmax":
        per_query = losses.sampled_softmax(S, scale, reduction="none")
    elif variant == "snm":
        per_query = losses.sampled_softmax(S, scale, topk=int(k), reduction="none")
    elif variant == "cross_example_softmax":
        per_query = losses.cross_example_softmax(S, scale, reduction="none")
    else:
        per_query = losses.cross_example_softmax(S, scale, topk=float(fraction), reduction="none")
    return per_query[q]


def partition_weights(
    S: Tensor, query: int, variant: str, k: int = 3, fraction: float = 0.5, scale: float = 20.0
) -> Tensor:
    r"""Softmax weight of every entry of S in the partition function of `query`'s term; 0 outside it.

    For :math:`\ell_q = -\lambda s_{qq} + \log Z_q`, autograd gives
    :math:`\partial \ell_q / \partial s = \lambda e^{\lambda s} / Z_q = \lambda p_s` for
    every negative s in :math:`Z_q`, 0 for every entry left out, and
    :math:`-\lambda(1 - p_+)` at the positive. So the weights are the gradient / λ
    at the negatives and :math:`1 - |\text{gradient}| / \lambda` at the positive; over the
    partition they sum to 1, and :math:`\ell_q = -\log p_+`. Computed in float64 (an
    entry whose weight underflows below 1e-308 would show as left out).
    """
    lam = check_positive("scale", scale)
    S64 = S.detach().double()
    with torch.enable_grad():
        leaf = S64.clone().requires_grad_()
        (grad,) = torch.autograd.grad(query_term(leaf, query, variant, k, fraction, lam), leaf)
    weights = grad / lam
    q = int(query)
    weights[q, q] = 1.0 + weights[q, q]  # the positive: 1 - (1 - p+) = p+
    return weights


def _panel_traces(S: np.ndarray, W: np.ndarray, query: int, first: bool) -> list[go.BaseTraceType]:
    """Grey S underneath, the partition's weights (log10) on top, a dot on each negative in Z, the positive boxed."""
    inside = W > 0
    inside[query, query] = False  # the positive gets its own marker
    logw = np.maximum(np.log10(np.clip(W, 1e-300, None)), LOG_FLOOR)
    # Cells outside Z are gaps; None (not NaN) keeps the JSON a FigureWidget sends strictly valid.
    z = np.where(inside, logw, None)
    hover = np.stack([S, W], axis=-1)
    rows, cols = np.nonzero(inside)
    return [
        go.Heatmap(z=S, zmin=-1, zmax=1, colorscale="Greys", showscale=False, hoverinfo="skip", opacity=0.35),
        go.Heatmap(
            z=z, zmin=LOG_FLOOR, zmax=0.0, colorscale="Reds", customdata=hover,
            showscale=first, colorbar=dict(title="log10 p", len=0.8), hoverongaps=False,
            hovertemplate=("row %{y}, column %{x}<br>s = %{customdata[0]:.3f}"
                           "<br>p = %{customdata[1]:.2e}<extra></extra>"),
        ),
        go.Scatter(
            x=cols, y=rows, mode="markers", name="negative in Z", showlegend=first, hoverinfo="skip",
            marker=dict(symbol="circle", size=4, color=NEGATIVE),
        ),
        go.Scatter(
            x=[query], y=[query], mode="markers", name="positive s_qq", showlegend=first,
            marker=dict(symbol="square-open", size=14, color=PALETTE[0], line=dict(width=3)),
            hovertemplate=f"positive of query {query}<br>p+ = {W[query, query]:.3g}<extra></extra>",
        ),
    ]


def partition_figure(
    S: Tensor, query: int = 0, k: int = 3, fraction: float = 0.5, scale: float = 20.0
) -> go.Figure:
    """Veit & Wilber Fig. 2 (B) on a live S: which entries enter the partition function of one query.

    Four heatmaps, one per loss of :data:`VARIANTS`. Red cells are the negatives in
    the softmax of query `query`'s positive pair (the blue square), coloured by
    their softmax weight p (log scale); grey cells are left out. The query's row is
    outlined. Per-query mining (SNM) keeps the top `k` of the row; cross-example
    mining keeps the top `fraction` of all off-diagonal entries, wherever they lie.
    Each subplot title reads out the query's term ℓ_q = -log p+ and the size of its
    partition's negative set.
    """
    S_np = to_numpy(S)
    n = S_np.shape[0] if S_np.ndim == 2 else 0
    titles, panels = [], []
    for v in VARIANTS:
        W = to_numpy(partition_weights(S, query, v, k, fraction, scale))
        term = float(query_term(torch.as_tensor(S_np), query, v, k, fraction, scale))
        n_neg = int((W > 0).sum()) - int(W[query, query] > 0)
        titles.append(f"{TITLES[v]}<br>ℓ_q = {term:.3f}, {n_neg} negatives in Z")
        panels.append(W)
    fig = make_subplots(2, 2, subplot_titles=titles, horizontal_spacing=0.08, vertical_spacing=0.14)
    for i, W in enumerate(panels):
        row, col = divmod(i, 2)
        for tr in _panel_traces(S_np, W, query, first=i == 0):
            fig.add_trace(tr, row=row + 1, col=col + 1)
        fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=query - 0.5, y1=query + 0.5,
                      line=dict(color=PALETTE[0], width=1.5, dash="dot"), row=row + 1, col=col + 1)
        x_name = "x" if i == 0 else f"x{i + 1}"
        fig.update_yaxes(scaleanchor=x_name, row=row + 1, col=col + 1)
    fig.update_layout(**layout(
        f"Partition function of query {query} (λ = {scale:g}, k = {k}, batch share = {fraction:g})",
        height=800, width=820, margin=dict(l=40, r=20, t=100, b=40), legend=dict(orientation="h", y=-0.06),
    ))
    fig.update_yaxes(autorange="reversed", constrain="domain", title_text="query (row)")
    fig.update_xaxes(constrain="domain", title_text="document (column)")
    for ann in fig.layout.annotations:
        ann.font.size = 12
    return fig


# --------------------------------------------------------------------------- calibration


Results = Mapping[str, tuple[Tensor, Tensor]]


def _results(results: Results) -> dict[str, tuple[Tensor, Tensor]]:
    if not isinstance(results, Mapping) or not results:
        raise ValueError("results must be a non-empty mapping name -> (S, caption_to_image)")
    out = {}
    for name, value in results.items():
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise ValueError(f"results[{name!r}] must be a pair (S, caption_to_image)")
        S, c2i = torch.as_tensor(value[0]).detach().cpu(), torch.as_tensor(value[1]).cpu().long()
        metrics.pr_curve(S, c2i)  # validates S and caption_to_image with the metrics' messages
        out[str(name)] = (S, c2i)
    return out


def precision_recall_at(S: Tensor, caption_to_image: Tensor, threshold: float) -> tuple[float, float]:
    """Precision and recall over all pairs when every pair scoring >= `threshold` is called a match.

    Precision = matches among accepted pairs / accepted pairs (1.0 when none is
    accepted); recall = accepted matches / all matches. At the score of a matching
    pair this is a point of ``metrics.pr_curve``.
    """
    S = torch.as_tensor(S).detach().cpu()
    pos = positive_mask(torch.arange(S.shape[0]), torch.as_tensor(caption_to_image).cpu().long())
    accepted = S >= threshold
    n_acc = int(accepted.sum())
    hits = int((accepted & pos).sum())
    return (hits / n_acc if n_acc else 1.0), hits / int(pos.sum())


def pr_figure(results: Results) -> go.Figure:
    """Global precision-recall curves over all image-caption pairs (Veit & Wilber Fig. 4 left).

    `results` maps a model name to (S [n_images, n_captions], caption_to_image).
    Curves from ``metrics.pr_curve``, drawn as the steps that ``metrics.pr_auc``
    integrates (precision P_n held over (R_{n-1}, R_n]); the legend gives PR-AUC.
    The dotted line is a random scorer's precision: the share of matching pairs.
    """
    res = _results(results)
    fig = go.Figure()
    base = None
    for i, (name, (S, c2i)) in enumerate(res.items()):
        precision, recall = (t.numpy() for t in metrics.pr_curve(S, c2i))
        auc = metrics.pr_auc(S, c2i)
        x, y = np.concatenate([[0.0], recall]), np.concatenate([[precision[0]], precision])
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="vh", name=f"{name}: PR-AUC {auc:.3f}",
                                 line=dict(color=PALETTE[i % len(PALETTE)], width=2)))
        base = c2i.numel() / S.numel()
    fig.add_trace(go.Scatter(x=[0, 1], y=[base, base], mode="lines", name=f"random: {base:.3f}",
                             line=dict(color=NEUTRAL, dash="dot")))
    fig.update_layout(**layout("Precision-recall over all pairs (one global threshold)", "recall", "precision",
                               legend=dict(x=0.45, y=0.98)))
    fig.update_xaxes(range=[0.0, 1.0])
    fig.update_yaxes(range=[0.0, 1.02])
    return fig


def _oriented(S: Tensor, c2i: Tensor, direction: str) -> tuple[Tensor, Tensor]:
    """Scores with the queries of `direction` as rows and the positive mask laid out the same way."""
    check_choice("direction", direction, DIRECTIONS)
    pos = positive_mask(torch.arange(S.shape[0]), c2i)
    return (S, pos) if direction == "i2t" else (S.T, pos.T)


def _pick_queries(n_queries: int, total: int) -> np.ndarray:
    if isinstance(n_queries, bool) or not isinstance(n_queries, (int, np.integer)) or n_queries < 1:
        raise ValueError(f"n_queries must be an int >= 1, got {n_queries!r}")
    return np.unique(np.linspace(0, total - 1, min(n_queries, total)).round().astype(int))


def query_scores_figure(
    results: Results, threshold: float | None = None, n_queries: int = 12, direction: str = "t2i"
) -> go.Figure:
    """Per-query score distributions (Veit & Wilber Fig. 4): negatives as boxes, the positive as a dot.

    One panel per model, the same `n_queries` queries (evenly spaced indices) in
    each, ordered by their positive's score. A well calibrated model puts every
    query's positive above one common line and its negatives below it; a model
    that only ranks within each query may shift whole queries up or down. With a
    `threshold`, that global line is drawn and the subplot titles give precision
    and recall over all pairs at it (``precision_recall_at``). The y range spans the
    shown scores and the threshold, within [-1, 1]. `direction` "t2i":
    caption queries over images (the paper's text queries); "i2t": image queries.
    """
    res = _results(results)
    fig = make_subplots(1, len(res), shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[name for name in res])
    lo, hi = (threshold, threshold) if threshold is not None else (np.inf, -np.inf)
    for col, (name, (S, c2i)) in enumerate(res.items(), start=1):
        Sq, pos = _oriented(S, c2i, direction)
        queries = _pick_queries(n_queries, Sq.shape[0])
        Sq_np, pos_np = Sq.numpy(), pos.numpy()
        # One positive per caption query; an image query has several (its captions): take the best.
        best_pos = np.where(pos_np, Sq_np, -np.inf).max(axis=1)
        order = queries[np.argsort(best_pos[queries], kind="stable")]
        labels = [f"q{q}" for q in order]
        xs = np.repeat(labels, (~pos_np[order]).sum(axis=1))
        fig.add_trace(go.Box(x=xs, y=Sq_np[order][~pos_np[order]], name="negatives", marker_color=NEGATIVE,
                             boxpoints=False, showlegend=col == 1, line=dict(width=1)), row=1, col=col)
        shown = Sq_np[order]
        lo, hi = min(lo, float(shown.min())), max(hi, float(shown.max()))
        px = np.repeat(labels, pos_np[order].sum(axis=1))
        fig.add_trace(go.Scatter(x=px, y=Sq_np[order][pos_np[order]], mode="markers", name="positive",
                                 marker=dict(color=POSITIVE, size=9, symbol="circle"), showlegend=col == 1),
                      row=1, col=col)
        if threshold is not None:
            p, r = precision_recall_at(S, c2i, threshold)
            reading = f"at s ≥ {threshold:.2f}: precision {p:.2f}, recall {r:.2f}"
            fig.layout.annotations[col - 1].text = f"{name}<br><sub>{reading}</sub>"
            fig.add_hline(y=threshold, line=dict(color="black", dash="dash", width=1.5), row=1, col=col)
    who = "caption" if direction == "t2i" else "image"
    fig.update_layout(**layout(f"Scores of {who} queries: positives (green) against negatives (red)",
                               height=460, margin=dict(l=60, r=20, t=110, b=50), legend=dict(orientation="h", y=-0.2)))
    pad = 0.05 * max(hi - lo, 0.1)  # the shown scores (and the threshold), clipped to the cosine range
    fig.update_yaxes(range=[max(-1.0, lo - pad), min(1.0, hi + pad)])
    fig.update_yaxes(title_text="similarity s", row=1, col=1)
    fig.update_xaxes(title_text=f"{who} query, by its positive's score", showticklabels=False)
    return fig


def neighbor_counts(S: Tensor, grid, direction: str = "t2i") -> np.ndarray:
    """[n_queries, len(grid)]: how many candidates of each query score >= each grid value (Fig. 4 right).

    Queries are the columns of S (captions) for "t2i", the rows (images) for "i2t".
    """
    check_choice("direction", direction, DIRECTIONS)
    Sq = torch.as_tensor(to_numpy(S))
    Sq = Sq.T if direction == "t2i" else Sq
    srt = torch.sort(Sq, dim=1).values.contiguous()
    x = torch.as_tensor(np.asarray(grid, dtype=np.float64)).expand(srt.shape[0], -1).contiguous()
    # count of values >= x = n - (number of values < x) = n - leftmost insertion index of x
    return (srt.shape[1] - torch.searchsorted(srt, x, side="left")).numpy()


def neighbor_count_figure(
    results: Results, direction: str = "t2i", max_lines: int = 40, percentiles: tuple[float, float] = (5.0, 95.0),
    grid_size: int = 81,
) -> go.Figure:
    """Veit & Wilber Fig. 4 right: per query, the number of neighbours scoring at least s.

    One thin line per query (at most `max_lines`, evenly spaced) and, in orange, the
    5th and 95th percentile over *all* queries at every s: 90% of the queries lie
    between them. The narrower that band along s, the more every query's scores
    live on one global scale -- the calibration that cross-example softmax aims for.
    The y axis is logarithmic (counts of 0 are not drawn).
    """
    res = _results(results)
    check_choice("direction", direction, DIRECTIONS)
    lo, hi = percentiles
    if not 0.0 <= lo < hi <= 100.0:
        raise ValueError(f"percentiles must be increasing values in [0, 100], got {percentiles}")
    grid = np.linspace(-1.0, 1.0, grid_size)
    fig = make_subplots(1, len(res), shared_yaxes=True, horizontal_spacing=0.04, subplot_titles=list(res))
    for col, (name, (S, _)) in enumerate(res.items(), start=1):
        counts = neighbor_counts(S, grid, direction).astype(float)
        show = _pick_queries(max_lines, counts.shape[0])
        for n, q in enumerate(show):
            fig.add_trace(go.Scatter(x=grid, y=np.where(counts[q] > 0, counts[q], None), mode="lines",
                                     line=dict(color=PALETTE[0], width=0.6), opacity=0.35, hoverinfo="skip",
                                     name="one query", showlegend=col == 1 and n == 0), row=1, col=col)
        for p, dash in ((lo, "dash"), (hi, "solid")):
            band = np.percentile(counts, p, axis=0)
            fig.add_trace(go.Scatter(x=grid, y=np.where(band > 0, band, None), mode="lines",
                                     line=dict(color=PALETTE[1], width=2.5, dash=dash), name=f"{p:g}th percentile",
                                     showlegend=col == 1), row=1, col=col)
    who = "caption" if direction == "t2i" else "image"
    fig.update_layout(**layout(f"Neighbours of each {who} query scoring at least s", height=440,
                               margin=dict(l=60, r=20, t=90, b=50), legend=dict(orientation="h", y=-0.22)))
    fig.update_xaxes(title_text="similarity s", range=[-1.0, 1.0])
    fig.update_yaxes(type="log", dtick=1)  # ticks at powers of ten only
    fig.update_yaxes(title_text="number of neighbours with score ≥ s", row=1, col=1)
    return fig
