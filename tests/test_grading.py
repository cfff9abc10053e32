"""vlr_lib.grading: the checker of the graded exercises of notebooks 02-08.

For every exercise, an answer written here from the paper's formula (not the library's code) scores full
marks, each known mistake loses points and is named, a stub scores 0 without raising, and a NaN never
passes; bad input to the checker is one clear error naming the argument.
"""
from __future__ import annotations

import math
import re
import sys
import threading
import time
from pathlib import Path

import jupytext
import pytest
import torch

from vlr_lib import grading, losses

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


def clip_loss(S, logit_scale):  # Radford et al. Fig. 3: both cross-entropies at the scale e^{t'}, summed / N
    return nt_xent(S, math.exp(-logit_scale))


def sigmoid_loss(S, logit_scale, logit_bias):  # Zhai et al. Algorithm 1: -sum log sigmoid(z (t s + b)) / N
    z = 2 * torch.eye(len(S), dtype=S.dtype) - 1
    logits = math.exp(logit_scale) * S + logit_bias
    return torch.nn.functional.softplus(-z * logits).sum() / len(S)


def unified_weights(S, margin, gamma):  # Li et al. eqs. 14-16: D_in / (1 + sum_k D_ik), in log space
    log_d = (gamma * (S - S.diagonal()[:, None] + margin)).masked_fill(~_off(S), -math.inf)
    log_z = torch.logaddexp(torch.logsumexp(log_d, dim=1, keepdim=True), torch.zeros((), dtype=S.dtype))
    return torch.exp(log_d - log_z)


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
    "03_clip_learned": clip_loss,
    "03_siglip": sigmoid_loss,
    "04_unified_weights": unified_weights,
    "05_cross_example": cross_example,
    "06_average_precision": average_precision,
    "07_cir_weight": cir_weight,
    "08_cocos_triplet": cocos_triplet,
}


def test_every_exercise_has_a_correct_answer_here():
    assert set(CORRECT) == set(grading.EXERCISES)
    assert sorted({k[:2] for k in grading.EXERCISES}) == [f"{c:02d}" for c in range(2, 9)]
    functions = [e.function for e in grading.EXERCISES.values()]
    assert len(set(functions)) == len(functions), "the regrade finds each answer by its function's name"


def _as_float32(answer):
    """`answer` computed in float32, as a student who calls .float() first would."""
    def in_float32(**kwargs):
        return answer(**{k: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                         for k, v in kwargs.items()})
    return in_float32


@pytest.mark.parametrize("key", list(CORRECT))
def test_a_correct_answer_scores_full_marks(key):
    for seed in (None, 11):  # the practice cases and a regrade's
        result = grading.grade(key, CORRECT[key], seed=seed)
        assert result.full_marks and result.score == result.points and result.problems == (), str(result)


@pytest.mark.parametrize("key", list(CORRECT))
def test_a_correct_answer_in_float32_scores_full_marks(key):
    result = grading.grade(key, _as_float32(CORRECT[key]))
    assert result.full_marks, str(result)


def test_a_correct_average_precision_returned_in_float32_passes():
    result = grading.grade("06_average_precision", lambda scores, is_pos: torch.tensor(
        average_precision(scores, is_pos), dtype=torch.float32))
    assert result.full_marks, str(result)


@pytest.mark.parametrize("key, mistake", [(k, m) for k, e in grading.EXERCISES.items() for m in e.mistakes])
def test_a_known_mistake_loses_points_and_is_named(key, mistake):
    result = grading.grade(key, grading.EXERCISES[key].mistakes[mistake])
    assert result.score < result.points and not result.full_marks
    assert result.problems[-1] == f"it looks like: {mistake}"
    assert re.match(r"case \d+ \(", result.problems[0]), "the first problem names its case"


def test_the_positives_masked_with_zero_never_score_full_marks():
    """Masked with 0 instead of -inf is right unless every negative of a row is below 0: the cases always hold
    such rows (before, it scored 5/5 on 33 of 50 seeds)."""
    def masked_with_zero(S, margin):
        negatives = S.masked_fill(torch.eye(len(S), dtype=torch.bool), 0.0)
        d = S.diagonal()
        return torch.relu(margin + negatives.amax(1) - d).sum() + torch.relu(margin + negatives.amax(0) - d).sum()

    for seed in (None, *range(20)):
        result = grading.grade("02_triplet_sh", masked_with_zero, seed=seed)
        assert result.score < result.points, seed
        assert result.problems[-1].startswith("it looks like: the positives masked with 0"), str(result)


@pytest.mark.parametrize("key", ["03_nt_xent", "03_clip_learned", "03_siglip", "04_unified_weights",
                                 "05_cross_example", "07_cir_weight"])
def test_the_cases_hold_float32_at_the_scale_where_a_naive_exp_overflows(key):
    hard = [c for c in grading.cases(key) if "naive exp overflows" in c.kind]
    assert hard and all(v.dtype == torch.float32 for c in hard for v in c.kwargs.values() if isinstance(v, torch.Tensor)
                        and v.is_floating_point())
    naive = next(fn for name, fn in grading.EXERCISES[key].mistakes.items() if "overflows" in name)
    assert any(not torch.isfinite(torch.as_tensor(naive(**c.kwargs))).all() for c in hard)


