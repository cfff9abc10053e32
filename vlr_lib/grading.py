"""Graded "implement it" exercises: a student's function against the library's on hidden cases.

Each of notebooks 02-08 ends with an :class:`Exercise` (``vlr_lib.exercises``; notebook 03 with three): a stub the student
fills in (a loss, a weight or a metric; its cell is tagged ``answer``) and a check cell, ``grading.check("02_triplet_sh", triplet_sh)``,
that calls it on cases, compares every answer with the library's own function (the formula's one home,
which cites its paper and equation) and prints a score out of the exercise's points.

Two sets of cases:

- **practice** (:func:`cases`, what ``check`` uses in the notebook): 10 per exercise from
  :data:`DEFAULT_SEED`, the same for every student and not secret;
- **regrade** (``grade(key, fn, seed=...)``, what ``python -m vlr_lib grade`` uses for marks): 20 per
  exercise, drawn from the instructor's private seed, so an answer fitted to the practice cases gains
  nothing.

Both hold random batches and the cases each exercise's text demands: rows whose negatives are all below 0
(Triplet-SH's positives masked with 0 instead of -inf), float32 at the scale where a naive ``exp``
overflows (NT-Xent at tau = 0.01, CLIP's learned scale and SigLIP's at the clamp t = 100, the unified weights at gamma = 60, cross-example softmax at lambda = 100,
T^cir at tau = 30), ties (values on a grid of 0.25, tied scores), the smallest sizes (N = 2, one
candidate, one triplet). An answer passes a case when it is finite, has the reference's shape and is within
the exercise's tolerances, the float32 ones when the case or the answer is float32 (the reference is
computed in float64 from the same numbers).

What an answer cannot do (``vlr_lib._sandbox``): change the library (``losses.triplet_hardest = ...``,
``grading.grade = ...``: restored after every call, 0 points), call the function the exercise asks for
(traced by code object: 0 points, named), run forever (a per-case time limit, :data:`TIME_LIMIT`, where
SIGALRM works: the main thread, not Windows), stop the check (``sys.exit`` is a failed case; Ctrl-C still
stops it), or fill memory with kept failures (only small summaries are kept). ``None``, a wrong type, a
wrong shape and NaN each get their own message; a stub whose own body raises ``NotImplementedError``
scores 0 with "not implemented yet", while the same error from a helper it calls is an ordinary failure.
A wrong answer that matches one of the exercise's known mistakes (a flipped sign, a sum for a mean, the
positives masked with 0, a naive exp...) is named: "it looks like: ...", and the failed cases are counted by
kind ("all 2 'every negative below 0' cases").

Why a checker here and not nbgrader or otter-grader: both are maintained and run offline, but nbgrader needs its
release/collect exchange and database, and otter-grader its own notebook format, its tests written a second
time, and Docker containers to grade a class (``otter grade``); the workbook's set-up is one command, without
Docker. The regrade (``python -m vlr_lib grade``, ``vlr_lib.cli.grade``) does what we would take from them -- a
fresh process per collected notebook, a time limit, a CSV gradebook and feedback per student -- in about 400
lines, and compares with vlr_lib itself rather than with answers written a second time. docs/course.md has the
rubric and the instructor's steps.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from . import _sandbox
from .exercises import EXERCISES, Case, Exercise

__all__ = ["DEFAULT_SEED", "EXERCISES", "N_PRACTICE", "N_REGRADE", "TIME_LIMIT", "Case", "Exercise", "Result", "cases",
           "check", "exercise", "grade", "undo_library_changes"]

DEFAULT_SEED = 2024
"""The practice cases' seed (the same for every student; the regrade takes a private one)."""
N_PRACTICE, N_REGRADE = 10, 20
TIME_LIMIT = 5.0
"""Seconds one case may take (a correct answer takes milliseconds)."""


@dataclass(frozen=True)
class Result:
    """What :func:`grade` found: the score out of the exercise's points and, when short of them, why. `flags`
    name what scores 0 whatever the numbers (calling the library's function, changing the library)."""

    key: str
    title: str
    points: int
    passed: int
    total: int
    problems: tuple[str, ...]
    flags: tuple[str, ...] = ()

    @property
    def score(self) -> float:
        return 0.0 if self.flags else round(self.points * self.passed / self.total, 1)

    @property
    def full_marks(self) -> bool:
        return not self.flags and self.passed == self.total

    def __str__(self) -> str:
        head = f"{self.key} ({self.title}): {self.score:g} / {self.points} points, {self.passed}/{self.total} hidden cases"
        return "\n".join([head, *(f"  - {p}" for p in (*self.flags, *self.problems))])


