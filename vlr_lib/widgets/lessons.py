"""The explorer of notebook 12: the paired-difference browser (``vlr_lib.viz.lessons.paired_figure``).

Choose an experiment's condition and one of the papers' three orderings; the figure shows the seeds the
difference is made of. The book shows every condition on its slider, one drop-down view per ordering.
"""
from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as W
import pandas as pd

from ..report.lessons import lesson_part
from ..viz import lessons
from ._core import BookView, Explorer, explorer, slider


def paired_explorer(runs: pd.DataFrame, table: pd.DataFrame, labels: Mapping[str, str] | None = None,
                    comparison: str | None = None) -> Explorer:
    """Browse the differences of a lessons table (`table`, made from `runs`) by experiment and condition
    ("condition": every condition, labelled with its experiment by `labels`) and by ordering ("comparison")."""
    labels = dict(labels or {})
    options = [(f"{labels.get(e, e)}: {c}", (e, c)) for e in dict.fromkeys(table["experiment"])
               for c in lesson_part(table, e)["condition"].drop_duplicates()]
    comparisons = list(dict.fromkeys(table["comparison"]))
    comparison = comparisons[0] if comparison is None else comparison
    if comparison not in comparisons:
        raise ValueError(f"comparison must be one of {comparisons}, got {comparison!r}")

    def draw(condition: tuple[str, str], comparison: str):
        return lessons.paired_figure(runs, table, *condition, comparison)

    controls = {
        "condition": slider(W.SelectionSlider, "condition", options=options, value=options[0][1],
                            layout=W.Layout(width="95%")),
        "comparison": W.ToggleButtons(options=comparisons, value=comparison, description="ordering"),
    }
    # the book's slider steps: "(a) random encoder" (the experiment's first word), short enough to read
    steps = tuple((f"{labels.get(e, e).split()[0]} {c}", (e, c)) for _, (e, c) in options)
    views = [BookView(c, {"comparison": c}, "condition", steps) for c in comparisons]
    views.insert(0, views.pop(comparisons.index(comparison)))
    return explorer(controls, draw, rows=[["comparison"], ["condition"]], name="paired", main="condition",
                    book_views=views)
