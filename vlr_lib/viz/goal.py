"""Figures of GOAL (Xuan & Chen, sec. 3): triplet-weight diagrams, pair-weight curves, Table 1,
the designed weight surface T*P and the designed gradient dL/dS of a batch.

Pure functions: numbers and tensors in, `go.Figure` out. Every weight is computed by
vlr_lib.goal; nothing here re-implements a formula. Diagrams put S_pos on the x-axis and
S_neg on the y-axis, as the paper's Fig. 2 does, so `z[i, j]` is the value at
(S_pos = x[j], S_neg = y[i]).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from .. import goal
from .._checks import check_choice, check_similarity
from ._style import NEGATIVE, POSITIVE, SEQUENTIAL, layout, to_numpy
from .evaluation import hardest_negative_mask
from .matrix import similarity_heatmap

__all__ = [
    "MAX_GRID",
    "similarity_grid",
    "triplet_diagram",
    "triplet_diagrams",
    "pair_weight_curves",
    "table1_grid",
    "weight_surface",
    "hardest_negative_masks",
    "batch_triplets",
    "gradient_heatmap",
]

MAX_GRID = 80  # surfaces stay <= 80 x 80 so notebooks stay small
_TRIPLET_TITLES = {"con": "T<sup>con</sup> (eq. 5)", "nca": "T<sup>nca</sup> (eq. 7)", "cir": "T<sup>cir</sup> (eq. 8)"}
_PAIR_TITLES = {
    "con": "P<sup>con</sup> (eq. 9)",
    "lin": "P<sup>lin</sup> (eq. 10)",
    "sig": "P<sup>sig</sup> (eq. 11)",
    "lin-ms": "P<sup>lin-ms</sup> (eq. 13)",
    "sig-ms": "P<sup>sig-ms</sup> (eq. 12)",
}
_LEVELS = dict(start=0.1, end=0.9, size=0.1)  # iso-lines of a weight in [0, 1]


def similarity_grid(n: int = 61) -> np.ndarray:
    """`n` evenly spaced cosine similarities covering [-1, 1] (the axes of every diagram)."""
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= MAX_GRID:
        raise ValueError(f"n must be an integer in [2, {MAX_GRID}], got {n!r}")
    return np.linspace(-1.0, 1.0, n)


def _mesh(n: int) -> tuple[np.ndarray, Tensor, Tensor]:
    """The grid and (S_pos, S_neg) tensors with S_pos varying along columns, S_neg along rows."""
    s = similarity_grid(n)
    t = torch.from_numpy(s)
    return s, t[None, :].expand(n, n), t[:, None].expand(n, n)


# --------------------------------------------------------------------------- Fig. 2


def _display(x) -> np.ndarray:
    """float32 for the browser: plotly ships arrays as binary, and half the bytes keep notebooks small."""
    return to_numpy(x).astype(np.float32)


def _triplet_trace(name: str, margin: float, tau: float, n: int, showscale: bool) -> go.Contour:
    """One T as a heatmap-coloured contour: the colours and the iso-lines 0.1, ..., 0.9 in a single trace."""
    s, s_pos, s_neg = _mesh(n)
    T = _display(goal.triplet_weight(name, s_pos, s_neg, margin=margin, tau=tau))
    return go.Contour(
        x=s, y=s, z=T, zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL, showscale=showscale, name=f"T^{name}",
        contours=dict(coloring="heatmap", showlines=True, **_LEVELS), autocontour=False,
        line=dict(color="white", width=1), colorbar=dict(title="T"),
        hovertemplate="S_pos %{x:.2f}, S_neg %{y:.2f}<br>T %{z:.3f}<extra></extra>",
    )


def triplet_diagram(name: str, margin: float = 0.2, tau: float = 10.0, n: int = 61) -> go.Figure:
    """Triplet-weight diagram of one T over (S_pos, S_neg) in [-1, 1]^2 with iso-lines 0.1, ..., 0.9.

    Xuan & Chen Fig. 2 (a diagram from Xuan et al. 2020): T^con (eq. 5) uses `margin`,
    T^nca (eq. 7) and T^cir (eq. 8) use `tau`. Traces: [contour coloured as a heatmap].
    """
    check_choice("name", name, goal.GOAL_TRIPLETS)
    fig = go.Figure(_triplet_trace(name, margin, tau, n, showscale=True))
    fig.update_layout(**layout(f"Triplet weight {_TRIPLET_TITLES[name]}", "S_pos = s(x, y)", "S_neg = s(x, y')"))
    fig.update_xaxes(range=[-1, 1], constrain="domain")
    fig.update_yaxes(range=[-1, 1], scaleanchor="x", constrain="domain")
    return fig


def triplet_diagrams(margin: float = 0.2, tau: float = 10.0, n: int = 61) -> go.Figure:
    """The three diagrams of Fig. 2 side by side: T^con, T^nca, T^cir (defaults m = 0.2, tau = 10).

    Traces: one contour per panel, in that order.
    """
    names = goal.GOAL_TRIPLETS
    fig = make_subplots(rows=1, cols=3, subplot_titles=[_TRIPLET_TITLES[t] for t in names], horizontal_spacing=0.06)
    for k, name in enumerate(names, start=1):
        fig.add_trace(_triplet_trace(name, margin, tau, n, showscale=k == 1), row=1, col=k)
    fig.update_layout(**layout(f"Triplet weights (m = {margin:g}, τ = {tau:g})"), height=380)
    fig.update_xaxes(range=[-1, 1], title_text="S_pos", constrain="domain")
    fig.update_yaxes(range=[-1, 1], constrain="domain")
    fig.update_yaxes(title_text="S_neg", row=1, col=1)
    for k in range(1, 4):  # square panels
        fig.update_yaxes(scaleanchor=f"x{'' if k == 1 else k}", row=1, col=k)
    return fig


# --------------------------------------------------------------------------- Fig. 3


def pair_weight_curves(
    alpha: float = 2.0,
    beta: float = 10.0,
    lam: float = 0.5,
    rel: float = 0.1,
    pairs: tuple[str, ...] = goal.GOAL_PAIRS,
    n: int = 101,
) -> go.Figure:
    """Pair weights P_+ (against S_pos) and P_- (against S_neg) on [-1, 1], one panel per pair weight.

    Xuan & Chen Fig. 3: alpha = 2, beta = 10, lambda = 0.5 and, for the MS forms, a fixed
    relative term m_+ = m_- = `rel` = 0.1 (in training m comes from the batch,
    :func:`vlr_lib.goal.relative_term`). Traces: for each pair in `pairs`, [P_+, P_-].
    """
    if not pairs:
        raise ValueError("pairs must name at least one pair weight")
    for p in pairs:
        check_choice("pairs", p, goal.GOAL_PAIRS)
    if not isinstance(n, int) or not 2 <= n <= 1001:
        raise ValueError(f"n must be an integer in [2, 1001], got {n!r}")
    s = np.linspace(-1.0, 1.0, n)
    st = torch.from_numpy(s)
    s = s.astype(np.float32)
    fig = make_subplots(rows=1, cols=len(pairs), subplot_titles=[_PAIR_TITLES[p] for p in pairs])
    for k, p in enumerate(pairs, start=1):
        extra = dict(rel=rel) if p in ("lin-ms", "sig-ms") else {}
        for positive, colour, dash, label in ((True, POSITIVE, "solid", "P₊ (positive pair)"),
                                              (False, NEGATIVE, "dash", "P₋ (negative pair)")):
            w = _display(goal.pair_weight(p, st, positive, alpha=alpha, beta=beta, lam=lam, **extra))
            fig.add_trace(
                go.Scatter(x=s, y=w, mode="lines", name=label, line=dict(color=colour, width=2.5, dash=dash),
                           legendgroup=label, showlegend=k == 1,
                           hovertemplate=f"{p}: s %{{x:.2f}}, weight %{{y:.3f}}<extra></extra>"),
                row=1, col=k,
            )
    fig.update_layout(**layout(
        f"Pair weights (α = {alpha:g}, β = {beta:g}, λ = {lam:g}, MS term m = {rel:g})",
        legend=dict(orientation="h", y=-0.2),
    ), height=340)
    fig.update_xaxes(range=[-1, 1], title_text="similarity s")
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text="weight", row=1, col=1)
    return fig


# --------------------------------------------------------------------------- Table 1


def table1_grid(
    values: Mapping[tuple[str, str], float] | None = None,
    highlight: tuple[str, str] | None = None,
    title: str = "Table 1: which loss each (triplet weight, pair weight) gradient is",
    value_label: str = "",
) -> go.Figure:
    """Table 1 of Xuan & Chen as a 5 x 3 grid (rows: pair weights, columns: triplet weights).

    Each cell is annotated with the existing loss the combination reproduces
    (:data:`vlr_lib.goal.TABLE1`, "New" where none does). Without `values`, named losses
    are shaded and "New" cells left pale; with `values` (one number per combination, e.g.
    a recall from Tables 3-5) the cells are coloured by them and the number is printed.
    `highlight` outlines one cell. Traces: [heatmap]; the outline is a layout shape.
    """
    triplets, pairs = goal.GOAL_TRIPLETS, goal.GOAL_PAIRS
    if values is not None:
        missing = [key for key in goal.TABLE1 if key not in values]
        extra = [key for key in values if key not in goal.TABLE1]
        if missing or extra:
            raise ValueError(
                f"values must have exactly the 15 (triplet, pair) keys; missing {missing}, unknown {extra}"
            )
        z = np.array([[float(values[(t, p)]) for t in triplets] for p in pairs])
        if not np.isfinite(z).all():
            raise ValueError("values must be finite numbers")
    else:
        z = np.array([[0.0 if goal.TABLE1[(t, p)] == "New" else 1.0 for t in triplets] for p in pairs])
    x = [f"T^{t}" for t in triplets]
    y = [f"P^{p}" for p in pairs]
    text = [
        [goal.TABLE1[(t, p)] + ("" if values is None else f"<br><b>{values[(t, p)]:.1f}</b>") for t in triplets]
        for p in pairs
    ]
    heat = go.Heatmap(
        z=z, x=x, y=y, text=text, texttemplate="%{text}", textfont=dict(size=12),
        colorscale=SEQUENTIAL if values is not None else [[0, "#f2f2f2"], [1, "#9ecae1"]],
        showscale=values is not None, colorbar=dict(title=value_label), xgap=2, ygap=2,
        hovertemplate="%{x} × %{y}: %{text}<extra></extra>",
    )
    fig = go.Figure(heat)
    fig.update_layout(**layout(title, "triplet weight T", "pair weight P"), height=420)
    fig.update_yaxes(autorange="reversed")
    if highlight is not None:
        if tuple(highlight) not in goal.TABLE1:
            raise ValueError(f"highlight must be a (triplet, pair) key of Table 1, got {highlight!r}")
        t, p = highlight
        i, j = pairs.index(p), triplets.index(t)
        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                      line=dict(color=NEGATIVE, width=4), name="selected")
    return fig


# --------------------------------------------------------------------------- the composer's surfaces


def _surface_weights(triplet, pair, margin, tau, alpha, beta, lam, rel, n):
    s, s_pos, s_neg = _mesh(n)
    T = goal.triplet_weight(triplet, s_pos, s_neg, margin=margin, tau=tau)
    extra = dict(rel=rel) if pair in ("lin-ms", "sig-ms") else {}
    w_pos = T * goal.pair_weight(pair, s_pos, True, alpha=alpha, beta=beta, lam=lam, **extra)
    w_neg = T * goal.pair_weight(pair, s_neg, False, alpha=alpha, beta=beta, lam=lam, **extra)
    return s, _display(w_pos), _display(w_neg)


def weight_surface(
    triplet: str,
    pair: str,
    margin: float = 0.2,
    tau: float = 10.0,
    alpha: float = 2.0,
    beta: float = 10.0,
    lam: float = 0.5,
    rel: float = 0.1,
    n: int = 61,
    points: tuple[object, object] | None = None,
) -> go.Figure:
    """The designed gradient of one triplet over (S_pos, S_neg): |dL/dS_pos| = T*P_+ and dL/dS_neg = T*P_-.

    Xuan & Chen eqs. 3-13: GOAL pulls the positive with weight T(S_pos, S_neg) * P_+(S_pos)
    and pushes the hardest negative with T(S_pos, S_neg) * P_-(S_neg). The MS pair weights
    depend on the batch through m; here m_+ = m_- = `rel` (Fig. 3 uses 0.1). `points`
    = (s_pos, s_neg) overlays a batch's triplets (see :func:`batch_triplets`).
    Traces: [pull heatmap, push heatmap, pull points, push points]; both heatmaps share
    one colour axis from 0 to the larger maximum.
    """
    check_choice("triplet", triplet, goal.GOAL_TRIPLETS)
    check_choice("pair", pair, goal.GOAL_PAIRS)
    s, w_pos, w_neg = _surface_weights(triplet, pair, margin, tau, alpha, beta, lam, rel, n)
    px = py = np.zeros(0)
    if points is not None:
        px, py = (to_numpy(p).ravel() for p in points)
        if px.shape != py.shape:
            raise ValueError(f"points must be two arrays of equal length, got {px.shape} and {py.shape}")
    top = max(float(w_pos.max()), float(w_neg.max()), 1e-12)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=[
        "pull on the positive: T·P₊ = −∂L/∂S_pos", "push on the hardest negative: T·P₋ = ∂L/∂S_neg"])
    for k, w in enumerate((w_pos, w_neg), start=1):
        fig.add_trace(go.Heatmap(
            x=s, y=s, z=w, coloraxis="coloraxis", name="T·P₊" if k == 1 else "T·P₋",
            hovertemplate="S_pos %{x:.2f}, S_neg %{y:.2f}<br>weight %{z:.3f}<extra></extra>"), row=1, col=k)
    for k in (1, 2):
        fig.add_trace(go.Scatter(
            x=px, y=py, mode="markers", name="batch triplets", showlegend=k == 1, legendgroup="batch",
            marker=dict(color="white", size=7, line=dict(color="black", width=1.5)),
            hovertemplate="S_pos %{x:.3f}, S_neg %{y:.3f}<extra>triplet</extra>"), row=1, col=k)
    fig.update_layout(**layout(
        f"Designed weights of ({triplet}, {pair}): T<sup>{triplet}</sup> × P<sup>{pair}</sup>",
        legend=dict(orientation="h", y=-0.2),
    ), coloraxis=dict(colorscale=SEQUENTIAL, cmin=0.0, cmax=top, colorbar=dict(title="weight")), height=420)
    fig.update_xaxes(range=[-1, 1], title_text="S_pos", constrain="domain")
    fig.update_yaxes(range=[-1, 1], title_text="S_neg", constrain="domain")
    fig.update_yaxes(scaleanchor="x", row=1, col=1)
    fig.update_yaxes(scaleanchor="x2", row=1, col=2)
    return fig


# --------------------------------------------------------------------------- a live batch


def hardest_negative_masks(S, pos_mask: Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bool masks of the hardest negative of every image query (row) and of every caption query (column).

    One entry per query (the first maximum, as torch.max picks in vlr_lib.goal and
    vlr_lib.losses.triplet_hardest); the search itself is viz.evaluation's.
    """
    S, pos = check_similarity(torch.as_tensor(S) if not isinstance(S, Tensor) else S, pos_mask)
    Z, is_pos = to_numpy(S), (~pos.neg).cpu().numpy()
    return hardest_negative_mask(Z, is_pos, "i2t"), hardest_negative_mask(Z, is_pos, "t2i")


