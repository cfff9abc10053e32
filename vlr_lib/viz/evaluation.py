"""Figures of notebooks 00-01: the data, a batch's similarity matrix and its rankings.

Builders are pure: numbers and tensors in, a `go.Figure` out. Ranks, recalls, positives and hardest negatives come
from vlr_lib.metrics and vlr_lib.similarity.
"""
from __future__ import annotations

import base64
import textwrap

import numpy as np
import plotly.graph_objects as go
import torch

from .. import metrics
from .._checks import check_int
from ._style import FONT_PX, NEGATIVE, NEUTRAL, POSITIVE, grid, matrix_axes, style, to_numpy
from .matrix import batch_marks, heatmap_traces, oriented

# --------------------------------------------------------------------------- data


def _png(image: np.ndarray) -> str:
    """An [H, W, 3] image as a uint8 PNG data URI: a few kB in the notebook instead of a JSON pixel array."""
    from ..data.shapes import encode_png  # numpy + zlib only

    png = encode_png(np.ascontiguousarray(image, dtype=np.uint8))
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def image_gallery(images, captions: list[list[str]], titles: list[str] | None = None, wrap: int = 30) -> go.Figure:
    """A row of images, each with its captions written underneath (notebook 00's data browser).

    `images`: k uint8 RGB arrays [H, W, 3] (a list, sizes may differ, or an array [k, H, W, 3]; PIL images work too).
    `captions[i]`: the captions of image i (five in Flickr30K and shapes), wrapped at `wrap` characters. Keep images
    small (thumbnails): they are embedded as PNG.
    """
    arrs = [np.asarray(im) for im in images]
    for n, a in enumerate(arrs):
        if a.ndim != 3 or a.shape[-1] != 3:
            raise ValueError(f"images[{n}] must be an [H, W, 3] RGB array, got shape {a.shape}")
    k = len(arrs)
    if k == 0:
        raise ValueError("images must hold at least one image")
    if len(captions) != k:
        raise ValueError(f"captions must have one list per image ({k}), got {len(captions)}")
    titles = titles or [f"image {i}" for i in range(k)]
    if len(titles) != k:
        raise ValueError(f"titles must have one entry per image ({k}), got {len(titles)}")
    fig = grid(1, k, titles, height=600, horizontal_spacing=0.03)
    n_lines = 0
    for i, a in enumerate(arrs):
        fig.add_trace(go.Image(source=_png(a), hoverinfo="skip", name=titles[i]), row=1, col=i + 1)
        wrapped = ["<br>".join(textwrap.wrap(f"{n + 1}. {c}", wrap)) for n, c in enumerate(captions[i])]
        text = "<br>".join(wrapped)
        n_lines = max(n_lines, text.count("<br>") + 1)
        axis = i + 1 if i else ""
        fig.add_annotation(
            text=text, showarrow=False, align="left", xanchor="left", yanchor="top",
            xref=f"x{axis} domain", yref=f"y{axis} domain", x=0.0, y=-0.03, font=dict(size=FONT_PX - 1),
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    # The captions hang under the images, in the bottom margin: one line of 11 px text is about 15 px.
    style(fig, "Images and their captions", height=300 + 15 * n_lines, legend=False,
          margin=dict(l=10, r=10, b=20 + 15 * n_lines))
    return fig


# --------------------------------------------------------------------------- rankings


def _batch(S, caption_to_image) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """S as float64, caption_to_image (the diagonal when None), the positive mask: checked by vlr_lib.metrics."""
    St = torch.as_tensor(to_numpy(S))
    if caption_to_image is None:
        if St.dim() != 2 or St.shape[0] != St.shape[1]:
            raise ValueError(f"caption_to_image is needed when S is not square, got shape {tuple(St.shape)}")
        caption_to_image = torch.arange(St.shape[1])
    c2i = torch.as_tensor(caption_to_image)
    return St, c2i, metrics.positive_pairs(St, c2i)


def similarity_figure(S, caption_to_image=None, title: str = "Similarity matrix S of a batch") -> go.Figure:
    """Heatmap of S with its positives and the hardest negative of every query, in both directions.

    `caption_to_image[c]` is the image of caption c; None means one caption per image, positives on the diagonal. Blue
    squares: the positives; vermillion triangles: the hardest negative of each image query (▶, in its row) and of each
    caption query (▼, in its column).
    """
    St, _, pos = _batch(S, caption_to_image)
    fig = go.Figure(heatmap_traces(St, batch_marks(St, pos)))
    return style(fig, title, height=420, xaxis="caption j", yaxis="image i", yaxis_autorange="reversed")


def retrieval_figure(S, caption_to_image, query: int = 0, direction: str = "i2t", k: int = 5) -> go.Figure:
    """Heatmap of S with positives and hardest negatives (top) and one query's ranking (bottom).

    Rows of S are images, columns captions; `caption_to_image[c]` is caption c's image. `direction` "i2t" takes image
    `query` (a row) and ranks all captions; "t2i" takes caption `query` (a column) and ranks all images. The bars are
    the query's candidates sorted by score, blue for positives, orange for negatives, a negative tied with a positive
    placed before it; the shaded band is the top `k`, so the query counts for R@k when a blue bar lies inside it.
    Ranks are those of `vlr_lib.metrics` (1 + the negatives scoring at or above the best positive).
    """
    St, c2i, pos = _batch(S, caption_to_image)
    Zq, Pq = oriented(St.numpy(), pos.numpy(), direction)  # the queries of `direction` as rows
    (n_img, n_cap), (n_queries, n_cand), i2t = St.shape, Zq.shape, direction == "i2t"
    query = check_int("query", query, 0, n_queries - 1)
    k = check_int("k", k, 1, n_cand)
    ranks = (metrics.ranks_i2t if i2t else metrics.ranks_t2i)(St, c2i)
    ks = tuple(r for r in (1, 5, 10) if r <= min(n_img, n_cap))  # the R@K a batch this size has
    scores = metrics.retrieval_metrics(St, c2i, ks=ks)

    row, is_pos = Zq[query], Pq[query]
    order = np.lexsort((is_pos, -row))  # by score, tied negatives first (the metrics' convention)
    cand = "caption" if i2t else "image"
    labels = [f"{cand} {j}" + (f" (of image {int(c2i[j])})" if i2t else "") for j in order]
    who = f"image {query}" if i2t else f"caption {query} (of image {int(c2i[query])})"
    rank = int(ranks[query])
    verdict = f"a hit for R@{k}" if rank <= k else f"a miss for R@{k}"
    # Stacked, each panel the full width: S is wide (a column per caption), and so is a ranking.
    fig = grid(2, 1, ["S: positives and hardest negatives (the query outlined)", f"{who}: rank {rank}, {verdict}"],
               height=640, row_heights=[0.45, 0.55])
    fig.add_traces(heatmap_traces(St, batch_marks(St, pos, (direction,))), rows=1, cols=1)
    top = fig.layout.yaxis.domain
    fig.data[0].colorbar.update(y=(top[0] + top[1]) / 2, len=top[1] - top[0], yanchor="middle")
    for positive, name in ((True, "positive candidate"), (False, "negative candidate")):
        sel = is_pos[order] == positive
        fig.add_trace(
            go.Bar(
                x=np.arange(1, n_cand + 1)[sel], y=row[order][sel], name=name, legendgroup=name,
                marker_color=POSITIVE if positive else NEGATIVE, customdata=np.asarray(labels, dtype=object)[sel],
                hovertemplate="position %{x}: %{customdata}<br>s = %{y:.3f}<extra></extra>",
            ),
            row=2, col=1,
        )
    # The selected query's row / column, outlined on the heatmap.
    box = dict(x0=-0.5, x1=n_cap - 0.5, y0=query - 0.5, y1=query + 0.5) if i2t else \
        dict(x0=query - 0.5, x1=query + 0.5, y0=-0.5, y1=n_img - 0.5)
    fig.add_shape(type="rect", line=dict(color="black", width=2), row=1, col=1, **box)
    fig.add_vrect(x0=0.5, x1=k + 0.5, fillcolor=NEUTRAL, opacity=0.15, line_width=0, row=2, col=1)
    metric_text = ", ".join(f"{key.replace('_r', ' R@')} {v:.0f}" for key, v in scores.items() if key != "rsum")
    style(fig, f"Retrieval on a toy batch: rsum (K = {','.join(map(str, ks))}) {scores['rsum']:.0f}", height=640,
          subtitle=metric_text, barmode="overlay")
    matrix_axes(fig, 1, 1, square=False)
    fig.update_xaxes(title_text=f"position in the ranking of {n_cand} {cand}s", range=[0.5, n_cand + 0.5], row=2, col=1)
    fig.update_yaxes(title_text="similarity s", range=[-1.0, 1.0], row=2, col=1)
    return fig
