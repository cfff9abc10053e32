"""report.lessons.lesson_table / lesson_reading on a synthetic lessons table whose differences are known by construction."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.report.tables import LESSON_MEANS, LESSON_SEEDS, LESSON_SPREAD, lesson_runs
from vlr_lib import stats
from vlr_lib.report.lessons import lesson_part, lesson_reading, lesson_table, seed_differences
from vlr_lib.report.markdown import last_epoch_share


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return lesson_table(lesson_runs())


def hand(exp: str, cond: str, a: str, b: str) -> tuple[float, float]:
    """(delta, half-width) by hand: seed s gives a - b = (M_a - M_b) + (spread_a - spread_b) s, s = 0, 1, 2, whose
    mean is (M_a - M_b) + (spread_a - spread_b) and sample std |spread_a - spread_b|; t_{0.975, 2} = 4.303."""
    gap = LESSON_SPREAD[a] - LESSON_SPREAD[b]
    return LESSON_MEANS[(exp, cond)][a] - LESSON_MEANS[(exp, cond)][b] + gap, 4.303 * abs(gap) / math.sqrt(3)


def test_paired_differences_intervals_and_verdicts(table):
    assert len(table) == 3 * len(LESSON_MEANS)
    for _, row in table.iterrows():
        delta, half = hand(row["experiment"], row["condition"], row["a"], row["b"])
        assert row["delta"] == pytest.approx(delta) and row["half"] == pytest.approx(half)
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(delta - half), pytest.approx(delta + half))
        expected = "cannot tell" if abs(delta) <= half else ("holds" if delta * row["expected"] > 0 else "reverses")
        assert row["uncorrected"] == expected
        told = "cannot tell" if row["p_holm"] >= 0.05 else ("holds" if delta * row["expected"] > 0 else "reverses")
        assert row["verdict"] == told
    # one family: the table's distinct comparisons (a condition that shares its runs with another counts once)
    distinct = table.drop_duplicates(["a", "b", "mean_a", "mean_b", "delta", "ci_low", "ci_high"])
    assert (table["family_size"] == len(distinct)).all()
    holm = dict(zip(distinct.index, stats.holm(distinct["p"])))
    assert [holm[i] for i in distinct.index] == pytest.approx(list(distinct["p_holm"]))
    by = table.set_index(["condition", "a", "b"])["verdict"]
    assert by[("random encoder", "triplet_hardest", "triplet_all")] == "reverses"  # -19 ± 2.5
    assert by[("pretrained encoder", "triplet_hardest", "triplet_all")] == "holds"  # +31 ± 2.5
    assert by[("pretrained encoder", "unified", "triplet_hardest")] == "cannot tell"  # +6 ± 19.9
    assert by[("pretrained encoder", "info_nce", "triplet_hardest")] == "holds"  # -31.5 ± 3.7 < 0, as the paper


def test_one_seed_cannot_tell():
    runs = lesson_runs()
    one = lesson_table(runs[runs["seed"] == 1])
    assert set(one["verdict"]) == {"cannot tell"} and (one["n_seeds"] == 1).all()


def test_per_seed_range_is_paired(table):
    row = table.set_index(["condition", "a", "b"]).loc[("random encoder", "info_nce", "triplet_hardest")]
    # per seed: (81 + 0.5 s) - (80 + 2 s) = 1 - 1.5 s
    assert (row["seed_min"], row["seed_max"]) == (pytest.approx(-2.0), pytest.approx(1.0))


def test_the_reading_states_each_verdict_with_its_numbers(table):
    out = lesson_reading(table, {"features": "(a) feature quality"})
    text = out["text"]
    assert text.startswith("**(a) feature quality**") and "**warmup**" in text
    assert out["verdicts"][("features", "Triplet-SH − Triplet")] == {
        "holds": ["pretrained encoder"], "reverses": ["random encoder"], "cannot tell": []}
    assert "reverses: random encoder (-19.0 ± 2.5, behind on every seed)" in text
    assert "holds: pretrained encoder (+31.0 ± 2.5, ahead on every seed)" in text
    assert "'NT-Xent < Triplet-SH' (Bleeker & de Rijke obs. 3)" in text
    for (exp, comparison), found in out["verdicts"].items():
        rows = table[(table["experiment"] == exp) & (table["comparison"] == comparison)]
        assert sorted(c for v in found.values() for c in v) == sorted(rows["condition"])


def test_warm_up_names_and_errors():
    runs = lesson_runs()
    assert "Triplet-SH" in lesson_table(runs[runs["experiment"] == "warmup"])["comparison"].iloc[0]
    with pytest.raises(ValueError, match="lessons table"):
        lesson_table(runs.drop(columns="role"))
    with pytest.raises(ValueError, match="metric must be one of"):
        lesson_table(runs, metric="loss")
    with pytest.raises(ValueError, match="no condition with both roles"):
        lesson_table(runs[runs["role"] == "triplet_all"])


def test_lesson_part_selects_one_experiment_in_order(table):
    part = lesson_part(table.iloc[::-1], "features")
    assert set(part["experiment"]) == {"features"} and len(part) == 3 * 2
    assert part["order"].is_monotonic_increasing
    with pytest.raises(ValueError, match="experiment must be one of"):
        lesson_part(table, "nope")
    with pytest.raises(TypeError, match="lesson table"):
        lesson_part(table.drop(columns="delta"), "features")


def test_last_epoch_share_counts_each_run_once():
    runs = pd.DataFrame({"key": ["a", "a", "b", "c"], "best_epoch": [5, 5, 3, 10], "epoch": [10, 10, 10, 10]})
    assert last_epoch_share(runs) == pytest.approx(1 / 3)  # a (listed twice) and b stop below, c still rises
    with pytest.raises(ValueError, match="best_epoch"):
        last_epoch_share(runs.drop(columns="best_epoch"))


def test_a_verdict_of_one_condition_can_change_with_the_family():
    """Alone, a condition's difference is judged with its own p; in the table, Holm multiplies it by the family's
    size (ranked), so a table with more conditions can only turn "holds"/"reverses" into "cannot tell"."""
    runs = lesson_runs()
    whole = lesson_table(runs)
    for exp in dict.fromkeys(whole["experiment"]):
        alone = lesson_table(runs[runs["experiment"] == exp]).set_index(["condition", "a", "b"])
        inside = whole[whole["experiment"] == exp].set_index(["condition", "a", "b"])
        assert (inside["p_holm"] >= alone.loc[inside.index, "p_holm"] - 1e-12).all()
        assert (inside["p"] == alone.loc[inside.index, "p"]).all()


def test_seed_differences_are_what_the_table_averages(table):
    runs = lesson_runs()
    for row in table.itertuples():
        d = seed_differences(runs, row.experiment, row.condition, row.a, row.b)
        assert list(d.index) == list(LESSON_SEEDS) and d.mean() == pytest.approx(row.delta)
        assert (d.min(), d.max()) == (pytest.approx(row.seed_min), pytest.approx(row.seed_max))
    with pytest.raises(ValueError, match="condition must be one of"):
        seed_differences(runs, "features", "nope", "unified", "triplet_hardest")
    with pytest.raises(ValueError, match="a and b must be roles"):
        seed_differences(runs, "features", "random encoder", "smooth_ap", "triplet_hardest")
    with pytest.raises(ValueError, match="lessons table"):
        seed_differences(runs.drop(columns="role"), "features", "random encoder", "unified", "triplet_all")
