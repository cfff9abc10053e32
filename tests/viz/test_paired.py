"""vlr_lib.viz.lessons.paired_figure over every row of a synthetic lessons table (tests/report/tables.py): the browser
draws each seed's difference, the mean with its paired interval and the interval at Holm's level, and the verdict."""
from __future__ import annotations

import numpy as np
import pytest

from tests.report.tables import lesson_runs
from vlr_lib.report.lessons import lesson_table, seed_differences
from vlr_lib.viz import lessons as V

RUNS = lesson_runs()
TABLE = lesson_table(RUNS)


@pytest.mark.parametrize("i", range(len(TABLE)))
def test_every_difference_is_drawn_from_its_seeds(i):
    row = TABLE.iloc[i]
    fig = V.paired_figure(RUNS, TABLE, row["experiment"], row["condition"], row["comparison"])
    seeds, mean = fig.data[0], fig.data[1]
    expected = seed_differences(RUNS, row["experiment"], row["condition"], row["a"], row["b"])
    assert list(seeds.x) == [f"seed {s}" for s in expected.index]
    np.testing.assert_allclose(np.asarray(seeds.y, dtype=float), expected.to_numpy())
    assert np.mean(seeds.y) == pytest.approx(row["delta"])
    assert mean.y[0] == pytest.approx(row["delta"])
    assert mean.y[0] + mean.error_y.array[0] == pytest.approx(row["ci_high"])
    assert mean.y[0] - mean.error_y.arrayminus[0] == pytest.approx(row["ci_low"])
    holm = fig.data[2]
    assert (holm.y[0] - holm.error_y.arrayminus[0], holm.y[0] + holm.error_y.array[0]) == (
        pytest.approx(row["holm_low"]), pytest.approx(row["holm_high"]))
    low, high = fig.layout.yaxis.range
    assert low <= min(0.0, *expected, row["holm_low"]) and high >= max(0.0, *expected, row["holm_high"])
    assert row["verdict"] in fig.layout.title.subtitle.text and row["comparison"] in fig.layout.title.text
    assert any(shape.y0 == 0 for shape in fig.layout.shapes)  # the zero line


def test_one_seed_draws_no_interval_it_does_not_have():
    one = RUNS[RUNS["seed"] == 1]
    table = lesson_table(one)
    row = table.iloc[0]
    fig = V.paired_figure(one, table, row["experiment"], row["condition"], row["comparison"])
    assert [t.error_y.array for t in fig.data[1:]] == [None, None]  # the mean, no unbounded interval
    assert np.isfinite(fig.layout.yaxis.range).all()
    assert "cannot tell" in fig.layout.title.subtitle.text


def test_bad_arguments():
    row = TABLE.iloc[0]
    with pytest.raises(ValueError, match="condition and comparison"):
        V.paired_figure(RUNS, TABLE, row["experiment"], "nope", row["comparison"])
    with pytest.raises(ValueError, match="experiment must be one of"):
        V.paired_figure(RUNS, TABLE, "nope", row["condition"], row["comparison"])
