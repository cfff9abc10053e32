"""vlr_lib.viz.lessons on a synthetic lessons table (tests/report/tables.py): the figures draw the table's numbers."""
from __future__ import annotations

import numpy as np
import pytest

from tests.report.tables import lesson_runs
from vlr_lib.report.lessons import lesson_table
from vlr_lib.viz import lessons as V


@pytest.fixture(scope="module")
def table():
    runs = lesson_runs()
    runs.loc[runs["experiment"] == "warmup", "experiment"] = "difficulty"  # a difficulty panel shows the overlap
    return lesson_table(runs)


@pytest.mark.parametrize("experiment", ["features", "difficulty"])
def test_deltas_figure_draws_each_difference_with_its_noise_and_verdict(table, experiment):
    fig = V.deltas_figure(table, experiment)
    part = table[table["experiment"] == experiment].sort_values("order", kind="stable")
    assert len(fig.data) == 3  # one line per comparison
    for trace, (comparison, rows) in zip(fig.data, part.groupby("comparison", sort=False)):
        assert trace.name.startswith(comparison)
        np.testing.assert_allclose(np.asarray(trace.y, dtype=float), rows["delta"].to_numpy())
        np.testing.assert_allclose(np.asarray(trace.error_y.array, dtype=float), rows["half"].to_numpy())
        assert list(trace.marker.symbol) == [V.SYMBOLS[v] for v in rows["verdict"]]
    ticks = list(fig.data[0].x)
    if experiment == "difficulty":
        assert all("overlap 0.50" in t for t in ticks)
    else:
        assert ticks == ["random encoder", "pretrained encoder"]
    assert any(shape.y0 == 0 for shape in fig.layout.shapes)  # the zero line


def test_overview_has_a_panel_per_experiment_and_one_legend(table):
    fig = V.overview_figure(table, {"features": "(a) feature quality"})
    titles = [a.text for a in fig.layout.annotations]
    assert "(a) feature quality" in titles and "difficulty" in titles
    assert len(fig.data) == 6 and sum(bool(t.showlegend) for t in fig.data) == 3


def test_bad_arguments(table):
    with pytest.raises(ValueError, match="experiment must be one of"):
        V.deltas_figure(table, "nope")
    with pytest.raises(TypeError, match="lesson table"):
        V.deltas_figure(lesson_runs(), "features")
