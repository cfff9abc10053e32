"""Figures of GOAL (Xuan & Chen, sec. 3): triplet-weight diagrams, pair-weight curves, Table 1, the designed weight
surface T*P and the designed gradient dL/dS of a batch.

Pure functions: numbers and tensors in, `go.Figure` out. Every weight is computed by vlr_lib.goal; the composed
figures take a :class:`vlr_lib.goal.GoalConfig`. Diagrams put S_pos on the x-axis and S_neg on the y-axis, as the
paper's Fig. 2 does, so `z[i, j]` is the value at (S_pos = x[j], S_neg = y[i]).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
import torch
from torch import Tensor

from .. import goal
from .._checks import check_choice, check_int
from ..goal import GoalConfig
from ._style import FONT_PX, NEGATIVE, POSITIVE, SEQUENTIAL, frame_cell, grid, panels, position, style, to_numpy
from .matrix import batch_marks
from .matrix import gradient_heatmap as _gradient_heatmap

__all__ = ["MAX_GRID", "triplet_diagrams", "pair_weight_curves", "table1_grid", "weight_surface", "gradient_heatmap"]

MAX_GRID = 80  # surfaces stay <= 80 x 80 so notebooks stay small
_T_EQ, _P_EQ = {"con": 5, "nca": 7, "cir": 8}, {"con": 9, "lin": 10, "sig": 11, "lin-ms": 13, "sig-ms": 12}


def _title(kind: str, name: str) -> str:
    """ "T<sup>nca</sup> (eq. 7)": a weight and its equation in Xuan & Chen."""
    return f"{kind}<sup>{name}</sup> (eq. {(_T_EQ if kind == 'T' else _P_EQ)[name]})"


def _mesh(n: int) -> tuple[np.ndarray, Tensor, Tensor]:
    """n cosines covering [-1, 1] and the (S_pos, S_neg) tensors, S_pos along columns, S_neg along rows."""
    s = np.linspace(-1.0, 1.0, check_int("n", n, 2, MAX_GRID))
    t = torch.from_numpy(s)
    return s, t[None, :].expand(n, n), t[:, None].expand(n, n)


def _display(x) -> np.ndarray:
    """float32 for the browser: plotly ships arrays as binary, and half the bytes keep notebooks small."""
    return to_numpy(x).astype(np.float32)


# --------------------------------------------------------------------------- Fig. 2


def triplet_diagrams(margin: float = 0.2, tau: float = 10.0, n: int = 61) -> go.Figure:
    """The three diagrams of Fig. 2 side by side: T^con, T^nca, T^cir (defaults m = 0.2, tau = 10).

    Traces: one contour per panel, in that order.
    """
    s, s_pos, s_neg = _mesh(n)
    fig = grid(1, 3, [_title("T", t) for t in goal.GOAL_TRIPLETS], height=400, column_gap_px=45)
    for k, name in enumerate(goal.GOAL_TRIPLETS, start=1):
        T = _display(goal.triplet_weight(name, s_pos, s_neg, margin=margin, tau=tau))
        # A heatmap-coloured contour: the colours and the iso-lines 0.1, ..., 0.9 in a single trace.
        fig.add_trace(go.Contour(
            x=s, y=s, z=T, zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL, showscale=k == 1, name=f"T^{name}",
            contours=dict(coloring="heatmap", showlines=True, start=0.1, end=0.9, size=0.1), autocontour=False,
            line=dict(color="white", width=1), colorbar=dict(title="T"),
            hovertemplate="S_pos %{x:.2f}, S_neg %{y:.2f}<br>T %{z:.3f}<extra></extra>",
        ), row=1, col=k)
    style(fig, f"Triplet weights (m = {margin:.2f}, τ = {tau:.0f})", height=400, legend=False)
    _cosine_panels(fig, 3)
    return fig


def _cosine_panels(fig: go.Figure, cols: int) -> None:
    """Square (S_pos, S_neg) panels over [-1, 1]^2 in one row, the S_neg ticks on the first only."""
    fig.update_xaxes(range=[-1, 1], title_text="S_pos", constrain="domain")
    fig.update_yaxes(range=[-1, 1], constrain="domain")
    fig.update_yaxes(title_text="S_neg", row=1, col=1)
    for k in range(2, cols + 1):
        fig.update_yaxes(scaleanchor=f"x{k}", showticklabels=False, row=1, col=k)
    fig.update_yaxes(scaleanchor="x", row=1, col=1)


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

    Xuan & Chen Fig. 3: alpha = 2, beta = 10, lambda = 0.5 and, for the MS forms, a fixed relative term m_+ = m_- =
    `rel` = 0.1 (in training m comes from the batch, :func:`vlr_lib.goal.relative_term`). Traces: for each pair in
    `pairs`, [P_+, P_-].
    """
    if not pairs:
        raise ValueError("pairs must name at least one pair weight")
    for p in pairs:
        check_choice("pairs", p, goal.GOAL_PAIRS)
    st = torch.linspace(-1.0, 1.0, check_int("n", n, 2, 1001), dtype=torch.float64)
    s = _display(st)
    # five panels wrap into two rows of three
    fig, cols, height = panels([_title("P", p) for p in pairs], 3, first_px=300, row_px=260, column_gap_px=55)
    for k, p in enumerate(pairs):
        row, col = position(k, cols)
        for positive, colour, dash, label in ((True, POSITIVE, "solid", "P₊ (positive pair)"),
                                              (False, NEGATIVE, "dash", "P₋ (negative pair)")):
            w = _display(GoalConfig(pair=p, alpha=alpha, beta=beta, lam=lam).pair_weights(st, positive, rel))
            fig.add_trace(
                go.Scatter(x=s, y=w, mode="lines", name=label, line=dict(color=colour, width=2.5, dash=dash),
                           legendgroup=label, showlegend=k == 0,
                           hovertemplate=f"{p}: s %{{x:.2f}}, weight %{{y:.3f}}<extra></extra>"),
                row=row, col=col,
            )
        fig.update_xaxes(title_text="similarity s" if k + cols >= len(pairs) else None, row=row, col=col)  # bottom row
    style(fig, f"Pair weights (α = {alpha:.1f}, β = {beta:.0f}, λ = {lam:.2f}, MS term m = {rel:.2f})", height=height)
    fig.update_xaxes(range=[-1, 1])
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text="weight", col=1)
    return fig


