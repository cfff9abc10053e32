"""vlr_lib.experiments.batch_size: notebook 03's batch-size experiment, its record, its declared family and its reading.

The record is opened for the code's settings (tests/experiments/test_record.py also checks it is not stale), holds
every (loss, batch size, seed) once, agrees with the features showdown where the two train the same runs, and
reads to the findings notebook 03 asserts in full mode (its fast mode trains a small version instead).
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

from vlr_lib import losses
from vlr_lib.experiments import batch_size, protocol, record


@pytest.fixture(scope="module")
def race():
    opened = batch_size.run(record=True)
    assert opened.record is not None, f"no usable record {batch_size.NAME}: {record.REGENERATE} --only 03-batch"
    return opened


def test_the_record_holds_every_loss_batch_size_and_seed_once(race):
    runs = race.runs
    assert len(runs) == len(batch_size.LOSSES) * len(batch_size.BATCH_SIZES) * len(batch_size.SEEDS)
    assert not runs.duplicated(["loss", "batch_size", "seed"]).any()
    assert set(runs["seed"]) == set(batch_size.SEEDS) and max(batch_size.SEEDS) < 8  # 8-15 are another's
    assert set(runs["batch_size"].astype(int)) == set(batch_size.BATCH_SIZES)
    assert (runs["epochs"] == 20).all(), "epochs, not steps, are held fixed"


def test_its_ntxent_cells_at_batch_128_are_the_showdowns(race):
    """Batch 128 is the showdown's own budget: NT-Xent's cells there repeat the features showdown's record (made on
    another CPU; measured gap 0.0)."""
    showdown = record.read("showdown-shapes-features-full", None)
    for seed in (0, 1, 2):
        mine = record.cell_history(record.cells_of(race.record.tables), {"loss": "info_nce", "batch_size": 128}, seed)
        theirs = record.cell_history(record.cells_of(showdown.tables), {"loss": "info_nce"}, seed)
        gap = max(abs(a["rsum"] - b["rsum"]) for a, b in zip(mine, theirs, strict=True))
        assert gap <= protocol.tolerance("showdown-shapes-features-full"), (seed, gap)


def test_the_family_reads_to_what_notebook_03_asserts(race):
    found = batch_size.findings(race.runs)
    assert list(found["name"]) == [name for name, *_ in batch_size.FAMILY] and (found["n"] == 5).all()
    verdict = dict(zip(found["name"], found["verdict"]))
    by = found.set_index("name")
    assert verdict["NT-Xent: batch 512 - batch 32"] == "not told apart"
    assert by.loc["SigLIP: batch 512 - batch 32", "delta"] > 0
    assert verdict["SigLIP: batch 512 - batch 32"] == "not told apart"
    inter = by.loc["NT-Xent's gain from 32 to 512 - SigLIP's"]
    assert inter["delta"] < 0 and inter["verdict"] == "cannot tell" and inter["expected"] == 1
    assert [verdict[f"CLIP learned tau - NT-Xent at batch {b}"] for b in (32, 128, 512)] == [
        "behind", "behind", "not told apart"]
    # the interaction is the difference of the two batch effects, seed by seed
    assert math.isclose(inter["delta"], by.loc["NT-Xent: batch 512 - batch 32", "delta"]
                        - by.loc["SigLIP: batch 512 - batch 32", "delta"], abs_tol=1e-9)


def test_the_learned_parameters_are_kept_per_epoch_within_the_clamp(race):
    paths = batch_size.learned_paths(race)
    per_run = paths.groupby(["loss", "batch_size", "seed", "parameter"]).size()
    assert set(paths["loss"]) == {"siglip", "clip_learned"} and (per_run == 20).all()
    assert len(per_run) == 5 * 3 * 3  # clip: t'; siglip: t' and b
    scale = paths.loc[paths["parameter"] == "logit_scale", "value"]
    assert scale.between(losses.LOGIT_SCALE_MIN, losses.LOGIT_SCALE_MAX).all()
    table = batch_size.learned_table(paths)
    assert table.loc[("CLIP: tau", 32), "epoch 20"] < table.loc[("CLIP: tau", 512), "epoch 20"] < 0.07


def test_a_comparison_on_a_missing_cell_names_it(race):
    without = race.runs[~((race.runs["loss"] == "siglip") & (race.runs["batch_size"] == 512))]
    with pytest.raises(KeyError, match="no runs of siglip at batch size 512"):
        batch_size.findings(without)


def test_the_record_key_holds_the_family_so_a_changed_family_is_a_stale_record(monkeypatch):
    spec = batch_size.spec_for()
    assert record.read(batch_size.NAME, batch_size.record_key(spec)) is not None
    monkeypatch.setattr(batch_size, "FAMILY", batch_size.FAMILY[:-1])
    assert record.read(batch_size.NAME, batch_size.record_key(spec)) is None


@pytest.mark.slow
def test_the_check_catches_another_batch_size():
    """The checked cell (SigLIP, batch 32, seed 0) re-trained at batch 128 lands beyond the tolerance."""
    recorded, again = batch_size.recorded_and_again(epochs=3)
    assert record.check_reproduced(recorded, again, "as recorded", protocol.tolerance(batch_size.NAME), strict=True) \
        <= protocol.tolerance(batch_size.NAME)
    from dataclasses import replace

    from vlr_lib.experiments import cells

    spec = replace(batch_size.spec_for(), device="cpu", epochs=3, batch_size=128)
    other = [r["rsum"] for r in cells.retrain(spec, "siglip", 0).history]
    with pytest.raises(AssertionError, match="regenerate it with make record"):
        record.check_reproduced(recorded, other, "batch 128", protocol.tolerance(batch_size.NAME), strict=True)


def test_fast_mode_trains_a_small_version(tmp_path, monkeypatch):
    monkeypatch.setenv("VLR_RUNS", str(tmp_path))
    monkeypatch.delenv("VLR_RECORD", raising=False)
    spec = batch_size.spec_for(fast=True)
    race = batch_size.run(spec)
    assert race.record is None and len(race.runs) == 3 * 3 * 2
    table = batch_size.summary(race.runs, batch_size.batch_sizes(spec))
    assert list(table.columns) == ["batch 8", "batch 32", "batch 128"] and isinstance(table, pd.DataFrame)
