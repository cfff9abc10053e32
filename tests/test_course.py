"""docs/course.md agrees with itself: the timetable quizzes every chapter once, as many quizzes as the rubric counts,
and each quizzed chapter has its questions in the quiz bank."""
from __future__ import annotations

import re
from pathlib import Path

COURSE = (Path(__file__).resolve().parents[1] / "docs" / "course.md").read_text()
CHAPTERS = [f"{n:02d}" for n in range(13)]


def _quizzes() -> list[list[str]]:
    """The chapters of each quiz the timetable schedules ("quiz 00–01" -> ["00", "01"])."""
    rows = [line for line in COURSE.splitlines() if re.match(r"\| \d+ \(\w+\) \|", line)]
    out = []
    for row in rows:
        for first, last in re.findall(r"quiz (\d\d)(?:–(\d\d))?", row):
            out.append([f"{n:02d}" for n in range(int(first), int(last or first) + 1)])
    return out


def test_every_chapter_is_quizzed_once():
    quizzed = [c for quiz in _quizzes() for c in quiz]
    assert sorted(quizzed) == CHAPTERS, f"quizzed: {quizzed}"


def test_the_rubric_counts_the_quizzes_the_timetable_schedules():
    counted = re.search(r"quizzes (\d+) \((\w+) quizzes, 1 point each\)", COURSE)
    assert counted and int(counted.group(1)) == len(_quizzes())


def test_every_chapter_has_quiz_questions():
    for chapter in CHAPTERS:
        assert re.search(rf"^\*\*{chapter} · ", COURSE, re.M), f"no quiz questions for chapter {chapter}"