# --------------------------------------------------------------------------- the cases


def _generator(key: str, seed: int, kind: str) -> torch.Generator:
    return torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(f"{key}:{kind}".encode())) % 2**63)


def cases(key: str) -> list[Case]:
    """The practice cases of exercise `key` (what ``check`` uses in the notebook; not secret). The regrade's
    come from the instructor's private seed: ``grade(key, fn, seed=...)``."""
    return exercise(key).cases(_generator(key, DEFAULT_SEED, "practice"), N_PRACTICE)


def _cases_for(key: str, seed: int | None) -> list[Case]:
    if seed is None:
        return cases(key)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int (the regrade's private seed) or None, got {type(seed).__name__}")
    return exercise(key).cases(_generator(key, seed, "regrade"), N_REGRADE)


_FORBIDDEN = {key: _sandbox.codes_of(ex.forbidden) for key, ex in EXERCISES.items()}


# --------------------------------------------------------------------------- comparing


def _as_answer(value: object) -> Tensor:
    """An answer as a small plain CPU tensor (a Python float keeps its float64 digits), or a WrongType saying
    what it was instead."""
    if value is None:
        raise _sandbox.WrongType("returned None: the function must return its result (is a `return` missing?)")
    if isinstance(value, Tensor):
        plain = Tensor.as_subclass(value, Tensor).detach()
    elif isinstance(value, bool) or not isinstance(value, (int, float, list, tuple)) and not hasattr(value, "__array__"):
        what = "a bool" if isinstance(value, bool) else f"a {type(value).__name__}"
        raise _sandbox.WrongType(f"returned {what}, expected a tensor or a number")
    else:
        try:
            plain = torch.as_tensor(value, dtype=torch.float64 if isinstance(value, float) else None)
        except (TypeError, ValueError, RuntimeError):
            raise _sandbox.WrongType(f"returned a {type(value).__name__} that is not made of numbers, expected a "
                                     "tensor or a number") from None
    if plain.numel() > _sandbox.MAX_ELEMENTS:
        raise _sandbox.WrongType(f"returned a tensor of shape {tuple(plain.shape)} ({plain.numel():,} numbers), far "
                                 "more than expected")
    return plain.cpu().clone()  # a view would keep its (maybe huge) base alive


def _low_precision(case: Case, got: Tensor) -> bool:
    """float32 tolerances: the case's inputs or the answer are float32 (or less)."""
    inputs = [v for v in case.kwargs.values() if isinstance(v, Tensor) and v.is_floating_point()]
    return any(v.dtype != torch.float64 for v in inputs) or (got.is_floating_point() and got.dtype != torch.float64)


def _upcast(kwargs: dict[str, object]) -> dict[str, object]:
    """The case's numbers in float64 (the reference's exact answer for the very values the student got)."""
    return {k: v.double() if isinstance(v, Tensor) and v.is_floating_point() else v for k, v in kwargs.items()}


def _entry(index: tuple[int, ...]) -> str:
    return f"entry [{', '.join(map(str, index))}]"


def _compare(exercise: Exercise, got: Tensor, want: Tensor, low: bool) -> str | None:
    """None when `got` matches `want`; otherwise what is wrong with it, in a few words."""
    if got.shape != want.shape:
        expected = "a scalar, shape ()" if want.dim() == 0 else f"shape {tuple(want.shape)}"
        return f"returned shape {tuple(got.shape)}, expected {expected}"
    if got.is_complex() or got.dtype == torch.bool:
        return f"returned dtype {got.dtype}, expected numbers"
    finite = torch.isfinite(got.double())
    if not bool(finite.all()):
        bad = torch.nonzero(~finite)[0].tolist()
        where = "" if want.dim() == 0 else f" at {_entry(tuple(bad))}"
        what = "NaN" if bool(torch.isnan(got.double()).any()) else "inf"
        return f"returned {what}{where}, expected {float(want[tuple(bad)]):.6g}"
    rtol, atol = (exercise.rtol32, exercise.atol32) if low else (exercise.rtol, exercise.atol)
    g, w = got.double(), want.double()
    close = torch.isclose(g, w, rtol=rtol, atol=atol)
    if bool(close.all()):
        return None
    if want.dim() == 0:
        return f"returned {float(g):.8g}, expected {float(w):.8g}"
    index = tuple(torch.nonzero(~close)[0].tolist())
    return (f"{_entry(index)} is {float(g[index]):.6g}, expected {float(w[index]):.6g} ({int((~close).sum())} of "
            f"{close.numel()} entries off; largest gap {float((g - w).abs().max()):.3g})")


def _copy(kwargs: dict[str, object]) -> dict[str, object]:
    """Fresh copies of the tensors: an answer that edits its input in place cannot spoil the next call."""
    return {k: v.clone() if isinstance(v, Tensor) else v for k, v in kwargs.items()}


def _reference(exercise: Exercise, case: Case) -> Tensor:
    return _as_answer(exercise.reference(**_upcast(case.kwargs)))


def _matches(exercise: Exercise, mistake: Callable[..., object], case: Case, got: Tensor) -> bool:
    try:
        want = _as_answer(mistake(**_copy(case.kwargs)))
    except Exception:  # a mistake undefined on this case: no match
        return False
    if got.shape != want.shape or got.dtype == torch.bool:
        return False
    rtol, atol = (exercise.rtol32, exercise.atol32) if _low_precision(case, got) else (exercise.rtol, exercise.atol)
    return torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True)


