"""Graded "implement it" exercises: a student's function against the library's on hidden cases.

Each of notebooks 02-08 ends with one :class:`Exercise`: a stub the student fills in (a loss, a weight
or a metric) and a check cell, ``grading.check("02_triplet_sh", triplet_sh)``, that calls it on cases the
student never sees, compares every answer with the library's own function (the formula's one home, which
cites its paper and equation) and prints a score out of the exercise's points:

- the cases come from a seed (:data:`DEFAULT_SEED`), so every student meets the same ones and an
  instructor can regrade with another seed;
- an answer passes a case only when it is finite, has the reference's shape, and is within the
  exercise's tolerances (``torch.allclose`` with ``equal_nan=False``: a NaN never passes);
- a stub that still raises ``NotImplementedError`` scores 0 with a message saying so, and never stops
  the notebook; any other exception fails its case, named in the message;
- a wrong answer that matches one of the exercise's known mistakes (a wrong sign, a sum for a mean,
  a missing margin...) is named: "it looks like: ...". The same mistakes are what the tests feed the
  checker to show that a wrong answer loses points.

Why a checker here and not nbgrader or otter-grader: both need their own release/collect workflow and
database (nbgrader) or a grading image (otter), neither of which the workbook's offline, one-command set-up
has; the comparison that matters is against vlr_lib, which this module does in a hundred lines and which
the tests (tests/test_grading.py) cover case by case. docs/course.md has the rubric.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from . import analysis, goal, losses, metrics

DEFAULT_SEED = 2024
N_CASES = 10


@dataclass(frozen=True)
class Case:
    """One hidden case: the keyword arguments the answer is called with, and how the message names it."""

    kwargs: dict[str, object]
    label: str


@dataclass(frozen=True)
class Exercise:
    """A graded exercise: the library function an answer must match, the hidden cases, the known mistakes."""

    key: str
    title: str
    points: int
    signature: str
    reference: Callable[..., object]
    cases: Callable[[torch.Generator], list[Case]]
    mistakes: dict[str, Callable[..., object]] = field(default_factory=dict)
    rtol: float = 1e-5
    atol: float = 1e-7


@dataclass(frozen=True)
class Result:
    """What :func:`check` found: the score out of the exercise's points and, when short of them, why."""

    key: str
    title: str
    points: int
    passed: int
    total: int
    problems: tuple[str, ...]

    @property
    def score(self) -> float:
        return round(self.points * self.passed / self.total, 1)

    @property
    def full_marks(self) -> bool:
        return self.passed == self.total

    def __str__(self) -> str:
        head = f"{self.key} ({self.title}): {self.score:g} / {self.points} points, {self.passed}/{self.total} hidden cases"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


# --------------------------------------------------------------------------- hidden cases


def _cosines(gen: torch.Generator, n: int, m: int | None = None, dim: int = 8) -> Tensor:
    """Cosine similarities of n random unit vectors with m others (m = n: a square S, positives on the diagonal)."""
    x = torch.nn.functional.normalize(torch.randn(n, dim, generator=gen, dtype=torch.float64), dim=1)
    y = torch.nn.functional.normalize(torch.randn(m or n, dim, generator=gen, dtype=torch.float64), dim=1)
    y[: min(n, m or n)] += 0.8 * x[: min(n, m or n)]  # positives above chance, as after some training
    return x @ torch.nn.functional.normalize(y, dim=1).T


def _pick(gen: torch.Generator, values: tuple) -> object:
    return values[int(torch.randint(len(values), (1,), generator=gen))]


def _s_cases(gen: torch.Generator, param: str, values: tuple) -> list[Case]:
    """Square S of sizes 2-9, with `param` drawn from `values`."""
    cases = []
    for _ in range(N_CASES):
        n, value = int(torch.randint(2, 10, (1,), generator=gen)), _pick(gen, values)
        cases.append(Case({"S": _cosines(gen, n), param: value}, f"N={n}, {param}={value}"))
    return cases