# --------------------------------------------------------------------------- Table 1


def table1_grid(
    values: Mapping[tuple[str, str], float] | None = None,
    highlight: tuple[str, str] | None = None,
    title: str = "Table 1: which loss each (triplet weight, pair weight) gradient is",
    value_label: str = "",
) -> go.Figure:
    """Table 1 of Xuan & Chen as a 5 x 3 grid (rows: pair weights, columns: triplet weights).

    Each cell is annotated with the existing loss the combination reproduces (:data:`vlr_lib.goal.TABLE1`, "New" where
    none does). Without `values`, named losses are shaded and "New" cells left pale; with `values` (one number per
    combination, e.g. a recall from Tables 3-5) the cells are coloured by them and the number is printed. `highlight`
    outlines one cell. Traces: [heatmap]; the outline is a layout shape.
    """
    triplets, pairs = goal.GOAL_TRIPLETS, goal.GOAL_PAIRS
    names = [[goal.TABLE1[(t, p)] for t in triplets] for p in pairs]
    if values is None:  # named losses shaded, "New" cells pale
        z, text = np.array([[n != "New" for n in row] for row in names], dtype=float), names
    else:
        z = goal.table1_values(values)
        text = [[f"{n}<br><b>{v:.1f}</b>" for n, v in zip(rn, rz)] for rn, rz in zip(names, z)]
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"T^{t}" for t in triplets], y=[f"P^{p}" for p in pairs], text=text, texttemplate="%{text}",
        textfont=dict(size=FONT_PX), colorscale=SEQUENTIAL if values is not None else [[0, "#f2f2f2"], [1, "#9ecae1"]],
        showscale=values is not None, colorbar=dict(title=dict(text=value_label)), xgap=2, ygap=2,
        hovertemplate="%{x} × %{y}: %{text}<extra></extra>",
    ))
    style(fig, title, height=460, xaxis="triplet weight T", yaxis="pair weight P", legend=False,
          yaxis_autorange="reversed")
    if highlight is not None:
        if tuple(highlight) not in goal.TABLE1:
            raise ValueError(f"highlight must be a (triplet, pair) key of Table 1, got {highlight!r}")
        t, p = highlight
        frame_cell(fig, pairs.index(p), triplets.index(t), name="selected")
    return fig