def batch_triplets(S, pos_mask: Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(s_pos, s_neg) of every anchor triplet of the batch, image queries first, then caption queries."""
    S, pos = check_similarity(S, pos_mask)
    Z = to_numpy(S)
    rows_hn, cols_hn = hardest_negative_masks(S, pos_mask)
    r, c = to_numpy(pos.rows).astype(int), to_numpy(pos.cols).astype(int)
    s_pos = Z[r, c]
    s_neg_rows = np.where(rows_hn, Z, -np.inf).max(axis=1)[r]
    s_neg_cols = np.where(cols_hn, Z, -np.inf).max(axis=0)[c]
    return np.concatenate([s_pos, s_pos]), np.concatenate([s_neg_rows, s_neg_cols])


def gradient_heatmap(
    S: Tensor,
    triplet: str = "con",
    pair: str = "con",
    margin: float = 0.2,
    tau: float = 10.0,
    alpha: float = 2.0,
    beta: float = 10.0,
    lam: float = 0.5,
    eps: float = 0.1,
    pos_mask: Tensor | None = None,
    title: str | None = None,
) -> go.Figure:
    """The designed dL/dS of a batch (:func:`vlr_lib.goal.goal_gradient`) on a diverging scale.

    Positives and the hardest negatives of image queries (rows) and caption queries
    (columns) are outlined: GOAL puts gradient on those cells only. Blue (< 0) pulls a
    similarity up, red (> 0) pushes it down. Traces: [heatmap, positives, hardest
    negatives of image queries, hardest negatives of caption queries].
    """
    G = goal.goal_gradient(S, triplet, pair, margin=margin, tau=tau, alpha=alpha, beta=beta, lam=lam,
                           eps=eps, pos_mask=pos_mask)
    pos = torch.eye(S.shape[0], dtype=torch.bool) if pos_mask is None else pos_mask
    rows_hn, cols_hn = hardest_negative_masks(S, pos_mask)
    top = float(G.abs().max())
    top = top if top > 0 else 1.0
    return similarity_heatmap(
        G,
        marks={"positive": pos.cpu(), "hardest negative (image query)": rows_hn,
               "hardest negative (caption query)": cols_hn},
        title=title or f"Designed gradient ∂L/∂S of ({triplet}, {pair})",
        zrange=(-top, top), diverging=True, colorbar_title="∂L/∂S",
    )
