"""Every explorer of the notebooks (tests/widgets/cases.py) as the static book shows it (VLR_BOOK=1): its
main control's values as plotly frames, the slider's steps one per frame, every frame drawable by plotly's
animate (the same traces as the first view), moving the slider changes what is drawn, and the explorer
stays small enough for a page under the book's budget (make book checks every built page as well)."""
from __future__ import annotations

import json

import pytest

from tests.widgets.cases import cases
from vlr_lib.widgets import _core as W

EXPLORER_BUDGET = 2_000_000  # estimated bytes of HTML per explorer in the book (pages: 5 MB, make book checks)
STEPS = 4  # values of the main control built here; the book builds BOOK_STEPS (+1), about BOOK_SCALE times more
BOOK_SCALE = (W.BOOK_STEPS + 1) / STEPS


@pytest.mark.parametrize("case", cases(), ids=lambda c: f"{c.notebook}-{c.name}")
def test_book_version_of_every_explorer(case):
    box = case.build()
    grid = W.control_values(box.controls[box.main], steps=STEPS)
    note, figures = W.book_figures(box, steps=STEPS)
    if len(grid) < 2:  # nothing to sweep: the first view, said so
        assert "first view" in note and figures == list(box.figures)
        return
    assert len(figures) == len(box.figures)
    for fig in figures:
        (slider,) = [s for s in fig.layout.sliders if s.steps and s.steps[0].method == "animate"]
        assert len(fig.frames) == len(slider.steps) == len(grid)
        assert all(len(frame.data) == len(fig.data) for frame in fig.frames), "animate needs the same traces"
        shown = {json.dumps([frame.data[i].to_plotly_json() for i in range(len(frame.data))], default=str)
                 + json.dumps(frame.layout.to_plotly_json(), default=str) for frame in fig.frames}
        assert len(shown) > 1, "moving the book's slider would change nothing"
    html_bytes = sum(len(fig.to_json()) for fig in figures) * BOOK_SCALE  # the book draws BOOK_STEPS values
    assert html_bytes < EXPLORER_BUDGET
