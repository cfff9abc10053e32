"""vlr_lib.train.grid: configs, per-cell caching, tidy tables, the 15-cell GOAL grid, and vlr-grid."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from vlr_lib.goal import GOAL_PAIRS, GOAL_TRIPLETS, parse_goal_name
from vlr_lib.train import expand_configs, goal_grid, grid
from vlr_lib.train import grid_search as gs

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = dict(epochs=1, batch_size=8, dim=8, lr=5e-3, probe_batch=0)


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    img = torch.randn(16, 12, generator=g)
    c2i = torch.arange(16).repeat_interleave(2)
    txt = img[c2i] + 0.5 * torch.randn(32, 12, generator=g)
    return img, txt, c2i


class CountingFit:
    """Wraps the real fit and counts how often the grid trains."""

    def __init__(self):
        self.calls = 0
        self.real = gs.fit

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
    monkeypatch.setattr(gs, "fit", counter)
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

    again = grid(["info_nce", "triplet_hardest"], seeds=[0, 1], **kwargs)
    assert counter.calls == 4  # every cell came from the cache
    pd.testing.assert_frame_equal(again.runs, runs)

    grid(["info_nce", "triplet_hardest"], seeds=[0, 1, 2], **kwargs)
    assert counter.calls == 6  # only the new seed is trained
    grid(["info_nce"], seeds=[0], **{**kwargs, "lr": 1e-3})
    assert counter.calls == 7  # another setting is another cell


def test_other_data_is_another_cell(data, tmp_path, monkeypatch):
    counter = CountingFit()
    monkeypatch.setattr(gs, "fit", counter)
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
