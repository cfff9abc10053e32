"""vlr_lib.experiments.grid: configs, per-cell caching, tidy tables, the 15-cell GOAL grid, and vlr-grid."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

import vlr_lib.train
from vlr_lib.report.summary import summarize
from vlr_lib._io import UnreadableFileError
from vlr_lib.goal import GOAL_PAIRS, GOAL_TRIPLETS, parse_goal_name
from vlr_lib.experiments import expand_configs, goal_grid, grid
from vlr_lib.experiments import grid_search as gs

from tests.train.toy import toy_features

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = dict(epochs=1, batch_size=8, dim=8, lr=5e-3, probe_batch=0)


@pytest.fixture(scope="module")
def data():
    return toy_features(16, 2, 12)


class CountingFit:
    """Wraps the real fit and counts how often the grid trains."""

    def __init__(self):
        self.calls = 0
        self.real = vlr_lib.train.fit

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.real(*args, **kwargs)


def test_goal_grid_is_the_15_combinations():
    configs = goal_grid()
    assert len(configs) == 15
    pairs = {parse_goal_name(c["loss"]) for c in configs}
    assert pairs == {(t, p) for t in GOAL_TRIPLETS for p in GOAL_PAIRS}
    assert goal_grid(margin=0.1)[0] == {"loss": "goal:con,con", "margin": 0.1}


def test_expand_configs_per_loss_and_shared_grids():
    per_loss = expand_configs(["unified", "info_nce"], {"unified": {"gamma": [30, 60], "margin": [0.1, 0.2]}})
    assert len(per_loss) == 5 and {"loss": "unified", "gamma": 60, "margin": 0.1} in per_loss
    assert {"loss": "info_nce"} in per_loss
    shared = expand_configs(["triplet_all", "unified", "info_nce"], {"margin": [0.1, 0.2]})
    assert shared == [
        {"loss": "triplet_all", "margin": 0.1},
        {"loss": "triplet_all", "margin": 0.2},
        {"loss": "unified", "margin": 0.1},
        {"loss": "unified", "margin": 0.2},
        {"loss": "info_nce"},  # InfoNCE has no margin
    ]
    with pytest.raises(ValueError, match="^loss"):
        expand_configs(["no_such_loss"])
    with pytest.raises(ValueError, match="^losses"):
        expand_configs([{"margin": 0.2}])


def test_grid_rows_summary_files_and_caching(data, tmp_path, monkeypatch):
    counter = CountingFit()
    monkeypatch.setattr(vlr_lib.train, "fit", counter)  # the grid trains through train.trainer()
    kwargs = dict(train=data, val=data, out=tmp_path, progress=False, **SETTINGS)
    first = grid(["info_nce", "triplet_hardest"], seeds=[0, 1], **kwargs)
    assert counter.calls == 4
    runs = first.runs
    assert list(runs["loss"]) == ["info_nce", "info_nce", "triplet_hardest", "triplet_hardest"]
    assert list(runs["seed"]) == [0, 1, 0, 1]
    assert {"rsum", "i2t_r1", "t2i_r10", "map5", "pr_auc", "train_loss", "best_rsum", "key"} <= set(runs.columns)
    # Summary: mean and std over seeds, computed here independently from the rows.
    s = first.summary.set_index("config")
    for name in ("info_nce", "triplet_hardest"):
        for metric in ("rsum", "map5", "pr_auc"):
            vals = runs.loc[runs["loss"] == name, metric].tolist()
            mean = sum(vals) / 2
            std = (sum((v - mean) ** 2 for v in vals) / 1) ** 0.5
            assert s.loc[name, f"{metric}_mean"] == pytest.approx(mean)
            assert s.loc[name, f"{metric}_std"] == pytest.approx(std)
        assert s.loc[name, "n_seeds"] == 2
    for f in ("runs.csv", "summary.csv", "runs.parquet"):
        assert (tmp_path / f).exists(), f
    assert len(list((tmp_path / "cells").glob("*.json"))) == 4
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "runs.csv")[["loss", "seed"]], runs[["loss", "seed"]])
    assert "±" in first.table()

    cells = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cells").glob("*.json")}
    again = grid(["info_nce", "triplet_hardest"], seeds=[0, 1], **kwargs)
    assert counter.calls == 4  # every cell came from the cache (what notebook 11 teaches: a repeated call is free)
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cells").glob("*.json")} == cells  # none rewritten
    pd.testing.assert_frame_equal(again.runs, runs)

    grid(["info_nce", "triplet_hardest"], seeds=[0, 1, 2], **kwargs)
    assert counter.calls == 6  # only the new seed is trained
    grid(["info_nce"], seeds=[0], **{**kwargs, "lr": 1e-3})
    assert counter.calls == 7  # another setting is another cell


def test_other_data_is_another_cell(data, tmp_path, monkeypatch):
    counter = CountingFit()
    monkeypatch.setattr(vlr_lib.train, "fit", counter)  # the grid trains through train.trainer()
    img, txt, c2i = data
    grid(["info_nce"], train=data, out=tmp_path, progress=False, **SETTINGS)
    grid(["info_nce"], train=(img + 1.0, txt, c2i), out=tmp_path, progress=False, **SETTINGS)
    assert counter.calls == 2


def test_goal_grid_trains_15_cells(data, tmp_path):
    result = grid(goal_grid(), seeds=[0], train=data, val=data, out=tmp_path, progress=False, **SETTINGS)
    assert len(result.runs) == 15 and len(result.summary) == 15
    assert result.runs["rsum"].notna().all()
    assert len(list((tmp_path / "cells").glob("*.json"))) == 15


def test_grid_needs_exactly_one_data_source(data):
    with pytest.raises(ValueError, match="^train"):
        grid(["info_nce"], progress=False)


# --------------------------------------------------------------------------- the folder is the union of its cells


def test_a_second_grid_into_the_same_folder_keeps_the_first(data, tmp_path):
    kwargs = dict(train=data, val=data, out=tmp_path, progress=False, **SETTINGS)
    a = grid(["info_nce", "triplet_hardest"], seeds=[0, 1], **kwargs)
    b = grid(["unified"], seeds=[0, 1], **kwargs)
    assert set(a.runs["loss"]) == {"info_nce", "triplet_hardest"} and set(b.runs["loss"]) == {"unified"}
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert sorted(runs["loss"]) == sorted(["info_nce", "triplet_hardest", "unified"] * 2)
    assert len(pd.read_parquet(tmp_path / "runs.parquet")) == 6
    summary = pd.read_csv(tmp_path / "summary.csv").set_index("config")
    assert sorted(summary.index) == ["info_nce", "triplet_hardest", "unified"]
    assert (summary["n_seeds"] == 2).all()
    rows = a.runs.set_index(["loss", "seed"])["rsum"]
    again = runs.set_index(["loss", "seed"])["rsum"]
    for key, value in rows.items():
        assert again[key] == pytest.approx(value)


def test_cells_of_other_data_or_schedules_are_never_averaged_together(data, tmp_path):
    img, txt, c2i = data
    grid(["info_nce"], seeds=[0, 1], train=data, val=data, out=tmp_path, progress=False, **SETTINGS)
    grid(["info_nce"], seeds=[0, 1], train=(img * 2, txt, c2i), val=data, out=tmp_path, progress=False, **SETTINGS)
    grid(["info_nce"], seeds=[0, 1], train=data, val=data, out=tmp_path, progress=False, **{**SETTINGS, "epochs": 2})
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 6 and runs["data_id"].nunique() == 2 and runs["settings"].nunique() == 2
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert len(summary) == 3 and (summary["n_seeds"] == 2).all()  # three setups of one config, two seeds each
    assert "setup" in gs.GridResult(runs, summarize(runs)).table()


@pytest.mark.parametrize("losses, params, seeds, match", [
    ([], None, [0], "^losses is empty"),
    (["nope"], None, [0], "^loss .nope. is not a registered loss"),
    (["info_nce"], {"gamma": [1.0]}, [0], "none of the losses"),
    (["info_nce"], {"unified": {"gamma": [1.0]}}, [0], "not among the losses"),
    (["unified"], {"margin": [-0.1]}, [0], "^margin"),
    (["info_nce"], None, [0, 0], "^seeds must be distinct"),
    (["info_nce"], None, [], "^seeds is empty"),
    (["info_nce", "info_nce"], None, [0], "^losses select 'info_nce' twice"),
    (goal_grid() + ["goal:cir,sig-ms"], None, [0], "^losses select .* twice"),
    (["unified"], {"margin": [0.1, 0.10]}, [0], "^param_grid 'margin' lists 0.1 twice"),
    (["unified"], {"margin": [0.2, 0.2000000001]}, [0], "one number in float32"),  # issue 35: one run as two
    (["info_nce"], None, [2**63], "^seeds must be >= 0 and <= 9223372036854775807"),  # numpy/torch take int64
    ([{"loss": "info_nce", "epochs": 0}], None, [0], "^epochs"),
])
def test_bad_selections_are_rejected_before_anything_is_trained_or_written(data, tmp_path, monkeypatch, losses,
                                                                          params, seeds, match):
    counter = CountingFit()
    monkeypatch.setattr(vlr_lib.train, "fit", counter)  # the grid trains through train.trainer()
    with pytest.raises(ValueError, match=match):
        grid(losses, params, seeds, train=data, val=data, out=tmp_path / "g", progress=False, **SETTINGS)
    assert counter.calls == 0 and not (tmp_path / "g").exists()


def test_a_damaged_cell_names_the_file_and_the_fix(data, tmp_path):
    grid(["info_nce"], train=data, val=data, out=tmp_path, progress=False, **SETTINGS)
    cell = next((tmp_path / "cells").glob("*.json"))
    cell.write_text('{"config": {"loss": "info_nce"}, "seed": 0, "hist')
    with pytest.raises(UnreadableFileError, match=rf"{cell.name}.*truncated or damaged.*delete it"):
        grid(["info_nce"], train=data, val=data, out=tmp_path, progress=False, **SETTINGS)
    cell.write_text("[]")
    with pytest.raises(UnreadableFileError, match="list"):
        grid(["info_nce"], train=data, val=data, out=tmp_path, progress=False, **SETTINGS)


class StopAfter:
    """A callback that stops the run (like Ctrl-C) after epoch `n`."""

    def __init__(self, n: int):
        self.n = n

    def __call__(self, record, result):
        if record["epoch"] == self.n:
            raise KeyboardInterrupt


def test_an_interrupted_cell_resumes_from_its_last_epoch(data, tmp_path):
    kwargs = dict(train=data, val=data, progress=False, **{**SETTINGS, "epochs": 3})
    whole = grid(["info_nce"], **kwargs).runs
    with pytest.raises(KeyboardInterrupt):
        grid(["info_nce"], out=tmp_path, callbacks=[StopAfter(2)], **kwargs)
    partial = list((tmp_path / "cells").glob("*.partial"))
    assert len(partial) == 1 and not list((tmp_path / "cells").glob("*.json"))
    resumed = grid(["info_nce"], out=tmp_path, **kwargs).runs
    assert resumed["rsum"].item() == whole["rsum"].item() and resumed["train_loss"].item() == whole["train_loss"].item()
    assert not list((tmp_path / "cells").glob("*.partial"))  # cleaned once the cell is written


class Collapse:
    """Sets both heads to a constant map (W = 0, the same bias) after epoch 1: every later S is constant.

    (Callbacks must not change the models; this one breaks the rule on purpose, to make the
    collapsed model the issue describes: zeroed heads with a bias.)
    """

    def __call__(self, record, result):
        if record["epoch"] == 1:
            with torch.no_grad():
                for head in (result.img_head, result.txt_head):
                    head.fc.weight.zero_()
                    head.fc.bias.fill_(1.0)


def test_a_collapsed_epoch_is_never_the_selected_one(data):
    """Epoch 2's heads are constant (S constant): tie-safe metrics must not make it the best validation epoch.

    lr=1e-12 keeps the collapsed heads exactly constant through epoch 2's steps (float32), so
    epoch 2 is evaluated on a constant S; epoch 1 is the untrained heads, a plain ranking.
    """
    from vlr_lib.experiments import cells

    probe = cells.probe_batch(data, 8)
    pick = cells.ShowdownMetrics(data, probe)
    result = grid(["info_nce"], train=data, val=data, progress=False, callbacks=[pick, Collapse()],
                  **{**SETTINGS, "epochs": 2, "lr": 1e-12})
    row = result.runs.iloc[0]
    assert row["best_epoch"] == 1  # the grid's selection
    assert row["sel_epoch"] == 1  # the showdown's selection (ShowdownMetrics)
    assert row["rsum"] < row["best_rsum"]  # the collapsed epoch scores below the real one


def test_a_folder_of_other_files_is_never_written_into(data, tmp_path):
    """Issue 23: a folder with the user's own runs.csv is refused (ValueError naming out), before any training."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "runs.csv").write_text("my,own\n")
    with pytest.raises(ValueError, match=r"^out .*mine.*runs\.csv.*not a run folder"):
        grid(["info_nce"], seeds=[0], train=data, val=data, out=mine, progress=False, **SETTINGS)
    assert sorted(p.name for p in mine.iterdir()) == ["runs.csv"] and (mine / "runs.csv").read_text() == "my,own\n"


