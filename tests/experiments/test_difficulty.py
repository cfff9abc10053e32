"""vlr_lib.experiments.difficulty: notebook 03's difficulty experiment, its record, its declared family and its
reading.

The record is opened for the code's settings (tests/experiments/test_record.py also checks it is not stale), holds
every (loss, difficulty, seed) once, agrees with the features showdown where the two train the same runs, and reads
to the findings notebook 03 asserts in full mode (its fast mode trains a small version instead).
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

from vlr_lib import viz
from vlr_lib.experiments import difficulty, lessons, protocol, record


@pytest.fixture(scope="module")
def race():
    opened = difficulty.run(record=True)
    assert opened.record is not None, f"no usable record {difficulty.NAME}: {record.REGENERATE} --only 03-difficulty"
    return opened


def test_the_design_is_notebook_12s_difficulties_with_seeds_of_its_own():
    assert difficulty.DIFFICULTIES == lessons.LessonsSpec().difficulties == (0.0, 0.5, 1.0)
    assert difficulty.SEEDS == (0, 1, 2, 3, 4) and not set(difficulty.SEEDS) & set(range(8, 16))
    spec = difficulty.spec_for(1.0)
    assert (spec.difficulty, spec.batch_size, spec.epochs, spec.n_train) == (1.0, 128, 20, 1000)


def test_the_family_declares_the_interaction_with_the_hypothesis_sign():
    names = [name for name, *_ in difficulty.FAMILY]
    assert names[:3] == [f"SigLIP - NT-Xent at difficulty {d:g}" for d in (0, 0.5, 1)]
    name, a, b, expected = difficulty.FAMILY[-1]
    assert (a, b, expected) == ((("siglip", 1.0), ("info_nce", 1.0)), (("siglip", 0.0), ("info_nce", 0.0)), 1)


def test_the_record_holds_every_loss_difficulty_and_seed_once(race):
    runs = race.runs
    assert len(runs) == len(difficulty.LOSSES) * len(difficulty.DIFFICULTIES) * len(difficulty.SEEDS)
    assert not runs.duplicated(["loss", "difficulty", "seed"]).any()
    assert set(runs["seed"]) == set(difficulty.SEEDS) and set(runs["difficulty"]) == set(difficulty.DIFFICULTIES)
    assert (runs["epochs"] == 20).all()
    overlap = [race.meta["overlap"][f"{d:g}"] for d in difficulty.DIFFICULTIES]
    assert overlap == sorted(overlap) and len(set(overlap)) == 3  # harder data: scenes share more


def test_its_ntxent_cells_at_difficulty_half_are_the_showdowns(race):
    """Difficulty 0.5 is the showdown's own data: NT-Xent's cells there repeat the features showdown's record."""
    showdown = record.read("showdown-shapes-features-full", None)
    mine = [c for c in record.cells_of(race.record.tables) if c["difficulty"] == 0.5]
    for seed in (0, 1, 2):
        a = record.cell_history(mine, {"loss": "info_nce"}, seed)
        b = record.cell_history(record.cells_of(showdown.tables), {"loss": "info_nce"}, seed)
        gap = max(abs(x["rsum"] - y["rsum"]) for x, y in zip(a, b, strict=True))
        assert gap <= protocol.tolerance("showdown-shapes-features-full"), (seed, gap)


def test_the_interaction_is_the_difference_of_the_two_advantages(race):
    found = difficulty.findings(race.runs).set_index("name")
    assert (found["n"] == 5).all()
    inter = found.loc[difficulty.FAMILY[-1][0]]
    assert inter["expected"] == 1
    assert math.isclose(inter["delta"], found.loc["SigLIP - NT-Xent at difficulty 1", "delta"]
                        - found.loc["SigLIP - NT-Xent at difficulty 0", "delta"], abs_tol=1e-9)


def test_the_family_reads_to_what_notebook_03_asserts(race):
    found = difficulty.findings(race.runs)
    verdict = dict(zip(found["name"], found["verdict"]))
    by = found.set_index("name")
    at = [f"SigLIP - NT-Xent at difficulty {d:g}" for d in (0, 0.5, 1)]
    assert [verdict[a] for a in at] == ["ahead", "not told apart", "not told apart"]
    assert 0.04 < by.loc[at[0], "p_holm"] < 0.05  # at the edge of the correction
    inter = by.loc[difficulty.FAMILY[-1][0]]
    assert inter["delta"] < 0 and inter["verdict"] == "cannot tell"  # against the hypothesis' sign, not told


def test_the_figure_draws_one_line_over_the_difficulties_with_their_overlap(race):
    found = difficulty.findings(race.runs)
    table = difficulty.deltas(race, found)
    fig = viz.lessons.deltas_figure(table, "difficulty")
    (line,) = fig.data
    assert line.name == "SigLIP − NT-Xent" and len(line.x) == 3 and all("overlap" in x for x in line.x)
    assert list(line.y) == list(found["delta"][:3])


def test_a_comparison_on_a_missing_cell_names_it(race):
    without = race.runs[~((race.runs["loss"] == "siglip") & (race.runs["difficulty"] == 1.0))]
    with pytest.raises(KeyError, match="no runs of siglip at difficulty 1"):
        difficulty.findings(without)


def test_the_record_key_holds_the_family_so_a_changed_family_is_a_stale_record(monkeypatch):
    assert record.read(difficulty.NAME, difficulty.record_key()) is not None
    monkeypatch.setattr(difficulty, "FAMILY", difficulty.FAMILY[:-1])
    assert record.read(difficulty.NAME, difficulty.record_key()) is None


def test_the_check_retrains_the_checked_cell_within_its_tolerance():
    recorded, again = difficulty.recorded_and_again(epochs=protocol.CHECK_EPOCHS)
    assert len(again) == protocol.CHECK_EPOCHS
    assert record.check_reproduced(recorded, again, "as recorded", protocol.tolerance(difficulty.NAME),
                                   strict=True) <= protocol.tolerance(difficulty.NAME)


def test_fast_mode_trains_a_small_version_and_resumes_from_its_cells(tmp_path, monkeypatch):
    monkeypatch.setenv("VLR_RUNS", str(tmp_path))
    monkeypatch.delenv("VLR_RECORD", raising=False)
    race = difficulty.run(fast=True)
    assert race.record is None and len(race.runs) == 2 * 3 * 2
    assert set(race.runs["difficulty"]) == set(difficulty.DIFFICULTIES)
    table = difficulty.summary(race)
    assert list(table.columns) == ["scene overlap", "NT-Xent", "SigLIP"] and isinstance(table, pd.DataFrame)
    again = difficulty.run(fast=True)  # every cell cached: nothing trained
    assert all(m["epochs_trained_now"] == 0 for m in again.meta["difficulties"].values())
    pd.testing.assert_frame_equal(again.runs, race.runs)