def _unified_cases(gen: torch.Generator) -> list[Case]:
    cases = []
    for _ in range(N_CASES):
        n, m, g = int(torch.randint(2, 10, (1,), generator=gen)), _pick(gen, (0.0, 0.1, 0.2, 0.5)), _pick(gen, (1.0, 10.0, 60.0))
        cases.append(Case({"S": _cosines(gen, n), "margin": m, "gamma": g}, f"N={n}, margin={m}, gamma={g}"))
    return cases


def _ap_cases(gen: torch.Generator) -> list[Case]:
    """One query's scores, rounded to one decimal so that some positives tie with negatives."""
    cases = []
    for _ in range(N_CASES):
        m = int(torch.randint(3, 12, (1,), generator=gen))
        scores = torch.round(torch.rand(m, generator=gen, dtype=torch.float64), decimals=1)
        is_pos = torch.rand(m, generator=gen) < 0.4
        is_pos[int(torch.randint(m, (1,), generator=gen))] = True
        cases.append(Case({"scores": scores, "is_pos": is_pos}, f"{m} candidates, {int(is_pos.sum())} positive"))
    return cases


def _weight_cases(gen: torch.Generator) -> list[Case]:
    cases = []
    for _ in range(N_CASES):
        shape, tau = (int(torch.randint(1, 20, (1,), generator=gen)),), _pick(gen, (1.0, 5.0, 10.0, 30.0))
        s_pos = 2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1
        s_neg = 2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1
        cases.append(Case({"s_pos": s_pos, "s_neg": s_neg, "tau": tau}, f"{shape[0]} triplets, tau={tau}"))
    return cases


# --------------------------------------------------------------------------- the exercises' references


def _cocos_triplet(S: Tensor, margin: float) -> Tensor:
    return analysis.cocos(S, "triplet", margin=margin)["i2t"]["C_q"]


def _average_precision(scores: Tensor, is_pos: Tensor) -> Tensor:
    return torch.tensor(metrics.average_precision(scores, is_pos), dtype=torch.float64)


def _off(S: Tensor) -> Tensor:
    return ~torch.eye(len(S), dtype=torch.bool)


def _ap_over_every_rank(scores: Tensor, is_pos: Tensor) -> Tensor:
    """A known mistake: precision averaged over every rank, not only at the positives."""
    order = torch.argsort(scores, descending=True)
    hits = is_pos[order].double().cumsum(0)
    return (hits / torch.arange(1, len(scores) + 1)).mean()


def _ap_ties_favour(scores: Tensor, is_pos: Tensor) -> Tensor:
    """A known mistake: a negative that ties with a positive counted below it (> instead of >=)."""
    pos = torch.sort(scores[is_pos], descending=True).values
    above = (scores[~is_pos][None, :] > pos[:, None]).sum(dim=1)
    before = torch.arange(len(pos))
    return ((before + 1.0) / (1 + above + before)).mean()


