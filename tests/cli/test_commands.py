"""The command lines doing their job, in-process: outputs, mode defaults, one meaning of topk, the scripts."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.cli.helpers import TINY, call
from tests.cli.test_errors import load_script
from vlr_lib.cli import common, grid, showdown, train

TIME_KEYS = ("seconds", "train_seconds")


def strip_time(history):
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in history]


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("VLR_DATA", "VLR_FAST", "VLR_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_train_prints_the_history_and_writes_csv_and_json(here, capsys):
    code, out, err = call(train.main, [*TINY, "--loss", "unified", "--margin", "0.2", "--history", "out/h.csv"],
                          capsys)
    assert code == 0, err
    assert "rsum" in out and "chance rsum" in out
    assert list(pd.read_csv(here / "out" / "h.csv")["epoch"]) == [1, 2]
    assert call(train.main, [*TINY, "--history", "h.json"], capsys)[0] == 0
    assert [r["epoch"] for r in json.loads((here / "h.json").read_text())] == [1, 2]


def test_mode_defaults_are_resolved_from_none_not_from_falsy_values():
    p = train.parser()
    e2e = common.schedule(p.parse_args([]), "e2e")
    assert e2e[0]["epochs"] == 20 and e2e[0]["batch_size"] == 32 and e2e[1] == {"dim": 64, "text_encoder": "gru"}
    feats = common.schedule(p.parse_args(["--mode", "features", "--epochs", "3"]), "features")
    assert feats[0]["epochs"] == 3 and feats[0]["lr"] == 2e-4 and feats[1] == {"dim": 512, "head": "linear"}


def test_setting_defaults_and_the_old_mode_flag():
    p = train.parser()
    assert common.resolve_setting(p.parse_args([])) == "e2e"  # shapes' default is unchanged
    assert common.resolve_setting(p.parse_args(["--data", "flickr30k"])) == "features"
    assert common.resolve_setting(p.parse_args(["--mode", "features"])) == "features"  # the old name still works
    assert common.resolve_setting(p.parse_args(["--setting", "vsepp", "--mode", "vsepp"])) == "vsepp"
    vsepp = common.schedule(p.parse_args(["--setting", "vsepp"]), "vsepp")
    assert vsepp[0]["lr"] == 2e-3 and vsepp[1] == {"dim": 256, "text_encoder": "gru", "head": "linear",
                                                   "word_dim": 32, "hidden": 64}
    flickr = common.schedule(p.parse_args(["--data", "flickr30k", "--setting", "vsepp", "--hidden", "512"]), "vsepp")
    assert flickr[1]["word_dim"] == 300 and flickr[1]["hidden"] == 512 and flickr[1]["dim"] == 1024


@pytest.mark.parametrize("setting", ["features", "vsepp", "e2e"])
def test_train_and_grid_in_every_setting(setting, here, capsys):
    small = [*TINY[2:], "--setting", setting, "--epochs", "1"]
    code, out, err = call(train.main, [*small, "--loss", "triplet_hardest"], capsys)
    assert code == 0, err
    assert f"setting: {setting}" in out
    code, out, err = call(grid.main, [*small, "--losses", "info_nce", "--out", "g"], capsys)
    assert code == 0, err
    assert pd.read_csv(here / "g" / "runs.csv")["setting"].tolist() == [setting]


def test_random_image_encoder_from_the_command_line(here, capsys):
    args = [*TINY, "--loss", "info_nce", "--history", "h.json"]
    assert call(train.main, args, capsys)[0] == 0
    pretrained = json.loads((here / "h.json").read_text())
    assert call(train.main, [*args, "--image-encoder", "random"], capsys)[0] == 0
    assert json.loads((here / "h.json").read_text())[-1]["rsum"] != pretrained[-1]["rsum"]


@pytest.mark.parametrize("text, value", [("1", 1), ("50", 50), ("1.0", 1.0), ("0.5", 0.5), ("5e-1", 0.5)])
def test_topk_literal_decides_count_or_fraction(text, value):
    parsed = common.loss_params()["topk"](text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("topk", ["3", "0.5"])
def test_vlr_train_topk_and_vlr_grid_param_topk_train_the_identical_model(topk, here, capsys):
    """One meaning of topk: the two command lines build the same loss kwargs, so the same history."""
    args = [*TINY, "--epochs", "2"]
    assert call(train.main, [*args, "--loss", "cross_example_softmax", "--topk", topk, "--history", "t.json"],
                capsys)[0] == 0
    assert call(grid.main, [*args, "--losses", "cross_example_softmax", "--param", f"topk={topk}", "--out", "g"],
                capsys)[0] == 0
    cell = json.loads(next((here / "g" / "cells").glob("*.json")).read_text())
    assert cell["config"]["topk"] == common.loss_params()["topk"](topk)  # same type: int count or float fraction
    assert strip_time(cell["history"]) == strip_time(json.loads((here / "t.json").read_text()))


def test_grid_prints_mean_and_std_and_the_folder_keeps_every_cell(here, capsys):
    code, out, _ = call(grid.main, [*TINY, "--losses", "triplet_hardest,info_nce", "--seeds", "0,1", "--out", "g"],
                        capsys)
    assert code == 0 and "±" in out and "triplet_hardest" in out
    assert call(grid.main, [*TINY, "--losses", "unified", "--out", "g"], capsys)[0] == 0
    runs = pd.read_csv(here / "g" / "runs.csv")
    assert sorted(runs["loss"].unique()) == ["info_nce", "triplet_hardest", "unified"] and len(runs) == 5


def test_showdown_writes_the_markdown_block(here, capsys):
    code, out, _ = call(showdown.main, ["--fast", "--epochs", "1", "--seeds", "0", "--out", "sd",
                                        "--markdown", "md/results.md"], capsys)
    assert code == 0
    text = (here / "md" / "results.md").read_text()
    assert text.strip() == out.strip().split("\n(stored")[0].strip()
    assert "| loss | hyper-param | i2t R@1 |" in text and "python -m vlr_lib showdown --data shapes --setting features --fast" in text
    code, out, _ = call(showdown.main, ["--fast", "--epochs", "1", "--seeds", "0", "--out", "sd"], capsys)
    assert code == 0 and "stored table reused" in out
    assert "setting features" in text and "heads only on frozen features" in text


def test_showdown_in_the_vsepp_setting(here, capsys):
    code, out, err = call(showdown.main, ["--fast", "--setting", "vsepp", "--epochs", "1", "--seeds", "0", "--out",
                                          "sd"], capsys)
    assert code == 0, err
    assert "setting vsepp" in out and "VSE++ setting" in out and "--setting vsepp" in out
    assert "token ids" in out  # the data line says what the text encoder reads


def test_make_shapes_writes_a_loadable_folder_and_replaces_it_whole(here, capsys):
    from vlr_lib.data import load_shapes

    script = load_script("make_shapes")
    assert call(script.main, ["--out", "s", "--n-train", "4", "--n-val", "2", "--n-test", "2"], capsys)[0] == 0
    assert len(load_shapes(here / "s")["train"]) == 4
    assert call(script.main, ["--out", "s", "--n-train", "6", "--n-val", "2", "--n-test", "2"], capsys)[0] == 0
    assert len(load_shapes(here / "s")["train"]) == 6
    assert sorted(p.name for p in here.iterdir()) == ["s"]  # no temp or old folder left behind


def test_lessons_writes_the_markdown_block_and_reuses_the_stored_table(here, capsys, monkeypatch):
    from vlr_lib.cli import lessons as lessons_cli
    from vlr_lib.experiments import lessons

    small = lessons.LessonsSpec  # the CLI's spec, made tiny: sizes are not flags (the chapter fixes them)
    monkeypatch.setattr(lessons, "LessonsSpec", lambda **kw: small(
        **kw, difficulties=(0.0, 1.0), warmup_epochs=(1,), settings=("features", "vsepp"),
        showdown={"n_train": 24, "n_val": 12, "n_test": 12, "epochs": 2, "batch_size": 12, "dim": 8, "probe": 12,
                  "word_dim": 8, "hidden": 8}))  # 2 epochs: the one-epoch warm-up must switch inside the run
    code, out, err = call(lessons_cli.main, ["--fast", "--seeds", "0,1", "--out", "l", "--markdown", "l.md"], capsys)
    assert code == 0, err
    text = (here / "l.md").read_text()
    assert text.strip() == out.strip() and "python -m vlr_lib lessons --fast --seeds 0,1 --out l" in text
    for heading in ("(a) feature quality", "(b) false negatives", "(c) hardest-negative warm-up", "(d) the setting",
                    "(e) the optimizer"):
        assert f"**{heading}**" in text
    code, out, _ = call(lessons_cli.main, ["--fast", "--seeds", "0,1", "--out", "l"], capsys)
    assert code == 0 and "stored table reused" in out


@pytest.mark.parametrize("text, names", [
    ("goal:cir,sig-ms", ["goal:cir,sig-ms"]),  # issue 23: was split into 'goal:cir' and 'sig-ms'
    ("info_nce, goal:cir , sig-ms,unified", ["info_nce", "goal:cir,sig-ms", "unified"]),
    ("warmup:triplet_all:1:goal:cir,sig-ms,info_nce", ["warmup:triplet_all:1:goal:cir,sig-ms", "info_nce"]),
])
def test_grid_losses_keep_a_goal_combination_whole(text, names):
    assert grid.losses(text) == names


def test_a_warm_up_into_a_goal_combination_trains_from_the_command_line(here, capsys):
    """Issue 23: --loss warmup:triplet_all:1:goal:cir,sig-ms failed, its colon split breaking the GOAL name."""
    code, out, err = call(train.main, [*TINY, "--loss", "warmup:triplet_all:1:goal:cir,sig-ms"], capsys)
    assert code == 0 and "rsum" in out, err


def test_train_builds_and_checks_its_objective_once(here, capsys, monkeypatch):
    """--margin reaches the loss through the command line, one objective builder and the trainer: one check."""
    from vlr_lib.train import Objective

    calls, real = [], Objective.check
    monkeypatch.setattr(Objective, "check", lambda self, batch_size: calls.append(self.describe()) or real(self, batch_size))
    assert call(train.main, [*TINY, "--loss", "unified", "--margin", "0.2"], capsys)[0] == 0
    assert calls == ["unified(margin=0.2)"]


def test_grid_builds_and_checks_each_objective_once(here, capsys, monkeypatch):
    """The grid command checks every configuration before training and hands the objectives to grid(): one check."""
    from vlr_lib.train import Objective

    calls, real = [], Objective.check
    monkeypatch.setattr(Objective, "check", lambda self, batch_size: calls.append(self.describe()) or real(self, batch_size))
    args = [*TINY, "--losses", "unified", "--param", "margin=0.1,0.2", "--out", "g"]
    assert call(grid.main, args, capsys)[0] == 0
    assert sorted(calls) == ["unified(margin=0.1)", "unified(margin=0.2)"]


@pytest.mark.parametrize("command", ["tuned", "lessons"])
def test_under_torchrun_rank_0_alone_prints_and_writes(command, here, capsys, monkeypatch):
    """Issue 35: under torchrun the tuned table printed once per rank (lessons likewise)."""
    from vlr_lib.cli import lessons, tuned
    from vlr_lib.experiments import cells, lessons as L, tuned as T
    from vlr_lib.report import lessons as R
    from vlr_lib.train import distributed

    done = cells.Showdown(pd.DataFrame(), {}, here, reused=False)
    experiment, main = {"tuned": (T, tuned.main), "lessons": (L, lessons.main)}[command]
    monkeypatch.setattr(experiment, "run", lambda *a, **k: done)
    monkeypatch.setattr(*((T, "markdown") if command == "tuned" else (R, "lessons_markdown")),
                        lambda *a, **k: "the table")
    argv = ["--fast", "--out", "o", "--markdown", "t.md"]
    monkeypatch.setattr(distributed, "rank_and_world", lambda: (1, 2))
    assert call(main, argv, capsys) == (0, "", "") and not (here / "t.md").exists()
    monkeypatch.setattr(distributed, "rank_and_world", lambda: (0, 2))
    assert call(main, argv, capsys) == (0, "the table\n", "") and (here / "t.md").read_text() == "the table"