def _diagnosis(exercise: Exercise, failed: list[tuple[Case, Tensor]]) -> str | None:
    with torch.no_grad():
        for name, fn in exercise.mistakes.items():
            if failed and all(_matches(exercise, fn, case, got) for case, got in failed):
                return f"it looks like: {name}"
    return None


def _by_kind(hidden: list[Case], failed_kinds: list[str]) -> str | None:
    """Which kinds of case failed, counted (when some pass): where to look when no known mistake matches."""
    if len(failed_kinds) == len(hidden):
        return None
    parts = []
    for kind in dict.fromkeys(c.kind for c in hidden):
        n, bad = sum(c.kind == kind for c in hidden), failed_kinds.count(kind)
        if bad:
            parts.append(f"the '{kind}' case" if n == 1 else f"{'all ' if bad == n else ''}{bad}{'' if bad == n else f' of {n}'} '{kind}' cases")
    return "failed: " + ", ".join(parts) + "; the others pass"


def _shown(problems: list[tuple[str, str]], total: int) -> list[str]:
    """The first three problems, or one line when every case failed the same way (None returned, sys.exit...)."""
    if len(problems) == total and total > 1 and len({why for _, why in problems}) == 1:
        return [f"every case: {problems[0][1]}"]
    lines = [f"{head}: {why}" for head, why in problems[:3]]
    return lines + ([f"... and {len(problems) - 3} more"] if len(problems) > 3 else [])


# --------------------------------------------------------------------------- grading


class _Library:
    """The library as it was when this module was imported, and the real :func:`grade`: bound into ``grade`` and
    ``check`` as default arguments, so neither goes through a module global an answer could replace."""

    def __init__(self) -> None:
        self.snapshot: _sandbox.Snapshot | None = None
        self.grade: Callable[..., Result] | None = None

    def restore(self) -> tuple[str, ...]:
        return self.snapshot.restore() if self.snapshot is not None else ()


_LIBRARY = _Library()


def exercise(key: object) -> Exercise:
    """The graded exercise `key` (one of :data:`EXERCISES`), or an error listing them."""
    if not isinstance(key, str):
        raise TypeError(f"key must be the name of a graded exercise (a str), got {type(key).__name__}")
    if key not in EXERCISES:
        raise ValueError(f"key must be one of {', '.join(EXERCISES)}, got {key!r}")
    return EXERCISES[key]


def undo_library_changes(*, _library: _Library = _LIBRARY) -> tuple[str, ...]:
    """Restore whatever of the library was changed since this module was imported; the names of what was."""
    return _library.restore()