@pytest.mark.parametrize("key", list(CORRECT))
def test_a_stub_scores_zero_without_raising(key, capsys):
    def stub(**kwargs):
        raise NotImplementedError("fill me in")

    result = grading.check(key, stub)
    assert result.score == 0 and result.passed == 0
    assert "not implemented yet" in capsys.readouterr().out


def test_only_the_stubs_own_not_implemented_error_means_not_implemented():
    def helper(S):
        raise NotImplementedError("a helper of mine")

    result = grading.grade("02_triplet_sh", lambda S, margin: helper(S))
    assert result.problems == ("every case: raised NotImplementedError: a helper of mine",)


@pytest.mark.parametrize("answer, message", [
    (lambda S, margin: None, "every case: returned None: the function must return its result (is a `return` missing?)"),
    (lambda S, margin: "0.3", "every case: returned a str, expected a tensor or a number"),
    (lambda S, margin: {"loss": 0.3}, "every case: returned a dict, expected a tensor or a number"),
    (lambda S, margin: torch.zeros(3), "every case: returned shape (3,), expected a scalar, shape ()"),
    (lambda S, margin: torch.tensor(math.nan), "case 1 (random: S 2x2, margin=0.2): returned NaN, expected "),
    (lambda S, margin: sys.exit(3), "every case: called sys.exit(3) (raised SystemExit): a graded function must "
                                    "return its result, never end the program"),
    (lambda S, margin: torch.zeros(1000, 1000), "every case: returned a tensor of shape (1000, 1000) (1,000,000 "
                                                "numbers), far more than expected"),
])
def test_each_kind_of_wrong_answer_has_its_own_message(answer, message):
    result = grading.grade("02_triplet_sh", answer)
    assert result.passed == 0 and result.problems[0].startswith(message), result.problems


def test_ctrl_c_still_stops_the_check(capsys):
    def interrupted(S, margin):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        grading.check("02_triplet_sh", interrupted)
    assert capsys.readouterr().out == ("02_triplet_sh: stopped by KeyboardInterrupt (Ctrl-C) before the check "
                                       "finished; no score\n")
    assert grading.check("02_triplet_sh", triplet_sh).full_marks, "the next check runs as usual"


def test_off_the_main_thread_there_is_no_time_limit_and_the_result_says_so():
    found = []
    worker = threading.Thread(target=lambda: found.append(grading.grade("02_triplet_sh", triplet_sh)))
    worker.start()
    worker.join()
    (result,) = found
    assert result.full_marks and result.problems == (
        "no time limit here (SIGALRM needs the main thread and is not on Windows)",)


def test_an_endless_loop_runs_into_the_time_limit():
    def endless(S, margin):
        while True:
            pass

    start = time.monotonic()
    result = grading.grade("02_triplet_sh", endless, time_limit=0.5)
    assert time.monotonic() - start < 5
    assert result.passed == 0 and "ran past the time limit of 0.5 s" in result.problems[0]
    assert "the other 9 cases were not run" in result.problems[0]


def test_calling_the_librarys_own_function_scores_zero_and_is_named():
    from vlr_lib.losses import triplet_hardest as renamed  # bound under another name: still caught

    for answer in (lambda S, margin: losses.triplet_hardest(S, margin), lambda S, margin: renamed(S, margin)):
        result = grading.grade("02_triplet_sh", answer)
        assert result.score == 0 and not result.full_marks
        assert result.flags == ("calls vlr_lib.losses.triplet_hardest, the function this exercise asks you to write: "
                                "0 points (write it from the formula)",)
    assert grading.grade("02_triplet_sh", lambda S, margin: triplet_sh(S, margin) + 0 * losses.triplet_all(S, margin)
                         ).full_marks, "another library function is allowed"


def test_an_answer_that_changes_the_library_scores_zero_and_the_library_is_restored():
    original = losses.triplet_hardest

    def cheat(S, margin):
        losses.triplet_hardest = lambda *args, **kwargs: torch.tensor(0.0, dtype=torch.float64)
        torch.allclose = lambda *args, **kwargs: True
        return torch.tensor(0.0, dtype=torch.float64)

    result = grading.check("02_triplet_sh", cheat)
    assert result.score == 0 and "changed the library (torch.allclose, vlr_lib.losses.triplet_hardest; restored)" \
        in result.flags[0]
    assert losses.triplet_hardest is original and torch.allclose(torch.ones(1), torch.ones(1))


def test_an_answer_that_changes_a_builtin_scores_zero_and_it_is_restored():
    import builtins

    original = builtins.sorted

    def cheat(S, margin):
        builtins.sorted = lambda *args, **kwargs: []
        return triplet_sh(S, margin)

    result = grading.grade("02_triplet_sh", cheat)
    assert result.score == 0 and "changed the library (builtins.sorted; restored)" in result.flags[0]
    assert builtins.sorted is original