# --------------------------------------------------------------------------- the composer's figures


def weight_surface(
    config: GoalConfig, rel: float = 0.1, n: int = 61, points: tuple[object, object] | None = None
) -> go.Figure:
    """The designed gradient of one triplet over (S_pos, S_neg): |dL/dS_pos| = T*P_+ and dL/dS_neg = T*P_-.

    Xuan & Chen eqs. 3-13: GOAL pulls the positive with weight T(S_pos, S_neg) * P_+(S_pos) and pushes the hardest
    negative with T(S_pos, S_neg) * P_-(S_neg), for the weights and parameters of `config`. The MS pair weights depend
    on the batch through m; here m_+ = m_- = `rel` (Fig. 3 uses 0.1; MS loss's own reading has m >= 1, eq. 12 as
    printed any m > 0). `points` = (s_pos, s_neg) overlays a batch's triplets (:func:`vlr_lib.goal.batch_triplets`).
    Traces: [pull heatmap, push heatmap, pull points, push points]; both heatmaps share one colour axis from 0 to the
    larger maximum.
    """
    if not isinstance(config, GoalConfig):
        raise TypeError(f"config must be a GoalConfig, got {type(config).__name__}")
    s, s_pos, s_neg = _mesh(n)
    w_pos, w_neg = (_display(w) for w in config.weights(s_pos, s_neg, rel))
    px = py = np.zeros(0)
    if points is not None:
        px, py = (to_numpy(p).ravel() for p in points)
        if px.shape != py.shape:
            raise ValueError(f"points must be two arrays of equal length, got {px.shape} and {py.shape}")
    top = max(float(w_pos.max()), float(w_neg.max()), 1e-12)
    fig = grid(1, 2, ["pull on the positive:<br>T·P₊ = −∂L/∂S_pos", "push on the hardest negative:<br>T·P₋ = ∂L/∂S_neg"],
               height=460)
    for k, w in enumerate((w_pos, w_neg), start=1):
        fig.add_trace(go.Heatmap(
            x=s, y=s, z=w, coloraxis="coloraxis", name="T·P₊" if k == 1 else "T·P₋",
            hovertemplate="S_pos %{x:.2f}, S_neg %{y:.2f}<br>weight %{z:.3f}<extra></extra>"), row=1, col=k)
    for k in (1, 2):
        fig.add_trace(go.Scatter(
            x=px, y=py, mode="markers", name="batch triplets", showlegend=k == 1, legendgroup="batch",
            marker=dict(color="white", size=7, line=dict(color="black", width=1.5)),
            hovertemplate="S_pos %{x:.3f}, S_neg %{y:.3f}<extra>triplet</extra>"), row=1, col=k)
    t, p = config.triplet, config.pair
    style(fig, f"Designed weights of ({t}, {p}): T<sup>{t}</sup> × P<sup>{p}</sup>", height=460,
          coloraxis=dict(colorscale=SEQUENTIAL, cmin=0.0, cmax=top, colorbar=dict(title=dict(text="weight"))))
    _cosine_panels(fig, 2)
    return fig


def gradient_heatmap(
    S: Tensor, config: GoalConfig = GoalConfig(), pos_mask: Tensor | None = None, title: str | None = None
) -> go.Figure:
    """The designed dL/dS of a batch (:func:`vlr_lib.goal.goal_gradient` with `config`) on a diverging scale.

    Positives and the hardest negatives of image queries (rows) and caption queries (columns) are outlined: GOAL puts
    gradient on those cells only. Blue (< 0) pulls a similarity up, red (> 0) pushes it down. The default title names
    the combination, its Table 1 loss, how many entries get gradient and the largest |dL/dS|. Traces: [heatmap,
    positives, hardest negatives of image queries, of caption queries].
    """
    G = goal.goal_gradient(S, pos_mask=pos_mask, config=config)
    subtitle = None
    if title is None:
        title = f"Designed gradient ∂L/∂S of {config.label}, {config.known_as} in Table 1"
        subtitle = (f"non-zero on {int((G != 0).sum())} of {G.numel()} entries, "
                    f"largest |∂L/∂S| = {float(G.abs().max()):.3g}")
    return _gradient_heatmap(G.cpu(), batch_marks(S, pos_mask), title, subtitle)