EXERCISES: dict[str, Exercise] = {
    e.key: e
    for e in [
        Exercise(
            "02_triplet_sh", "Triplet-SH, the hardest negative of each query", 5, "triplet_sh(S, margin) -> scalar, summed",
            lambda S, margin: losses.triplet_hardest(S, margin),
            lambda gen: _s_cases(gen, "margin", (0.0, 0.1, 0.2, 0.5)),
            {
                "the hinge's sign flipped ([m + s_ii - max s_ij]_+)": lambda S, margin: (
                    torch.relu(margin + S.diagonal() - S.masked_fill(~_off(S), -math.inf).amax(1)).sum()
                    + torch.relu(margin + S.diagonal() - S.masked_fill(~_off(S), -math.inf).amax(0)).sum()),
                "every negative summed, not the hardest (Triplet)": lambda S, margin: losses.triplet_all(S, margin),
                "the margin left out": lambda S, margin: losses.triplet_hardest(S, 0.0),
                "only the image queries (rows), not the caption queries": lambda S, margin: torch.relu(
                    margin + S.masked_fill(~_off(S), -math.inf).amax(1) - S.diagonal()).sum(),
            },
        ),
        Exercise(
            "03_nt_xent", "NT-Xent in both directions", 5, "nt_xent(S, temperature) -> scalar, (rows + columns) / N",
            lambda S, temperature: losses.info_nce(S, temperature),
            lambda gen: _s_cases(gen, "temperature", (0.05, 0.1, 0.5, 1.0)),
            {
                "only the image queries (rows)": lambda S, temperature: losses.sampled_softmax(S, 1 / temperature),
                "the temperature left out": lambda S, temperature: losses.info_nce(S, 1.0),
                "the temperature multiplied instead of divided": lambda S, temperature: losses.info_nce(S, 1 / temperature),
                "a mean over the 2N terms, not their sum / N": lambda S, temperature: losses.info_nce(S, temperature) / 2,
            },
        ),
        Exercise(
            "04_unified_weights", "the weight of each negative in the unified loss", 5,
            "unified_weights(S, margin, gamma) -> [N, N], image queries (rows), 0 on the diagonal",
            lambda S, margin, gamma: analysis.unified_weights(S, margin, gamma),
            _unified_cases,
            {
                "a softmax over the negatives alone (the positive's '1 +' left out)": lambda S, margin, gamma: torch.softmax(
                    (gamma * S).masked_fill(~_off(S), -math.inf), dim=1),
                "each negative's own sigmoid (the one-negative weight)": lambda S, margin, gamma: analysis.unified_one_negative_weight(
                    S - S.diagonal()[:, None], margin, gamma) * _off(S),
                "the margin left out": lambda S, margin, gamma: analysis.unified_weights(S, 0.0, gamma),
            },
        ),
        Exercise(
            "05_cross_example", "cross-example softmax", 5, "cross_example(S, scale) -> scalar, mean over the N positives",
            lambda S, scale: losses.cross_example_softmax(S, scale),
            lambda gen: _s_cases(gen, "scale", (1.0, 5.0, 20.0)),
            {
                "each row's own negatives (sampled softmax), not the whole batch's": lambda S, scale: losses.sampled_softmax(S, scale),
                "the scale left out": lambda S, scale: losses.cross_example_softmax(S, 1.0),
                "summed over the positives, not averaged": lambda S, scale: losses.cross_example_softmax(S, scale, reduction="sum"),
            },
        ),
        Exercise(
            "06_average_precision", "average precision of one query", 5, "average_precision(scores, is_pos) -> float in [0, 1]",
            _average_precision,
            _ap_cases,
            {
                "precision averaged over every rank, not only at the positives": _ap_over_every_rank,
                "a negative tied with a positive ranked below it (> instead of >=)": _ap_ties_favour,
            },
            rtol=1e-9, atol=1e-12,
        ),
        Exercise(
            "07_cir_weight", "GOAL's circle triplet weight T^cir", 5, "cir_weight(s_pos, s_neg, tau) -> tensor like s_pos",
            lambda s_pos, s_neg, tau: goal.triplet_weight("cir", s_pos, s_neg, tau=tau),
            _weight_cases,
            {
                "the sigmoid's argument with the wrong sign": lambda s_pos, s_neg, tau: torch.sigmoid(
                    tau * (s_pos * (2 - s_pos) - s_neg**2)),
                "the NCA weight instead (straight lines, not circles)": lambda s_pos, s_neg, tau: goal.triplet_weight(
                    "nca", s_pos, s_neg, tau=tau),
                "tau left out": lambda s_pos, s_neg, tau: goal.triplet_weight("cir", s_pos, s_neg, tau=1.0),
            },
        ),
        Exercise(
            "08_cocos_triplet", "COCOS of Triplet: contributing negatives per image query", 5,
            "cocos_triplet(S, margin) -> int tensor [N]",
            _cocos_triplet,
            lambda gen: _s_cases(gen, "margin", (0.1, 0.2, 0.5, 1.0)),
            {
                "the caption queries (columns) counted instead": lambda S, margin: analysis.cocos(
                    S, "triplet", margin=margin)["t2i"]["C_q"],
                "the positive counted as well": lambda S, margin: _cocos_triplet(S, margin) + 1,
                "the margin left out": lambda S, margin: _cocos_triplet(S, 1e-12),
            },
            rtol=0.0, atol=0.0,
        ),
    ]
}
"""Every graded exercise by key: the chapter's number, then what the student implements."""


# --------------------------------------------------------------------------- checking