def test_torch_and_builtins_changed_before_the_check_are_left_alone(monkeypatch):
    """ipykernel replaces builtins.input for every cell, ``import torch._dynamo`` wraps torch.manual_seed: not the
    student's doing, and not undone."""
    import builtins

    swapped, wrapped = (lambda prompt="": "typed"), (lambda seed: None)
    monkeypatch.setattr(builtins, "input", swapped)
    monkeypatch.setattr(torch, "manual_seed", wrapped)
    result = grading.grade("02_triplet_sh", triplet_sh)
    assert result.full_marks and result.problems == () and builtins.input is swapped and torch.manual_seed is wrapped


def test_a_deepcopy_in_the_answer_is_no_change_of_the_library():
    """copyreg caches __slotnames__ on torch.Tensor at the first deepcopy: a cache, not a patch."""
    import copy

    vars(torch.Tensor).get("__slotnames__") is not None and delattr(torch.Tensor, "__slotnames__")
    result = grading.grade("02_triplet_sh", lambda S, margin: triplet_sh(copy.deepcopy(S), margin))
    assert result.full_marks and result.flags == ()


def test_the_references_are_bound_at_import(monkeypatch):
    """Replacing the reference or grading.grade in the kernel before the check changes no score."""
    zero = lambda S, margin: torch.tensor(0.0, dtype=torch.float64)  # noqa: E731
    monkeypatch.setattr(losses, "triplet_hardest", zero)
    monkeypatch.setattr(grading, "grade", lambda *args, **kwargs: "5 / 5")
    result = grading.check("02_triplet_sh", zero)
    assert isinstance(result, grading.Result) and not result.full_marks
    note = result.problems[-1]
    assert note.startswith("note: ") and note.endswith(" had been changed in this kernel before the check; restored")
    assert "vlr_lib.grading.grade" in note and "vlr_lib.losses.triplet_hardest" in note
    assert grading.check("02_triplet_sh", triplet_sh).full_marks


def test_switching_the_call_tracing_off_scores_zero():
    def untraced(S, margin):
        sys.setprofile(None)
        return triplet_sh(S, margin)

    result = grading.grade("02_triplet_sh", untraced)
    assert result.score == 0 and "switched off the grader's call tracing" in result.flags[0]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_never_passes(bad):
    # the reference is finite on every case, and allclose(nan, nan) is refused too
    result = grading.grade("03_nt_xent", lambda S, temperature: torch.tensor(bad))
    assert result.passed == 0 and re.match(r"case 1 \(.*\): returned (NaN|inf), expected", result.problems[0])
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


def test_a_failure_no_known_mistake_explains_is_counted_by_kind():
    result = grading.grade("02_triplet_sh", lambda S, margin: triplet_sh(S, margin) if len(S) > 2 else S.sum())
    assert result.problems[-1] == "failed: the 'N = 2' case; the others pass" or "'N = 2'" in result.problems[-1]


def test_an_answer_that_edits_its_input_does_not_spoil_the_reference():
    def vandal(S, margin):
        out = triplet_sh(S, margin)
        S.fill_(0.0)
        return out

    assert grading.grade("02_triplet_sh", vandal).full_marks


def test_the_practice_cases_are_visible_and_the_regrades_come_from_a_private_seed():
    practice = grading.cases("02_triplet_sh")
    assert len(practice) == grading.N_PRACTICE and practice[0].label == grading.cases("02_triplet_sh")[0].label
    assert all(torch.equal(a.kwargs["S"], b.kwargs["S"]) for a, b in zip(practice, grading.cases("02_triplet_sh")))
    regrade = grading._cases_for("02_triplet_sh", 7)
    assert len(regrade) == grading.N_REGRADE
    assert regrade[0].kwargs["S"].shape != practice[0].kwargs["S"].shape or not torch.equal(
        regrade[0].kwargs["S"], practice[0].kwargs["S"])
    other = grading._cases_for("02_triplet_sh", 8)
    assert any(a.kwargs["S"].shape != b.kwargs["S"].shape or not torch.equal(a.kwargs["S"], b.kwargs["S"])
               for a, b in zip(regrade, other))
    kinds = {c.kind for c in regrade}
    assert {"every negative below 0", "N = 2", "float32"} <= kinds


@pytest.mark.parametrize("call, error, message", [
    (lambda: grading.grade("02_triplet", triplet_sh), ValueError, "key must be one of 02_triplet_sh"),
    (lambda: grading.grade(2, triplet_sh), TypeError, "key must be the name of a graded exercise"),
    (lambda: grading.grade("02_triplet_sh", 3.0), TypeError, "answer must be the function you wrote (triplet_sh("),
    (lambda: grading.grade("02_triplet_sh", triplet_sh, seed="1"), TypeError, "seed must be an int"),
    (lambda: grading.grade("02_triplet_sh", triplet_sh, seed=True), TypeError, "seed must be an int"),
    (lambda: grading.grade("02_triplet_sh", triplet_sh, time_limit=0), ValueError, "time_limit must be a number"),
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
