"""vlr_lib.grading: the checker of the graded exercises of notebooks 02-08.

For every exercise, an answer written here from the paper's formula (not the library's code) scores full
marks, each known mistake loses points and is named, a stub scores 0 without raising, and a NaN never
passes; bad input to the checker is one clear error naming the argument.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import jupytext
import pytest
import torch

from vlr_lib import grading

ROOT = Path(__file__).resolve().parents[1]


def _off(S: torch.Tensor) -> torch.Tensor:
    return ~torch.eye(len(S), dtype=torch.bool)


def triplet_sh(S, margin):  # Li et al. eq. 1, both directions, summed
    hard = S.masked_fill(~_off(S), -math.inf)
    d = S.diagonal()
    return torch.relu(margin + hard.amax(1) - d).sum() + torch.relu(margin + hard.amax(0) - d).sum()


def nt_xent(S, temperature):  # cross-entropy of every row and column with its diagonal target
    target = torch.arange(len(S))
    ce = torch.nn.functional.cross_entropy
    return (ce(S / temperature, target, reduction="sum") + ce(S.T / temperature, target, reduction="sum")) / len(S)


def unified_weights(S, margin, gamma):  # Li et al. eqs. 14-16: D_in / (1 + sum_k D_ik)
    D = torch.exp(gamma * (S - S.diagonal()[:, None] + margin)) * _off(S)
    return D / (1 + D.sum(dim=1, keepdim=True))


def cross_example(S, scale):  # Veit & Wilber eq. 5
    negatives = torch.logsumexp((scale * S)[_off(S)], dim=0)
    pos = scale * S.diagonal()
    return (torch.logaddexp(pos, negatives) - pos).mean()


def average_precision(scores, is_pos):  # the precision at each positive, a tied negative ranked above it
    precisions = []
    for b, p in enumerate(sorted(scores[is_pos].tolist(), reverse=True)):  # b positives ranked before this one
        position = 1 + int((scores[~is_pos] >= p).sum()) + b
        precisions.append((b + 1) / position)
    return sum(precisions) / len(precisions)


def cir_weight(s_pos, s_neg, tau):  # Xuan & Chen eq. 8
    return 1 / (1 + torch.exp(tau * (s_pos * (2 - s_pos) - s_neg**2)))


def cocos_triplet(S, margin):  # Bleeker & de Rijke eq. 9b: negatives with s+ - s- < margin, per row
    return ((S.diagonal()[:, None] - S < margin) & _off(S)).sum(dim=1)


CORRECT = {
    "02_triplet_sh": triplet_sh,
    "03_nt_xent": nt_xent,
    "04_unified_weights": unified_weights,
    "05_cross_example": cross_example,
    "06_average_precision": average_precision,
    "07_cir_weight": cir_weight,
    "08_cocos_triplet": cocos_triplet,
}


def test_every_exercise_has_a_correct_answer_here():
    assert set(CORRECT) == set(grading.EXERCISES)
    assert sorted(k[:2] for k in grading.EXERCISES) == [f"{c:02d}" for c in range(2, 9)]


@pytest.mark.parametrize("key", list(CORRECT))
def test_a_correct_answer_scores_full_marks(key):
    result = grading.grade(key, CORRECT[key])
    assert result.full_marks and result.score == result.points and result.problems == (), str(result)


@pytest.mark.parametrize("key, mistake", [(k, m) for k, e in grading.EXERCISES.items() for m in e.mistakes])
def test_a_known_mistake_loses_points_and_is_named(key, mistake):
    result = grading.grade(key, grading.EXERCISES[key].mistakes[mistake])
    assert result.score < result.points and not result.full_marks
    assert result.problems[-1] == f"it looks like: {mistake}"
    assert re.match(r"case \d+ \(", result.problems[0]), "the first problem names its case"


@pytest.mark.parametrize("key", list(CORRECT))
def test_a_stub_scores_zero_without_raising(key, capsys):
    def stub(**kwargs):
        raise NotImplementedError("fill me in")

    result = grading.check(key, stub)
    assert result.score == 0 and result.passed == 0
    assert "not implemented yet" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_never_passes(bad):
    # the reference is finite on every hidden case, and allclose(nan, nan) is refused too
    result = grading.grade("03_nt_xent", lambda S, temperature: torch.tensor(bad))
    assert result.passed == 0 and "NaN or inf" in result.problems[0]
    half_nan = lambda S, temperature: torch.where(torch.tensor(len(S) % 2 == 0), torch.tensor(math.nan), nt_xent(S, temperature))
    assert not grading.grade("03_nt_xent", half_nan).full_marks


def test_wrong_shape_dtype_and_crash_are_named():
    result = grading.grade("08_cocos_triplet", lambda S, margin: cocos_triplet(S, margin)[:-1])
    assert result.passed == 0 and "returned shape" in result.problems[0]
    result = grading.grade("08_cocos_triplet", lambda S, margin: cocos_triplet(S, margin) > 0)
    assert result.passed == 0 and "dtype torch.bool" in result.problems[0]
    result = grading.grade("02_triplet_sh", lambda S, margin: S[len(S) + 5])
    assert result.passed == 0 and "raised IndexError" in result.problems[0]
    assert len(result.problems) == 4 and result.problems[-1] == "... and 7 more"


def test_an_answer_that_edits_its_input_does_not_spoil_the_reference():
    def vandal(S, margin):
        out = triplet_sh(S, margin)
        S.fill_(0.0)
        return out

    assert grading.grade("02_triplet_sh", vandal).full_marks


def test_the_cases_are_fixed_by_the_seed_and_differ_between_seeds():
    a, b = grading.cases("02_triplet_sh"), grading.cases("02_triplet_sh")
    c = grading.cases("02_triplet_sh", seed=7)
    assert [x.label for x in a] == [x.label for x in b]
    assert all(torch.equal(x.kwargs["S"], y.kwargs["S"]) for x, y in zip(a, b))
    assert any(x.kwargs["S"].shape != y.kwargs["S"].shape or not torch.equal(x.kwargs["S"], y.kwargs["S"])
               for x, y in zip(a, c))
    assert grading.grade("02_triplet_sh", triplet_sh, seed=7).full_marks


@pytest.mark.parametrize("call, error, message", [
    (lambda: grading.grade("02_triplet", triplet_sh), ValueError, "key must be one of 02_triplet_sh"),
    (lambda: grading.grade(2, triplet_sh), TypeError, "key must be the name of a graded exercise"),
    (lambda: grading.grade("02_triplet_sh", 3.0), TypeError, "answer must be the function you wrote (triplet_sh("),
    (lambda: grading.grade("02_triplet_sh", triplet_sh, seed="1"), TypeError, "seed must be an int"),
    (lambda: grading.grade("02_triplet_sh", triplet_sh, seed=True), TypeError, "seed must be an int"),
])
def test_bad_input_to_the_checker_is_a_clear_error(call, error, message):
    with pytest.raises(error) as exc:
        call()
    assert message in str(exc.value)


def test_every_graded_exercise_is_in_its_notebook_and_the_rubric():
    """Each exercise's check cell is in its chapter (which imports vlr_lib.grading), and docs/course.md's rubric
    gives it its points."""
    course = (ROOT / "docs" / "course.md").read_text()
    for key, ex in grading.EXERCISES.items():
        (py,) = (ROOT / "notebooks").glob(f"{key[:2]}_*.py")
        sources = [c.source for c in jupytext.read(py).cells]
        assert any(f'grading.check("{key}"' in s for s in sources), f"{py.name} has no check cell for {key}"
        assert re.search(rf"\| *{key[:2]} *\|[^\n]*`{key}`[^\n]*\| *{ex.points} *\|", course), f"rubric row of {key}"