def _as_answer(value: object) -> Tensor:
    if isinstance(value, Tensor):
        return value.detach().cpu()
    # a Python float would become float32: keep its float64 digits
    return torch.as_tensor(value, dtype=torch.float64 if isinstance(value, float) else None)


def _compare(exercise: Exercise, got: Tensor, want: Tensor) -> str | None:
    """None when `got` matches `want`; otherwise what is wrong with it, in a few words."""
    if got.shape != want.shape:
        return f"returned shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if got.is_complex() or got.dtype == torch.bool:
        return f"returned dtype {got.dtype}, expected numbers"
    if not bool(torch.isfinite(got.double()).all()):
        return "returned NaN or inf"
    if not torch.allclose(got.double(), want.double(), rtol=exercise.rtol, atol=exercise.atol, equal_nan=False):
        gap = float((got.double() - want.double()).abs().max())
        shown = f"{float(got):.6g}, expected {float(want):.6g}" if want.numel() == 1 else f"largest gap {gap:.3g}"
        return f"returned {shown}" if want.numel() == 1 else f"{shown} from the expected values"
    return None


def _matches(exercise: Exercise, fn: Callable[..., object], case: Case, got: Tensor) -> bool:
    try:
        want = _as_answer(fn(**_copy(case.kwargs)))
    except Exception:  # a mistake undefined on this case: no match
        return False
    return _compare(exercise, got, want) is None


def _copy(kwargs: dict[str, object]) -> dict[str, object]:
    """Fresh copies of the tensors: an answer that edits its input in place cannot spoil the next call."""
    return {k: v.clone() if isinstance(v, Tensor) else v for k, v in kwargs.items()}


def _diagnosis(exercise: Exercise, failed: list[tuple[Case, Tensor]]) -> str | None:
    for name, fn in exercise.mistakes.items():
        if failed and all(_matches(exercise, fn, case, got) for case, got in failed):
            return f"it looks like: {name}"
    return None


def exercise(key: object) -> Exercise:
    """The graded exercise `key` (one of :data:`EXERCISES`), or an error listing them."""
    if not isinstance(key, str):
        raise TypeError(f"key must be the name of a graded exercise (a str), got {type(key).__name__}")
    if key not in EXERCISES:
        raise ValueError(f"key must be one of {', '.join(EXERCISES)}, got {key!r}")
    return EXERCISES[key]


def cases(key: str, seed: int = DEFAULT_SEED) -> list[Case]:
    """The hidden cases of exercise `key` for `seed` (the same for every call with the same seed)."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(key.encode()))
    return exercise(key).cases(gen)


def grade(key: str, answer: object, seed: int = DEFAULT_SEED) -> Result:
    """Call `answer` on every hidden case of exercise `key` and compare it with the library's function."""
    ex = exercise(key)
    if not callable(answer):
        raise TypeError(f"answer must be the function you wrote ({ex.signature}), got {type(answer).__name__}")
    hidden = cases(key, seed)
    problems, failed = [], []
    for number, case in enumerate(hidden, 1):
        try:
            got = _as_answer(answer(**_copy(case.kwargs)))
        except NotImplementedError:
            return Result(key, ex.title, ex.points, 0, len(hidden),
                          (f"not implemented yet: fill in the stub ({ex.signature}), then run this cell again",))
        except Exception as exc:  # the student's bug: named, and the case fails
            problems.append(f"case {number} ({case.label}): raised {type(exc).__name__}: {exc}")
            continue
        wrong = _compare(ex, got, _as_answer(ex.reference(**_copy(case.kwargs))))
        if wrong:
            problems.append(f"case {number} ({case.label}): {wrong}")
            failed.append((case, got))
    hint = _diagnosis(ex, failed) if len(failed) == len(problems) else None
    return Result(key, ex.title, ex.points, len(hidden) - len(problems), len(hidden),
                  tuple(problems[:3]) + ((f"... and {len(problems) - 3} more",) if len(problems) > 3 else ())
                  + ((hint,) if hint else ()))


def check(key: str, answer: object, seed: int = DEFAULT_SEED) -> Result:
    """:func:`grade`, printed: the check cell of a graded exercise. Never raises for a wrong or missing answer."""
    result = grade(key, answer, seed)
    print(result)
    return result
