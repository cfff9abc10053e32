"""Every explorer of the notebooks (tests/widgets/cases.py) as the static book shows it (VLR_BOOK=1): its
main control's values as plotly frames (in each of its `book_views`, the view's control), the slider's steps
one per frame, every frame drawable by plotly's animate (the same traces as the first view), moving the
slider changes what is drawn, every control its prose asks for moves in the book, and the explorer, all its
views together, stays small enough for a page under the book's budget (make book checks every built page
as well)."""
from __future__ import annotations

import json

import pytest

from tests.widgets.cases import cases
from vlr_lib.widgets import _core as W

EXPLORER_BUDGET = 2_000_000  # estimated bytes of HTML per explorer in the book (pages: 5 MB, make book checks)
STEPS = 4  # values of the main control built here; the book builds BOOK_STEPS (+1), about BOOK_SCALE times more
BOOK_SCALE = (W.BOOK_STEPS + 1) / STEPS


# The controls each explorer's prose asks the reader to move (read in the notebooks, issue 34): the book
# must move each, as a view's slider or set differently by two views of its drop-down.
PROSE_CONTROLS = {
    "shapes-browser": {"difficulty", "group"},  # 00: "at difficulty 0 ... at 1", "move the sliders"
    "retrieval": {"noise", "direction", "query"},  # 01: "raise the noise", "switch to text → image", "find a query"
    "contrastive": {"temperature", "query"},  # 03: "pick a query and move the temperature"
    "sigmoid": {"logit_bias", "temperature"},  # 03: "move the bias", "move τ"
    "smooth-ap": {"tau", "query"},  # 06: "pick an image query and move τ"
    "goal-triplet": {"margin", "tau"},  # 07: "a larger τ sharpens both soft steps; the margin moves the cliff"
    "triplet-gradient": {"margin", "noise"},  # 02: "set m = 0 on an easy batch (low noise)", "at high noise"
    "triplet-tangent": {"theta_pos", "theta_neg", "side"},  # 02: "move the angles ... on the same or opposite sides"
    "unified": {"margin", "gamma"},  # 04
    "softmax": {"query", "k", "fraction", "scale"},  # 05: "move k", "the batch share", "pick a query", "lower λ"
    "goal": {"triplet", "pair", "margin", "tau"},  # 07's composer, exercise 5
    "cocos": {"noise", "margin", "eps", "temperature"},  # 08: noise, margin α, ε, NT-Xent τ
    "showdown": {"metric", "group", "checkpoint"},  # 10: "switch the metric, the group of losses, the checkpoint"
    "showdown-goal": {"metric", "color"},  # 10: "colour the cells by their difference ... and switch metrics"
    "training": {"metrics"},  # 09: "pick the metrics" (the runs: the book's legend toggles them)
    "sweep": {"loss", "x", "at", "metric"},  # 11: "choose a sweep, the parameter on the x-axis, the value of the
                                             #      other parameter and the metric"
    "paired": {"condition", "comparison"},  # 12: "pick an experiment's condition and one of the three orderings"
}


def _moved_in_book(box) -> set[str]:
    views = box.book_views or (W.BookView("", main=box.main),)
    sliders = {v.main or box.main for v in views}
    settings = {name: {json.dumps(v.values.get(name), default=str) for v in views} for name in box.controls}
    return sliders | {name for name, seen in settings.items() if len(seen) > 1}


@pytest.mark.parametrize("case", cases(), ids=lambda c: f"{c.notebook}-{c.name}")
def test_book_version_of_every_explorer(case):
    box = case.build()
    assert PROSE_CONTROLS.get(case.name, set()) <= _moved_in_book(box), "the book must move what the prose asks for"
    html_bytes = 0
    for view in box.book_views or (None,):
        main = (view.main if view else None) or box.main
        grid = list(view.grid) if view and view.grid else W.control_values(box.controls[main], steps=STEPS)
        note, figures = W.book_figures(box, steps=STEPS, view=view)
        if len(grid) < 2 and view and view.values:  # a view without a slider: drawn once, as it sets them
            drawn = box.draw(**{**box.values(), **view.values})
            assert "drawn once" in note and [f.to_json() for f in figures] == [drawn.to_json()]
            html_bytes += sum(len(fig.to_json()) for fig in figures)
            continue
        if len(grid) < 2:  # nothing to sweep: the first view, said so
            assert "first view" in note and figures == list(box.figures)
            return
        assert len(figures) == len(box.figures)
        for fig in figures:
            (slider,) = [s for s in fig.layout.sliders if s.steps and s.steps[0].method == "animate"]
            assert len(fig.frames) == len(slider.steps) == len(grid)
            # animate updates the traces a frame names, by index: the same ones in every frame, all of them drawn
            assert len({tuple(frame.traces) for frame in fig.frames}) == 1
            assert all(len(f.data) == len(f.traces) and max(f.traces) < len(fig.data) for f in fig.frames)
            shown = {json.dumps([frame.data[i].to_plotly_json() for i in range(len(frame.data))], default=str)
                     + json.dumps(frame.layout.to_plotly_json(), default=str) for frame in fig.frames}
            assert len(shown) > 1, f"moving the book's slider would change nothing ({view and view.label})"
        # the book draws BOOK_STEPS values (a view's own grid: as many as it has)
        html_bytes += sum(len(fig.to_json()) for fig in figures) * (1 if view and view.grid else BOOK_SCALE)
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
