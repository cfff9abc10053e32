"""vlr_lib.experiments.recheck: each shipped record reproduces within its measured tolerance, and its check catches a change.

Notebooks 09, 10 and 11 make their checks in fast mode under nbval (and CI repeats them under torch's
portable kernels, `make test-portable`); the VSE++ showdown and notebook 12's record are checked here.
"""
from __future__ import annotations

import pandas as pd
import pytest

from vlr_lib.experiments import protocol, recheck, record


@pytest.mark.slow
@pytest.mark.parametrize("name", ["showdown-shapes-vsepp-full", "lessons-shapes-full"])
def test_a_shipped_record_reproduces_within_its_measured_tolerance(name):
    checked = protocol.check(name, strict=True)
    assert 0.0 <= checked.gap <= protocol.tolerance(name) and f"within {checked.gap:.2f}" in str(checked)


@pytest.mark.slow
def test_the_showdown_check_catches_another_loss():
    """The features showdown's checked cell with Triplet (all) in place of Triplet-SH fails the check. (Its margin
    0.2 -> 0.3 moves it 0.6 points only: while every hardest-negative hinge is active, Triplet-SH's gradient does
    not depend on the margin; docs/results.md, "How far a record drifts".)

    Its first 5 epochs, as notebook 10's fast mode re-trains them: the learning rate still decays at the record's
    epoch, so they are the first 5 epochs of the whole run, and the whole run's check, which compares every epoch
    against the same tolerance, fails on them as well."""
    change = {"loss": "triplet_all"}
    recorded, again = recheck.showdown("features")(5, **change)
    assert len(again) == 5
    with pytest.raises(AssertionError, match="regenerate it with make record"):
        record.check_reproduced(recorded, again, str(change), protocol.tolerance("showdown-shapes-features-full"),
                                strict=True)


@pytest.mark.slow
@pytest.mark.parametrize("change", [{"loss": ("info_nce", {"temperature": 0.1})}, {"lr": 2e-3},
                                    {"loss": ("unified", {"margin": 0.3, "gamma": 60.0})}],
                         ids=["NT-Xent for Unified", "lr x2", "margin 0.3"])
def test_the_fast_mode_check_of_notebook_09_catches_a_change(change):
    """Notebook 09's checked run (its first 3 epochs, as fast mode re-trains them) with one thing changed."""
    recorded, again = recheck.training(epochs=3, **change)
    with pytest.raises(AssertionError, match="regenerate it with make record"):
        record.check_reproduced(recorded, again, str(change), protocol.tolerance("09_training-shapes-full"), strict=True)


def test_check_compares_notebook_09s_own_run_and_retrains_without_it(monkeypatch):
    """Notebook 09's one-call check: its own run when it trained the record's, else the record's run re-trained."""
    rec = record.read("09_training-shapes-full", None)
    seed = rec.manifest["settings"]["seeds"][0]
    own = record.histories_of(rec.tables["runs"])[f"usual/{seed}/Unified"]
    assert "trained here: validation rsum within 0.00" in str(protocol.check(rec.name, trained=own))
    monkeypatch.setenv("VLR_FAST", "1")  # as under the tests and CI: a drift is an error, not a warning
    with pytest.raises(AssertionError, match="differ from the record"):  # 5 points off at every epoch
        protocol.check(rec.name, trained=[{**r, "rsum": r["rsum"] - 5.0} for r in own])
    checked = protocol.check(rec.name, trained=own, on_cpu=False, epochs=1)  # trained on a GPU: re-trained instead
    assert "re-trained at the record's settings on the CPU" in str(checked)


def test_check_compares_notebook_11s_cell_and_retrains_without_it(tmp_path, monkeypatch):
    """Notebook 11's one-call check: the record's cell as the notebook's grid trained it, else re-trained."""
    from vlr_lib._io import atomic_write_json
    from vlr_lib.experiments import GridResult

    rec = record.read("11_hyperparameters-shapes-full", None)
    seed = rec.manifest["settings"]["seeds"][0]
    cell = next(c for c in record.cells_of(rec.tables) if c["config"] == {"loss": "triplet_hardest"} and c["seed"] == seed)

    def grid_of(history):  # a grid folder holding that one cell, as grid() writes it
        atomic_write_json(tmp_path / "cells" / "k.json", {k: v for k, v in {**cell, "history": history}.items() if k != "key"})
        return GridResult(runs=pd.DataFrame({"key": ["k"]}), summary=None, out=str(tmp_path))

    assert "trained here: validation rsum within 0.00" in str(protocol.check(rec.name, trained=grid_of(cell["history"])))
    off = [{**r, "rsum": r["rsum"] - 5.0} for r in cell["history"]]
    monkeypatch.setenv("VLR_FAST", "1")  # as under the tests and CI: a drift is an error, not a warning
    with pytest.raises(AssertionError, match="differ from the record"):
        protocol.check(rec.name, trained=grid_of(off))
    assert "re-trained at the record's settings on the CPU (1 epochs)" in str(protocol.check(rec.name, epochs=1))


def test_a_name_no_experiment_records_is_no_check():
    checked = protocol.check("showdown-flickr30k-features-full")
    assert checked.gap is None and "nothing to check" in str(checked)


def test_one_entry_per_experiment_feeds_the_command_line_and_the_book():
    from vlr_lib import book
    from vlr_lib.cli import record as cli_record

    assert protocol.STEPS == ("10-features", "10-vsepp", "09", "11", "11-tuned", "12", "03-batch", "03-difficulty",
                              "13", "13-optimizer")
    assert book.recorded_chapters() == protocol.chapters() == (
        "03_contrastive", "09_training", "10_showdown", "11_hyperparameters", "12_lessons", "13_replication")
    assert cli_record.parser().parse_args(["--only", "12,09"]).only == ("12", "09")
    assert all(protocol.by_step(e.step) is e for e in protocol.EXPERIMENTS.values())


def test_grid_or_train_opens_the_record_or_trains(tmp_path, monkeypatch):
    """The notebooks' one call for a grid's record: the record for its settings, else the grid trained."""
    from vlr_lib.experiments import GridResult

    rec = record.read("11_hyperparameters-shapes-full", None)
    never = lambda: pytest.fail("trained although the record matches")  # noqa: E731
    runs, opened = record.grid_or_train(rec.name, rec.manifest["settings"], never)
    assert opened is not None and len(runs) == len(record.cells_of(rec.tables))
    monkeypatch.delenv("VLR_RECORD", raising=False)  # nothing is written outside make record
    trained = GridResult(runs=runs.head(1), summary=None, out=str(tmp_path))
    for settings, use in (({**rec.manifest["settings"], "lr": 1.0}, True), (rec.manifest["settings"], False)):
        got, opened = record.grid_or_train(rec.name, settings, lambda: trained, use_record=use)
        assert opened is None and got is trained.runs
    unkept = GridResult(runs=runs.head(1), summary=None, out=None)  # no cells folder: fine unless recording
    assert record.grid_or_train(rec.name, rec.manifest["settings"], lambda: unkept, use_record=False)[0] is unkept.runs
    monkeypatch.setenv("VLR_RECORD", str(tmp_path / "records"))
    with pytest.raises(ValueError, match="run the grid with out="):
        record.grid_or_train(rec.name, rec.manifest["settings"], lambda: unkept, use_record=False)