def grade(key: str, answer: object, seed: int | None = None, time_limit: float | None = TIME_LIMIT, *,
          _library: _Library = _LIBRARY) -> Result:
    """Call `answer` on every case of exercise `key` (the practice ones, or with `seed` the regrade's) and compare
    it with the library's function; `time_limit` seconds per case (None: none)."""
    before = _library.restore()  # first: what an earlier cell changed is undone before anything else runs
    ex = exercise(key)
    if not callable(answer):
        raise TypeError(f"answer must be the function you wrote ({ex.signature}), got {type(answer).__name__}")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or not 0 < time_limit < math.inf):
        raise ValueError(f"time_limit must be a number of seconds > 0 or None, got {time_limit!r}")
    kernel = _sandbox.Snapshot(library=False)  # torch and builtins as they are now (they change on their own)

    def restore() -> tuple[str, ...]:
        return _library.restore() + kernel.restore()

    result = _run(ex, answer, _cases_for(key, seed), time_limit, restore)
    if before:
        shown = ", ".join(before[:3]) + (", ..." if len(before) > 3 else "")
        note = f"note: {shown} had been changed in this kernel before the check; restored"
        result = Result(**{**result.__dict__, "problems": (*result.problems, note)})
    return result


def _run(ex: Exercise, answer: Callable, hidden: list[Case], time_limit: float | None,
         restore: Callable[[], tuple[str, ...]]) -> Result:
    problems, failed, failed_kinds, flags = [], [], [], []
    called, changed, untraced, limited = set(), set(), False, True
    for number, case in enumerate(hidden, 1):
        out = _sandbox.call(answer, _copy(case.kwargs), _as_answer, restore, _FORBIDDEN[ex.key], time_limit)
        called |= set(out.forbidden)
        changed |= set(out.changed)
        untraced |= out.untraced
        limited &= out.limited
        head = f"case {number} ({case.kind}: {case.label})"
        if out.kind == "not-implemented":
            return Result(ex.key, ex.title, ex.points, 0, len(hidden),
                          (f"not implemented yet: fill in the stub ({ex.signature}), then run this cell again",))
        if out.kind == "timeout":
            problems.append((head, f"{out.failure}; the other {len(hidden) - number} cases were not run"))
            failed_kinds += [c.kind for c in hidden[number - 1:]]
            break
        wrong = out.failure
        if out.value is not None:
            with torch.no_grad():
                wrong = _compare(ex, out.value, _reference(ex, case), _low_precision(case, out.value))
        if wrong:
            problems.append((head, wrong))
            failed_kinds.append(case.kind)
            if out.value is not None and out.kind == "ok":
                failed.append((case, out.value))
    if called:
        flags.append(f"calls {', '.join(sorted(called))}, the function this exercise asks you to write: 0 points "
                     "(write it from the formula)")
    if changed:
        flags.append(f"changed the library ({', '.join(sorted(changed)[:3])}{', ...' if len(changed) > 3 else ''}; "
                     "restored): 0 points")
    if untraced:
        flags.append("switched off the grader's call tracing (sys.setprofile): 0 points")
    passed = 0 if flags else len(hidden) - len(failed_kinds)
    hint = _diagnosis(ex, failed) if len(failed) == len(failed_kinds) else None
    summary = _by_kind(hidden, failed_kinds) if failed_kinds and not hint else None
    shown = _shown(problems, len(hidden))
    notes = [] if limited else ["no time limit here (SIGALRM needs the main thread and is not on Windows)"]
    return Result(ex.key, ex.title, ex.points, passed, len(hidden),
                  tuple(shown + [s for s in (hint, summary) if s] + notes), tuple(flags))


def check(key: str, answer: object, seed: int | None = None, time_limit: float | None = TIME_LIMIT, *,
          _library: _Library = _LIBRARY) -> Result:
    """:func:`grade`, printed: the check cell of a graded exercise. Never raises for a wrong or missing answer
    (Ctrl-C still stops it)."""
    try:
        result = _library.grade(key, answer, seed, time_limit)
    except KeyboardInterrupt:  # Ctrl-C (or an answer raising it): said, and passed on so the cell stops
        print(f"{key}: stopped by KeyboardInterrupt (Ctrl-C) before the check finished; no score")
        raise
    print(result)
    return result


_LIBRARY.grade = grade
_LIBRARY.snapshot = _sandbox.Snapshot()  # last: the snapshot holds this module's own functions too
