"""Shared look of every figure: colours and layout defaults."""
from __future__ import annotations

import numpy as np
import torch

POSITIVE = "#2ca02c"   # green: positives
NEGATIVE = "#d62728"   # red: (hardest) negatives
NEUTRAL = "#7f7f7f"
SEQUENTIAL = "Viridis"
DIVERGING = "RdBu_r"   # gradients: blue pulls a similarity up, red pushes it down
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def layout(title: str, xaxis: str | None = None, yaxis: str | None = None, **extra) -> dict:
    """Layout keyword arguments shared by every figure (template, margins, titles)."""
    base = dict(
        title=dict(text=title, x=0.5),
        template="plotly_white",
        margin=dict(l=60, r=20, t=60, b=50),
        xaxis_title=xaxis,
        yaxis_title=yaxis,
    )
    base.update(extra)
    return base


def to_numpy(x) -> np.ndarray:
    """Tensors (any device, with grad) and array-likes to a float64 numpy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)