def test_a_run_folder_is_marked_and_an_old_one_without_the_marker_is_still_one(data, tmp_path):
    from vlr_lib._io import RUN_MARKER, is_run_folder

    grid(["info_nce"], seeds=[0], train=data, val=data, out=tmp_path / "g", progress=False, **SETTINGS)
    assert (tmp_path / "g" / RUN_MARKER).is_file()
    (tmp_path / "g" / RUN_MARKER).unlink()  # a folder written before the marker: its cells/ say what it is
    assert is_run_folder(tmp_path / "g")
    grid(["info_nce"], seeds=[1], train=data, val=data, out=tmp_path / "g", progress=False, **SETTINGS)
    assert (tmp_path / "g" / RUN_MARKER).is_file() and len(pd.read_csv(tmp_path / "g" / "runs.csv")) == 2


@pytest.mark.parametrize("cell, problem", [
    ({"config": {}, "seed": 0, "history": [{"epoch": 1}]}, "no loss name"),  # was: KeyError: 'loss'
    ({"config": {"loss": "info_nce"}, "history": [{"epoch": 1}]}, "no integer seed"),  # was: KeyError: 'seed'
    ({"config": {"loss": "info_nce"}, "seed": "0", "history": [{"epoch": 1}]}, "no integer seed"),
    ({"config": {"loss": "info_nce"}, "seed": 0, "history": [{"epoch": 1, "rsum": "high"}]},
     "rsum is 'high', not a number"),  # was: "agg function failed"
    ({"config": {"loss": "info_nce"}, "seed": 0, "history": [3]}, "epoch record 1 is a int"),
])
def test_a_bad_cell_outside_the_selection_is_named_before_anything_is_trained(data, tmp_path, monkeypatch, cell,
                                                                             problem):
    """Issue 23: every cell of the folder is read first (the tables are rebuilt from all of them)."""
    import json

    (tmp_path / "cells").mkdir()
    bad = tmp_path / "cells" / "0123456789abcdef0123.json"
    bad.write_text(json.dumps(cell))
    counter = CountingFit()
    monkeypatch.setattr(vlr_lib.train, "fit", counter)  # the grid trains through train.trainer()
    with pytest.raises(UnreadableFileError, match=rf"{bad.name} .*{problem}.*delete it"):
        grid(["info_nce"], seeds=[5], train=data, val=data, out=tmp_path, progress=False, **SETTINGS)
    assert counter.calls == 0 and [p.name for p in (tmp_path / "cells").iterdir()] == [bad.name]


def test_grid_takes_the_objectives_its_caller_built(data, monkeypatch):
    """The command line builds each configuration's objective once and hands them over: grid builds none again."""
    from vlr_lib.train import Objective, build_objective

    built = [build_objective(name, {}, batch_size=8, epochs=1) for name in ("info_nce", "triplet_hardest")]
    monkeypatch.setattr(Objective, "check", lambda self, batch_size: pytest.fail("checked again"))
    runs = grid(["info_nce", "triplet_hardest"], train=data, val=data, epochs=1, batch_size=8, dim=8,
                objectives=built, progress=False).runs
    assert list(runs["loss"]) == ["info_nce", "triplet_hardest"]
    with pytest.raises(ValueError, match="one Objective per configuration"):
        grid(["info_nce", "triplet_hardest"], train=data, val=data, epochs=1, objectives=built[:1])
