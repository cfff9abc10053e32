"""Measures of frozen features: Spearman (against scipy and a loop), caption word overlap, the ridge probe."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from vlr_lib import feature_quality as Q
from vlr_lib.models import tokenize


def _ranks_reference(x: list[float]) -> list[float]:
    """Loop version: the rank of v is 1 + #{u < v} + (#{u == v} - 1) / 2."""
    return [1 + sum(u < v for u in x) + (sum(u == v for u in x) - 1) / 2 for v in x]


def _pearson(a: list[float], b: list[float]) -> float:
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return cov / math.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))


@pytest.mark.parametrize("seed", range(4))
def test_spearman_matches_loop_reference_and_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, size=40).astype(float)  # many ties, as Jaccard overlaps have
    y = x + rng.normal(0, 3, size=40)
    y[::5] = 2.0
    np.testing.assert_array_equal(Q.average_ranks(x), _ranks_reference(list(x)))
    expected = _pearson(_ranks_reference(list(x)), _ranks_reference(list(y)))
    assert Q.spearman(x, y) == pytest.approx(expected, abs=1e-12)
    stats = pytest.importorskip("scipy.stats")
    assert Q.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_limits():
    x = np.arange(10.0)
    assert Q.spearman(x, np.exp(x)) == pytest.approx(1.0)  # any increasing transform
    assert Q.spearman(x, -x**3) == pytest.approx(-1.0)


@pytest.mark.parametrize("x, y, match", [
    (np.ones(5), np.arange(5.0), "constant"),
    (np.arange(5.0), np.arange(4.0), "same length"),
    (np.arange(1.0), np.arange(1.0), "same length >= 2"),
    (np.array([0.0, np.nan, 1.0]), np.arange(3.0), "finite"),
])
def test_spearman_bad_inputs(x, y, match):
    with pytest.raises(ValueError, match=match):
        Q.spearman(x, y)


CAPTIONS = [
    ["a red circle", "there is a small red circle"],
    ["a blue square on the left", "A blue, big square."],
    ["a red square", "two shapes: a red square and a blue circle"],
    ["three shapes"],
]


def test_word_overlap_matches_loop_reference():
    sets = [set(w for c in caps for w in tokenize(c)) for caps in CAPTIONS]
    got = Q.word_overlap(CAPTIONS)
    for i, j in itertools.product(range(len(sets)), repeat=2):
        assert got[i, j] == pytest.approx(len(sets[i] & sets[j]) / len(sets[i] | sets[j]))
    assert np.allclose(np.diag(got), 1.0)


def test_overlap_spearman_is_spearman_over_pairs():
    feats = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.9, 0.1], [0.0, 1.0]])
    cos = torch.nn.functional.normalize(feats, dim=1) @ torch.nn.functional.normalize(feats, dim=1).T
    pairs = list(itertools.combinations(range(4), 2))
    overlap = Q.word_overlap(CAPTIONS)
    expected = Q.spearman(np.array([float(cos[i, j]) for i, j in pairs]), np.array([overlap[i, j] for i, j in pairs]))
    assert Q.overlap_spearman(feats, CAPTIONS) == pytest.approx(expected)
    assert Q.overlap_spearman(feats * 7.0, CAPTIONS) == pytest.approx(expected)  # cosine: scale-free


@pytest.mark.parametrize("feats, match", [
    (torch.zeros(3, 2), "one row per image"),
    (torch.zeros(4), "one row per image"),
    (torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [float("nan"), 0.0]]), "NaN"),
])
def test_overlap_spearman_bad_inputs(feats, match):
    with pytest.raises(ValueError, match=match):
        Q.overlap_spearman(feats, CAPTIONS)


def _probe_data(n: int, seed: int):
    """Labels [n] (4 classes) and per-cell labels [n, 3] (-1 = absent) that are linear in the features,
    plus an unrelated label."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    labels = {
        "linear": x[:, :4].argmax(dim=1),
        "cells": torch.stack([x[:, 4 + 2 * c : 6 + 2 * c].argmax(dim=1) for c in range(3)], dim=1),
        "noise": torch.randint(0, 4, (n,), generator=g),
    }
    labels["cells"][x[:, 10] > 0.5] = -1  # absent cells: neither fitted nor scored
    return x, labels


def test_linear_probe_reads_linear_labels_and_not_noise():
    x, labels = _probe_data(400, 0)
    xt, labels_t = _probe_data(400, 1)
    acc = Q.linear_probe(x, labels, xt, labels_t)
    assert acc["linear"] > 0.85 and acc["cells"] > 0.85  # ridge on one-hot targets, argmax of 4 classes
    assert acc["noise"] < 0.4  # chance is 0.25
    assert acc["penalty"] in Q.RIDGE_GRID
    # High-dimensional features (the dual form, D > N) give the same kind of answer.
    pad = lambda a: torch.cat([a, torch.zeros(a.shape[0], 500)], dim=1)  # noqa: E731
    wide = Q.linear_probe(pad(x), labels, pad(xt), labels_t)
    assert wide["linear"] == pytest.approx(acc["linear"], abs=0.02)


def test_linear_probe_bad_inputs():
    x, labels = _probe_data(20, 0)
    with pytest.raises(ValueError, match="train_labels"):
        Q.linear_probe(x, {"linear": labels["linear"][:5]}, x, labels)
    with pytest.raises(ValueError, match="same names"):
        Q.linear_probe(x, labels, x, {"linear": labels["linear"]})
    with pytest.raises(ValueError, match="penalties"):
        Q.linear_probe(x, labels, x, labels, penalties=(0.0,))
    with pytest.raises(ValueError, match="test_x contains NaN"):
        Q.linear_probe(x, labels, x * float("nan"), labels)
    with pytest.raises(ValueError, match="at least 8"):
        Q.linear_probe(x[:4], {k: v[:4] for k, v in labels.items()}, x, labels)
