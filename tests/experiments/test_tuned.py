"""The tuned comparison (vlr_lib.experiments.tuned): selection on validation only, paired tables, clear errors.

The selection and tables are checked on hand-made run tables whose answers are known; one fast run
trains the real thing end to end (2 seeds, notebook 10's fast size).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from vlr_lib import stats
from vlr_lib.cli import tuned as cli
from vlr_lib.experiments import cells
from vlr_lib.experiments import tuned as T
from tests.cli.helpers import call

GRID = {"triplet_hardest": ("margin", (0.1, 0.2, 0.4)), "info_nce": ("temperature", (0.05, 0.1))}


def runs_table(val: dict, test: dict, seeds=(0, 1, 2)) -> pd.DataFrame:
    """Rows (loss, value, seed) with best_rsum = val[(loss, value)] + seed and sel_rsum = test[...] + 2 * seed."""
    rows = []
    for (loss, v), base in val.items():
        param = dict(GRID)[loss][0]
        for s in seeds:
            rows.append({"loss": loss, param: v, "seed": s, "best_rsum": base + s, "sel_rsum": test[(loss, v)] + 2 * s})
    return pd.DataFrame(rows)


VAL = {("triplet_hardest", 0.1): 400.0, ("triplet_hardest", 0.2): 410.0, ("triplet_hardest", 0.4): 420.0,
       ("info_nce", 0.05): 430.0, ("info_nce", 0.1): 425.0}
TEST = {("triplet_hardest", 0.1): 390.0, ("triplet_hardest", 0.2): 400.0, ("triplet_hardest", 0.4): 405.0,
        ("info_nce", 0.05): 380.0, ("info_nce", 0.1): 420.0}


def test_selection_picks_the_best_mean_validation_value_never_test():
    chosen = T.selection(runs_table(VAL, TEST), chance_val=16.0, grid=GRID)
    pick = chosen[chosen["chosen"]].set_index("loss")["value"]
    assert pick["triplet_hardest"] == 0.4 and pick["info_nce"] == 0.05  # info_nce 0.05 is worse on test: still chosen
    default = chosen[chosen["default"]].set_index("loss")["value"]
    assert default["triplet_hardest"] == 0.2 and default["info_nce"] == 0.1


def test_a_value_with_a_run_at_chance_is_not_chosen():
    val = {**VAL, ("triplet_hardest", 0.4): 5.0}  # 5 + seed <= chance: did not learn, whatever its mean
    chosen = T.selection(runs_table(val, TEST), chance_val=16.0, grid=GRID)
    row = chosen[(chosen["loss"] == "triplet_hardest") & (chosen["value"] == 0.4)].iloc[0]
    assert not row["learned"] and not row["chosen"]
    assert chosen[(chosen["loss"] == "triplet_hardest") & chosen["chosen"]]["value"].item() == 0.2


def test_no_configuration_left_is_an_error_naming_the_loss():
    val = {k: (10.0 if k[0] == "info_nce" else v) for k, v in VAL.items()}
    with pytest.raises(T.NoConfigurationLeft, match="info_nce's temperature"):
        T.selection(runs_table(val, TEST), chance_val=16.0, grid=GRID)


def test_comparison_and_orderings_are_paired_by_seed():
    runs = runs_table(VAL, TEST)
    chosen = T.selection(runs, 16.0, GRID)
    table = T.comparison(runs, chosen).set_index("loss")
    # tuned - untuned per seed is a constant (the seed offsets cancel): the interval collapses onto it
    assert table.loc["triplet_hardest", "delta"] == pytest.approx(5.0)
    assert table.loc["triplet_hardest", "ci_low"] == pytest.approx(5.0)
    assert table.loc["info_nce", "delta"] == pytest.approx(-40.0)
    order = T.orderings(runs, chosen)
    assert len(order) == 2  # one pair, untuned and tuned
    tuned_row = order[order["kind"] == "tuned"].iloc[0]
    assert tuned_row["delta"] == pytest.approx(405.0 - 380.0) and tuned_row["separated"]


def test_orderings_match_a_slow_paired_t_interval():
    rng = np.random.default_rng(0)
    rows = []
    for s in range(5):
        for (loss, v), base in VAL.items():
            param = dict(GRID)[loss][0]
            rows.append({"loss": loss, param: v, "seed": s, "best_rsum": base, "sel_rsum": base + rng.normal(0, 3)})
    runs = pd.DataFrame(rows)
    chosen = T.selection(runs, 16.0, GRID)
    row = T.orderings(runs, chosen).query("kind == 'untuned'").iloc[0]
    a = runs[(runs["loss"] == "triplet_hardest") & (runs["margin"] == 0.2)].sort_values("seed")["sel_rsum"].to_numpy()
    b = runs[(runs["loss"] == "info_nce") & (runs["temperature"] == 0.1)].sort_values("seed")["sel_rsum"].to_numpy()
    d = a - b
    half = 2.776 * d.std(ddof=1) / math.sqrt(5)  # t_{0.975, 4}
    assert row["delta"] == pytest.approx(d.mean()) and row["ci_high"] - row["ci_low"] == pytest.approx(2 * half)
    # untuned and tuned rows are one family: told apart = the paired t test survives Holm's correction over both
    order = T.orderings(runs, chosen)
    assert list(order["p_holm"]) == pytest.approx(list(stats.holm(order["p"])))
    assert list(order["separated"]) == list(order["p_holm"] < 0.05)
    assert list(order["uncorrected"]) == list((order["ci_low"] > 0) | (order["ci_high"] < 0))


@pytest.mark.parametrize("grid, match", [
    ({"triplet_hardest": ("margin", (0.1, 0.3))}, "include its default"),
    ({"triplet_hardest": ("gamma", (0.2,))}, "no hyperparameter"),
    ({"triplet_hardest": ("margin", (0.2, 0.2))}, "distinct"),
    ({"triplet_hardest": ("margin", (0.2, float("nan")))}, "finite"),
    ({"triplet_hardest": ("margin", (0.2, -1.0))}, "margin"),
    ({"info_nce": ("temperature", (0.1, 0.0))}, "temperature"),
    ({"hinge": ("margin", (0.2,))}, "not a registered loss"),
    ({"unified": ("gamma", (60.0, 1e30))}, r"range \[1, 1000\]"),  # issue 35: the registry's range of a sweep
    ({}, "grid must map"),
])
def test_bad_grids_are_refused(grid, match):
    with pytest.raises(ValueError, match=match):
        T.check_grid(grid)


def test_one_seed_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match="at least 2 seeds"):
        T.run(T.spec_for(fast=True, seeds=(0,)), out=tmp_path / "t")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("argv, flag", [
    (["--values", "triplet_all=0.1"], "--values"),
    (["--values", "triplet_all:margin=a,b"], "--values"),
    (["--values", "triplet_all:margin=0.1,0.3"], "--values"),  # without the default 0.2
    (["--values", "triplet_all:scale=1,2"], "--values"),
    (["--values", "softmax:margin=0.2"], "--values"),
    (["--values", "info_nce:temperature=0,0.1"], "--values"),
    (["--values", "triplet_hardest:margin=-0.1,0.2"], "--values"),
    (["--seeds", "0"], "--seeds"),
    (["--seeds", "-1,2"], "--seeds"),
    (["--dist-timeout", "1e308"], "--dist-timeout"),  # issue 35: tuned runs under torchrun as showdown does
    (["--markdown", "n" * 256 + ".md"], "--markdown"),  # issue 35: a name over 255 bytes
])
def test_cli_rejects(argv, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = call(cli.main, [*argv, "--fast", "--out", "t"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and flag in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("argv, words", [  # issue 35: each was accepted, or failed late, or with a traceback
    (["--values", "info_nce:reduction=1"], ["no hyperparameter 'reduction'", "('temperature',)"]),
    (["--values", "unified:weights=1"], ["no hyperparameter 'weights'", "('margin', 'gamma')"]),
    (["--values", "unified:gamma=1e39,40"], ["float32 overflows"]),  # was FloatingPointError, exit 1
    (["--values", "triplet_all:margin=0,1e-46,0.2"], ["float32 rounds it to 0"]),  # was one run reported twice
    (["--values", "triplet_all:margin=0.2,0.2000000001"], ["distinct, also in float32"]),
    (["--values", "triplet_all:margin=0.1,0.2", "--values", "triplet_all:margin=0.2,0.3"], ["triplet_all is given twice"]),
])
def test_cli_values_are_checked_as_grid_param_checks_them(argv, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(T, "run", lambda *a, **k: pytest.fail("a bad --values must not train"))
    code, out, err = call(cli.main, [*argv, "--fast", "--out", "t"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--values" in lines[0] and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), lines[0]


def test_tunable_parameters_are_the_numeric_ones():
    assert T.tunable("info_nce") == ("temperature",) and T.tunable("unified") == ("margin", "gamma")
    assert T.tunable("sampled_softmax") == ("scale",)  # topk has no numeric default: no untuned row to compare
    for loss, (param, _) in T.GRID.items():
        assert param in T.tunable(loss)


def test_a_learned_parameter_is_tuned_by_its_initial_value():
    assert T.tunable("clip_learned") == ("logit_scale",) and T.tunable("siglip") == ("logit_scale", "logit_bias")
    taus = sorted(math.exp(-v) for v in T.GRID["clip_learned"][1])
    assert taus == pytest.approx([0.02, 0.05, 0.07, 0.1, 0.2]) and T.default_of("siglip", "logit_bias") == -10.0
    assert all(len(values) == 5 for _, values in T.GRID.values())  # the same validation budget for every loss


def test_learned_vs_tuned_is_holm_over_its_declared_family():
    grid = {"info_nce": ("temperature", (0.05, 0.1)), "clip_learned": ("logit_scale", (2.0, T.default_of(
        "clip_learned", "logit_scale"))), "siglip": ("logit_bias", (-10.0, 0.0))}
    test = {("info_nce", 0.05): [400.0, 410.0, 405.0], ("info_nce", 0.1): [390.0, 380.0, 385.0],
            ("clip_learned", 2.0): [0.0, 0.0, 0.0], ("clip_learned", grid["clip_learned"][1][1]): [410.0, 421.0, 414.0],
            ("siglip", -10.0): [395.0, 420.0, 400.0], ("siglip", 0.0): [500.0, 500.0, 500.0]}
    val = {("info_nce", 0.05): 500.0, ("info_nce", 0.1): 400.0, ("clip_learned", 2.0): 500.0,
           ("clip_learned", grid["clip_learned"][1][1]): 400.0, ("siglip", -10.0): 400.0, ("siglip", 0.0): 500.0}
    runs = pd.DataFrame([{"loss": loss, grid[loss][0]: v, "seed": s, "best_rsum": val[(loss, v)],
                          "sel_rsum": test[(loss, v)][s]} for (loss, v) in test for s in range(3)])
    chosen = T.selection(runs, 16.0, grid)
    out = T.learned_vs_tuned(runs, chosen).set_index("a")
    assert list(out.index) == [a for a, *_ in T.LEARNED_VS_TUNED]
    # untuned CLIP (its default) against NT-Xent at its chosen 0.05, seed by seed: +10, +11, +9
    d = np.array([10.0, 11.0, 9.0])
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    assert out.loc["clip_learned", "delta"] == pytest.approx(10.0)
    assert out.loc["clip_learned", "p"] == pytest.approx(1 - abs(t) / math.sqrt(2 + t * t))  # Student t, 2 df
    assert list(out["p_holm"]) == pytest.approx(list(stats.holm(out["p"])))
    assert out.loc["clip_learned", "verdict"] == "holds" and out.loc["siglip", "verdict"] == "cannot tell"
    assert out.loc["siglip", "mean_a"] == pytest.approx(405.0)  # its default b = -10, never its chosen 0
    assert T.learned_vs_tuned(runs[runs["loss"] != "info_nce"], chosen[chosen["loss"] != "info_nce"]).empty


def test_the_text_says_which_losses_were_given_and_whether_the_budget_is_equal():
    """Issue 35: a fifth loss with 2 values was reported as "each loss took 3 values ... the budget is equal"."""
    own = T.grid_for(True)
    assert T.budget_line(own, True) == "Each loss's main hyperparameter took 3 values."
    added = {**own, "sampled_softmax": ("scale", (10.0, 20.0))}
    line = T.budget_line(added, True)
    assert "different numbers of values" in line and "Sampled softmax 2" in line and "Triplet 3" in line
    assert line.endswith("The values of Sampled softmax were given by hand, not the comparison's own.")
    assert T.equal_budget(own) and not T.equal_budget(added)


def test_cli_no_configuration_left_is_one_line_naming_values(tmp_path, capsys, monkeypatch):
    runs = runs_table({k: (1.0 if k[0] == "info_nce" else v) for k, v in VAL.items()}, TEST)
    race = cells.Showdown(runs, {"chance_rsum_val": 16.0, "spec": {"fast": True}}, tmp_path, reused=False)
    monkeypatch.setattr(T, "run", lambda *a, **k: race)
    monkeypatch.setattr(T, "grid_for", lambda fast: dict(GRID))
    code, out, err = call(cli.main, ["--fast", "--out", str(tmp_path / "t")], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--values" in lines[0] and "info_nce" in lines[0], err


def test_the_fast_grid_keeps_each_default_and_the_ends():
    fast = T.grid_for(True)
    for loss, (param, values) in T.GRID.items():
        assert fast[loss][0] == param and fast[loss][1] == tuple(sorted({min(values), T.default_of(loss, param),
                                                                         max(values)}))
    assert T.grid_for(False) == T.GRID


def test_fast_run_trains_every_cell_and_reads_back(tmp_path):
    spec = T.spec_for(fast=True)
    grid = {"triplet_hardest": ("margin", (0.1, 0.2)), "info_nce": ("temperature", (0.1, 0.2))}
    race = T.run(spec, grid, out=tmp_path / "t")
    assert len(race.runs) == 4 * len(spec.seeds) and race.runs["sel_rsum"].notna().all()
    text = T.markdown(race, grid)
    assert T.budget_line(grid, True) in text and "the budget is equal" in text
    assert "Triplet-SH − NT-Xent" in text and "chance" in text and "select their last epoch" in text
    again = T.run(spec, grid, out=tmp_path / "t")  # every cell from the cache
    pd.testing.assert_frame_equal(again.runs, race.runs)
