"""Figures of notebooks 00-01: the data, a batch's similarity matrix and its rankings.

Builders are pure: numbers and tensors in, a `go.Figure` out. `demo_retrieval_batch`
makes the small live batch the evaluation explorer needs (several captions per image).
"""
from __future__ import annotations

import base64
import textwrap

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import metrics
from .._checks import check_choice
from ..similarity import l2_normalize, positive_mask
from ._style import NEGATIVE, NEUTRAL, POSITIVE, layout, to_numpy
from .matrix import similarity_heatmap

DIRECTIONS = ("i2t", "t2i")


# --------------------------------------------------------------------------- data


def demo_retrieval_batch(
    n_images: int = 8, captions_per_image: int = 5, dim: int = 16, noise: float = 0.8, seed: int = 0
) -> tuple[Tensor, Tensor, Tensor]:
    """A toy evaluation set: unit image embeddings and `captions_per_image` noisy copies of each.

    Caption c of image i is norm(img_i + noise * eps_c), so `noise` sets the difficulty
    (0: every caption equals its image). Returns (img [N, dim], txt [N * k, dim],
    caption_to_image [N * k]), captions grouped by image as in Flickr30K. With
    `captions_per_image=1` this is exactly `vlr_lib.notebook.demo_embeddings`.
    """
    for name, value, low in (("n_images", n_images, 2), ("captions_per_image", captions_per_image, 1), ("dim", dim, 2)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a finite number >= 0, got {noise}")
    g = torch.Generator().manual_seed(seed)
    img = torch.randn(n_images, dim, generator=g, dtype=torch.float64)
    txt = img.repeat_interleave(captions_per_image, 0)
    txt = txt + noise * torch.randn(txt.shape, generator=g, dtype=torch.float64)
    c2i = torch.arange(n_images).repeat_interleave(captions_per_image)
    return l2_normalize(img), l2_normalize(txt), c2i


def _as_images(images) -> list[np.ndarray]:
    arrs = [np.asarray(im) for im in images]
    for n, a in enumerate(arrs):
        if a.ndim != 3 or a.shape[-1] != 3:
            raise ValueError(f"images[{n}] must be an [H, W, 3] RGB array, got shape {a.shape}")
    return [a.astype(np.uint8) for a in arrs]


def png_source(image: np.ndarray) -> str:
    """A uint8 [H, W, 3] image as a PNG data URI: a few kB in the notebook instead of a JSON pixel array."""
    from ..data.shapes import encode_png  # numpy + zlib only

    return "data:image/png;base64," + base64.b64encode(encode_png(np.ascontiguousarray(image))).decode("ascii")


def image_gallery(images, captions: list[list[str]], titles: list[str] | None = None, wrap: int = 34) -> go.Figure:
    """A row of images, each with its captions written underneath (notebook 00's data browser).

    `images`: k uint8 RGB arrays [H, W, 3] (a list, sizes may differ, or an array
    [k, H, W, 3]; PIL images work too). `captions[i]`: the captions of image i (five in
    Flickr30K and shapes). Keep images small (thumbnails): they are embedded as PNG.
    """
    arrs = _as_images(images)
    k = len(arrs)
    if k == 0:
        raise ValueError("images must hold at least one image")
    if len(captions) != k:
        raise ValueError(f"captions must have one list per image ({k}), got {len(captions)}")
    titles = titles or [f"image {i}" for i in range(k)]
    if len(titles) != k:
        raise ValueError(f"titles must have one entry per image ({k}), got {len(titles)}")
    fig = make_subplots(1, k, subplot_titles=titles, horizontal_spacing=0.02)
    for i, a in enumerate(arrs):
        fig.add_trace(go.Image(source=png_source(a), hoverinfo="skip", name=titles[i]), row=1, col=i + 1)
        lines = ["<br>".join(textwrap.wrap(f"{n + 1}. {c}", wrap)) for n, c in enumerate(captions[i])]
        axis = i + 1 if i else ""
        fig.add_annotation(
            text="<br>".join(lines), showarrow=False, align="left", xanchor="left", yanchor="top",
            xref=f"x{axis} domain", yref=f"y{axis} domain", x=0.0, y=-0.04, font=dict(size=10),
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(**layout("Images and their captions", height=560, margin=dict(l=10, r=10, t=60, b=270)))
    return fig


# --------------------------------------------------------------------------- rankings


def positive_mask_of(caption_to_image, n_images: int) -> np.ndarray:
    """Bool [n_images, n_captions]: True where caption c describes image i."""
    c2i = to_numpy(caption_to_image)
    if c2i.ndim != 1 or (c2i != np.round(c2i)).any() or (c2i < 0).any() or (c2i >= n_images).any():
        raise ValueError(f"caption_to_image must be a 1-D array of image indices in [0, {n_images})")
    return positive_mask(torch.arange(n_images), torch.from_numpy(c2i.astype(np.int64))).numpy()


def hardest_negative_mask(S, pos: np.ndarray, direction: str = "i2t") -> np.ndarray:
    """Bool mask of each query's hardest (highest-scoring) negative: per row (i2t) or per column (t2i)."""
    check_choice("direction", direction, DIRECTIONS)
    Z = to_numpy(S)
    if Z.ndim != 2 or np.shape(pos) != Z.shape:
        raise ValueError(f"pos must be a bool mask of the shape of S {Z.shape}, got {np.shape(pos)}")
    Z = np.where(pos, -np.inf, Z)
    out = np.zeros_like(pos)
    if direction == "i2t":
        out[np.arange(Z.shape[0]), Z.argmax(axis=1)] = True
    else:
        out[Z.argmax(axis=0), np.arange(Z.shape[1])] = True
    return out & ~pos


def heatmap_traces(S, marks: dict[str, object], **kwargs) -> tuple:
    """The traces of `matrix.similarity_heatmap(S, marks, ...)`, ready to add to a subplot."""
    return similarity_heatmap(S, marks=marks, **kwargs).data


def similarity_figure(S, caption_to_image=None, title: str = "Similarity matrix S of a batch") -> go.Figure:
    """Heatmap of S with its positives and the hardest negative of every query, in both directions.

    `caption_to_image[c]` is the image of caption c; None means one caption per image,
    positives on the diagonal. Circles: hardest negative of each image query (its row);
    diamonds: of each caption query (its column).
    """
    Z = to_numpy(S)
    if Z.ndim != 2:
        raise ValueError(f"S must be 2-D, got shape {Z.shape}")
    if caption_to_image is None:
        if Z.shape[0] != Z.shape[1]:
            raise ValueError(f"caption_to_image is needed when S is not square, got shape {Z.shape}")
        caption_to_image = np.arange(Z.shape[1])
    pos = positive_mask_of(caption_to_image, Z.shape[0])
    if pos.shape != Z.shape:
        raise ValueError(f"caption_to_image must have one entry per column of S ({Z.shape[1]}), got {pos.shape[1]}")
    marks = {
        "positive": pos,
        "hardest negative of the image (row)": hardest_negative_mask(Z, pos, "i2t"),
        "hardest negative of the caption (column)": hardest_negative_mask(Z, pos, "t2i"),
    }
    fig = go.Figure(heatmap_traces(Z, marks))
    fig.update_layout(**layout(title, "caption j", "image i", legend=dict(orientation="h", y=-0.2)))
    fig.update_yaxes(autorange="reversed")
    return fig


def _ks(n_images: int, n_captions: int) -> tuple[int, ...]:
    return tuple(k for k in (1, 5, 10) if k <= min(n_images, n_captions))


def retrieval_figure(S, caption_to_image, query: int = 0, direction: str = "i2t", k: int = 5) -> go.Figure:
    """Heatmap of S with positives and hardest negatives (left) and one query's ranking (right).

    Rows of S are images, columns captions; `caption_to_image[c]` is caption c's image.
    `direction` "i2t" takes image `query` (a row) and ranks all captions; "t2i" takes
    caption `query` (a column) and ranks all images. The bars are the query's candidates
    sorted by score, green for positives, red for negatives; the shaded band is the top
    `k`, so the query counts for R@k when a green bar lies inside it. Ranks are those of
    `vlr_lib.metrics` (1 + number of candidates strictly above the best positive).
    """
    check_choice("direction", direction, DIRECTIONS)
    Z = to_numpy(S)
    if Z.ndim != 2:
        raise ValueError(f"S must be 2-D, got shape {Z.shape}")
    n_img, n_cap = Z.shape
    St = torch.as_tensor(Z)
    c2i = torch.as_tensor(np.asarray(to_numpy(caption_to_image), dtype=np.int64))
    n_queries = n_img if direction == "i2t" else n_cap
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not 0 <= query < n_queries:
        raise ValueError(f"query must be an int in [0, {n_queries}) for direction {direction!r}, got {query!r}")
    n_cand = n_cap if direction == "i2t" else n_img
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n_cand:
        raise ValueError(f"k must be an int in [1, {n_cand}], got {k!r}")
    pos = positive_mask_of(c2i, n_img)
    ranks = (metrics.ranks_i2t if direction == "i2t" else metrics.ranks_t2i)(St, c2i).numpy()
    scores = metrics.retrieval_metrics(St, c2i, ks=_ks(n_img, n_cap))

    # Left: S with the positives and the hardest negative of every query of this direction.
    heat = heatmap_traces(Z, {"positive": pos, "hardest negative": hardest_negative_mask(Z, pos, direction)})
    # Right: the query's candidates, best first.
    row = Z[query] if direction == "i2t" else Z[:, query]
    is_pos = pos[query] if direction == "i2t" else pos[:, query]
    order = np.argsort(-row, kind="stable")
    cand = "caption" if direction == "i2t" else "image"
    labels = [f"{cand} {j}" + (f" (of image {int(c2i[j])})" if direction == "i2t" else "") for j in order]
    who = f"image {query}" if direction == "i2t" else f"caption {query} (of image {int(c2i[query])})"
    rank = int(ranks[query])
    verdict = f"a hit for R@{k}" if rank <= k else f"a miss for R@{k}"
    fig = make_subplots(
        1, 2, column_widths=[0.6, 0.4], horizontal_spacing=0.12,
        subplot_titles=["S: positives and hardest negatives", f"{who}: rank {rank}, {verdict}"],
    )
    for tr in heat:
        fig.add_trace(tr, row=1, col=1)
    fig.data[0].colorbar.update(x=0.5, len=0.8, thickness=12)
    fig.add_trace(
        go.Bar(
            x=np.arange(1, n_cand + 1), y=row[order], name="ranking",
            marker_color=np.where(is_pos[order], POSITIVE, NEGATIVE), showlegend=False,
            hovertext=labels, hovertemplate="position %{x}: %{hovertext}<br>s = %{y:.3f}<extra></extra>",
        ),
        row=1, col=2,
    )
    # The selected query's row / column, outlined on the heatmap.
    box = (
        dict(x0=-0.5, x1=n_cap - 0.5, y0=query - 0.5, y1=query + 0.5)
        if direction == "i2t"
        else dict(x0=query - 0.5, x1=query + 0.5, y0=-0.5, y1=n_img - 0.5)
    )
    fig.add_shape(type="rect", line=dict(color="black", width=2), row=1, col=1, **box)
    fig.add_vrect(x0=0.5, x1=k + 0.5, fillcolor=NEUTRAL, opacity=0.15, line_width=0, row=1, col=2)
    metric_text = ", ".join(f"{key.replace('_r', ' R@')} {v:.0f}" for key, v in scores.items() if key != "rsum")
    ks = ",".join(str(k) for k in _ks(n_img, n_cap))
    fig.update_layout(
        **layout(
            f"{metric_text} | rsum (K = {ks}) {scores['rsum']:.0f}", height=460, width=1000,
            legend=dict(orientation="h", y=-0.18), title_font=dict(size=13),
        )
    )
    fig.update_xaxes(title_text="caption j", row=1, col=1)
    fig.update_yaxes(title_text="image i", autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text=f"position in the ranking of {n_cand} {cand}s", range=[0.5, n_cand + 0.5], row=1, col=2)
    fig.update_yaxes(title_text="similarity s", range=[-1.0, 1.0], row=1, col=2)
    return fig
