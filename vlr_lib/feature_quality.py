"""How much of a scene frozen features carry: caption-overlap Spearman and linear probes.

Two measurements, independent of any retrieval loss, for comparing frozen feature sets
(pretrained vs random encoders, raw pixels, true attributes):

* `overlap_spearman` -- over pairs of images, Spearman's rank correlation between the cosine
  of their features and the Jaccard overlap of their captions' word sets (the union of the
  lower-cased words of each image's captions). Features whose cosine ranks pairs as the
  captions do are what a retrieval head can build on.
* `linear_probe` -- ridge regression from the features to one-hot labels, classes read off
  by argmax, trained on one split and scored on another (Alain & Bengio, "Understanding
  intermediate layers using linear classifier probes"): what is *linearly* decodable.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from .models import tokenize

__all__ = ["average_ranks", "spearman", "word_overlap", "overlap_spearman", "linear_probe"]

# Ridge penalties tried by `linear_probe`, relative to the number of fitted examples (features standardised).
RIDGE_GRID = tuple(10.0**k for k in range(-4, 2))


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of a 1-D array, tied values sharing the mean of their ranks."""
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])  # first index of each run of ties
    ends = np.r_[starts[1:], x.size]
    mean_rank = (starts + ends + 1) / 2.0  # mean of ranks start+1 .. end
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: the Pearson correlation of the average ranks of x and y (1-D, same length >= 2)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y must be 1-D of the same length >= 2, got shapes {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("x and y must be finite")
    rx, ry = average_ranks(x) - (x.size + 1) / 2, average_ranks(y) - (y.size + 1) / 2
    denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    if denom == 0:
        raise ValueError("spearman is undefined when x or y is constant")
    return float((rx * ry).sum() / denom)


def word_overlap(captions: Sequence[Sequence[str]]) -> np.ndarray:
    """Jaccard index of the word sets of each pair of images, [N, N] (words: `models.tokenize`, all captions)."""
    sets = [set().union(*map(tokenize, caps)) for caps in captions]
    vocab = {w: i for i, w in enumerate(sorted(set().union(*sets)))}
    has = np.zeros((len(sets), len(vocab)), dtype=np.float64)
    for row, words in enumerate(sets):  # building the indicator matrix is per image; the pairs are one matmul
        has[row, [vocab[w] for w in words]] = 1.0
    inter = has @ has.T
    size = has.sum(axis=1)
    union = size[:, None] + size[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def overlap_spearman(features: Tensor | np.ndarray, captions: Sequence[Sequence[str]]) -> float:
    """Spearman over image pairs i < j of cos(features_i, features_j) and `word_overlap` of their captions."""
    x = torch.as_tensor(features).detach().to("cpu", torch.float64)
    if x.dim() != 2 or x.shape[0] != len(captions) or x.shape[0] < 3:
        raise ValueError(f"features must be [N, D] with one row per image's captions (N = {len(captions)} >= 3), "
                         f"got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("features contains NaN or inf")
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    upper = np.triu_indices(x.shape[0], k=1)
    return spearman((x @ x.T).numpy()[upper], word_overlap(captions)[upper])


Block = tuple[str, int, int, int]  # label name, cell, first output column, number of classes


def _one_hot(labels: Mapping[str, Tensor]) -> tuple[Tensor, list[Block]]:
    """Targets [N, sum of classes] (rows of -1 labels stay zero) and each output block."""
    blocks, columns, start = [], [], 0
    for name, y in labels.items():
        y = y.reshape(y.shape[0], -1)  # [N] or [N, cells]
        k = int(y.max()) + 1
        for cell in range(y.shape[1]):
            onehot = torch.zeros(y.shape[0], k, dtype=torch.float64)
            scored = y[:, cell] >= 0
            onehot[scored, y[scored, cell]] = 1.0
            columns.append(onehot)
            blocks.append((name, cell, start, k))
            start += k
    return torch.cat(columns, dim=1), blocks


def _ridge(x: Tensor, y: Tensor, penalty: float) -> Tensor:
    """Weights W minimising ||x W - y||^2 + penalty ||W||^2 (x, y centred), primal or dual by shape."""
    n, d = x.shape
    if d <= n:
        return torch.linalg.solve(x.T @ x + penalty * torch.eye(d, dtype=x.dtype), x.T @ y)
    return x.T @ torch.linalg.solve(x @ x.T + penalty * torch.eye(n, dtype=x.dtype), y)


def _accuracy(scores: Tensor, labels: Mapping[str, Tensor], blocks: list[Block]) -> dict[str, float]:
    """Share of scored labels (>= 0) whose block's argmax is right, per label name."""
    right: dict[str, list[Tensor]] = {name: [] for name in labels}
    for name, cell, start, k in blocks:
        y = labels[name].reshape(scores.shape[0], -1)[:, cell]
        scored = y >= 0
        right[name].append(scores[scored, start : start + k].argmax(dim=1) == y[scored])
    return {name: float(torch.cat(r).double().mean()) for name, r in right.items()}


def linear_probe(
    train_x: Tensor | np.ndarray,
    train_labels: Mapping[str, Tensor],
    test_x: Tensor | np.ndarray,
    test_labels: Mapping[str, Tensor],
    penalties: Sequence[float] = RIDGE_GRID,
) -> dict[str, float]:
    """Accuracy per label of a ridge probe from features to one-hot labels, fitted on train, scored on test.

    Labels: {name: int64 [N] or [N, cells]}, -1 where a label does not apply (not fitted,
    not scored). Features are standardised with the training statistics; the penalty
    (relative to the number of examples) is chosen among `penalties` on the last quarter of
    the training rows, by mean accuracy over the labels, then the probe is refitted on all of
    them. Returns {name: accuracy} and "penalty" (the chosen relative penalty).
    """
    xs = [torch.as_tensor(x).detach().to("cpu", torch.float64).flatten(1) for x in (train_x, test_x)]
    for name, x, labels in (("train", xs[0], train_labels), ("test", xs[1], test_labels)):
        if not labels or any(torch.as_tensor(y).shape[0] != x.shape[0] for y in labels.values()):
            raise ValueError(f"{name}_labels must be a non-empty dict of tensors with one row per {name}_x row "
                             f"({x.shape[0]})")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}_x contains NaN or inf")
    if set(train_labels) != set(test_labels):
        raise ValueError(f"train_labels and test_labels must have the same names, got {sorted(train_labels)} "
                         f"and {sorted(test_labels)}")
    if not penalties or any(p <= 0 for p in penalties):
        raise ValueError(f"penalties must be a non-empty sequence of numbers > 0, got {penalties!r}")
    if xs[0].shape[0] < 8:
        raise ValueError(f"train_x needs at least 8 rows (a quarter selects the penalty), got {xs[0].shape[0]}")
    train_labels = {k: torch.as_tensor(v) for k, v in train_labels.items()}
    test_labels = {k: torch.as_tensor(test_labels[k]) for k in train_labels}
    y, blocks = _one_hot({k: torch.cat([train_labels[k], test_labels[k]]) for k in train_labels})
    n = xs[0].shape[0]
    cut = n - n // 4

    def fit_predict(fit_rows: slice, x_eval: Tensor, penalty: float) -> Tensor:
        x_fit = xs[0][fit_rows]
        mean, std = x_fit.mean(dim=0), x_fit.std(dim=0).clamp_min(1e-8)
        y_fit = y[:n][fit_rows]
        w = _ridge((x_fit - mean) / std, y_fit - y_fit.mean(dim=0), penalty * x_fit.shape[0])
        return (x_eval - mean) / std @ w + y_fit.mean(dim=0)

    select = {k: v[cut:] for k, v in train_labels.items()}
    score = {p: np.mean(list(_accuracy(fit_predict(slice(None, cut), xs[0][cut:], p), select, blocks).values()))
             for p in penalties}
    best = max(penalties, key=lambda p: (score[p], p))  # ties go to the stronger penalty
    result = _accuracy(fit_predict(slice(None), xs[1], best), test_labels, blocks)
    return {**result, "penalty": float(best)}
