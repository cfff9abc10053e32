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


def _two_explorers():
    from vlr_lib.demo import demo_embeddings
    from vlr_lib.similarity import similarity
    from vlr_lib.widgets import goal, unified

    S = similarity(*demo_embeddings(n=6, dim=8, noise=1.2, seed=0))
    return unified.unified_explorer(S), goal.goal_composer(S, n=11)


def test_explorers_that_ask_for_a_second_control_get_a_dropdown_of_views():
    """Chapter 04 ("raise γ to 10³") and chapter 07's composer (exercise 5 needs (T^con, P^con) and its margin):
    the book's drop-down offers each view, and each view's slider moves the control it names."""
    unified_box, composer = _two_explorers()
    for box, expected in ((unified_box, ["margin", "margin", "gamma"]), (composer, [None, "margin", "tau"])):
        assert [v.main for v in box.book_views] == expected
        bundle = W.book_bundle(box)["text/html"]
        assert bundle.count("<option>") == len(box.book_views) == bundle.count('class="vlr-book-view"')
        assert bundle.count('style="display:none"') == len(box.book_views) - 1, "one view shown at a time"
        for view in box.book_views:
            note, figures = W.book_figures(box, steps=3, view=view)
            moved = box.controls[view.main or box.main].description
            assert f"moves <b>{moved}</b>" in note
            assert all(len({json.dumps(f.layout.to_plotly_json(), default=str) for f in fig.frames}
                           | {json.dumps([d.to_plotly_json() for d in f.data], default=str) for f in fig.frames}) > 2
                       for fig in figures)
    default, con = (W.book_figures(composer, steps=3, view=v)[1][1] for v in composer.book_views[:2])
    assert json.dumps(default.data[0].z, default=str) != json.dumps(con.data[0].z, default=str), "another gradient"


def test_a_book_view_naming_no_control_is_refused():
    import ipywidgets

    controls = {"a": W.slider(ipywidgets.FloatSlider, "a", value=0.1, min=0.0, max=1.0, step=0.1)}
    with pytest.raises(ValueError, match=r"book_views: view 'x' names no control \['b'\]"):
        W.explorer(controls, lambda a: None, book_views=[W.BookView("x", {"b": 1})])
