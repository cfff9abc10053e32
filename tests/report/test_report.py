"""vlr_lib.report: summaries, the papers' layouts, the noise rule, the reading, histories and sweeps.

Checked on synthetic tables whose numbers are known by construction (tests/report/tables.py):
means, stds, best cells and separations are recomputed here with plain loops.
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pandas as pd
import pytest

from tests.report.tables import (EPOCHS, GAMMAS, GOAL, LOSS_NAMES, MARGINS, SEEDS, TEMPS, hand_summary, make_history,
                                 rsum_of, synthetic_runs, sweep_table)
from vlr_lib import losses, registry, report
from vlr_lib.goal import GOAL_PAIRS, GOAL_TRIPLETS, TABLE1


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return synthetic_runs()


@pytest.fixture(scope="module")
def summary(runs) -> pd.DataFrame:
    return report.summarize(runs, prefix="sel_")


@pytest.fixture(scope="module")
def histories() -> dict[str, list[dict]]:
    return {"A": make_history(100.0, 0.3), "B": make_history(5.0, 0.8, start_epoch=0), "C": make_history(60.0, 0.1)}


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    return sweep_table()


# --------------------------------------------------------------------------- names


def test_names_are_the_library_labels_and_table1_names_its_goal_cells():
    s = report.summarize(synthetic_runs(), prefix="sel_")
    assert list(s["name"]) == [registry.label(x) for x in LOSS_NAMES]
    assert report.table1_name("cir", "lin") == "Circle"
    assert report.table1_name("con", "con") == "Triplet-SH"  # Xuan & Chen's "Triplet" is the hardest-negative one
    assert report.table1_name("cir", "sig-ms") == "New"
    named = [g for g in GOAL if report.table1_name(*g[5:].split(",")) != "New"]
    assert len(named) == sum(v != "New" for v in TABLE1.values()) == 5


def test_hyperparameters_are_the_library_defaults():
    sig = inspect.signature(losses.unified).parameters
    assert report.hyperparameters("unified") == f"margin={sig['margin'].default}, gamma={sig['gamma'].default}"
    assert report.hyperparameters("info_nce") == "temperature=0.1"
    assert report.hyperparameters("cross_example_softmax") == "scale=20.0"  # topk=None is not a setting
    assert report.hyperparameters("goal:nca,con") == "tau=10.0"  # T^nca has no margin; P^con no parameter
    assert report.hyperparameters("goal:con,lin") == "margin=0.2"
    assert report.hyperparameters("goal:cir,sig-ms") == "tau=10.0, alpha=2.0, beta=10.0, lam=0.5, eps=0.1"
    assert report.hyperparameters("unified", {"gamma": 30.0, "temperature": 9.0}) == "margin=0.2, gamma=30.0"


# --------------------------------------------------------------------------- tables


@pytest.mark.parametrize("prefix", ["sel_", "test_"])
def test_summarize_matches_a_plain_loop(runs, prefix):
    s = report.summarize(runs, prefix=prefix)
    assert list(s["config"]) == LOSS_NAMES  # input order kept
    assert (s["n_seeds"] == 3).all()
    for loss in ("info_nce", "goal:nca,sig"):
        for m in report.TABLE1_COLUMNS:
            values = [r[f"{prefix}{m}"] for _, r in runs.iterrows() if r["loss"] == loss]
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            got = s.set_index("loss").loc[loss]
            assert got[f"{m}_mean"] == pytest.approx(mean, rel=1e-12)
            assert got[f"{m}_std"] == pytest.approx(std, rel=1e-12)
    assert ("epoch_mean" in s) == (prefix == "sel_")


def test_summarize_one_seed_has_zero_std_and_bad_inputs_fail():
    s = report.summarize(synthetic_runs(seeds=(0,)), prefix="sel_")
    assert (s["rsum_std"] == 0).all()
    with pytest.raises(ValueError, match="^runs"):
        report.summarize(synthetic_runs().drop(columns=["sel_map5"]), prefix="sel_", metrics=report.TABLE1_COLUMNS)
    with pytest.raises(ValueError, match="^runs"):
        report.summarize(synthetic_runs().iloc[:0], prefix="sel_")


def test_table1_layout_and_formatting(summary):
    t = report.table1(summary)
    assert list(t.columns) == ["loss", "hyper-param", "i2t R@1", "i2t R@5", "i2t R@10", "i2t mAP@5",
                               "t2i R@1", "t2i R@5", "t2i R@10", "rsum", "PR-AUC"]
    assert len(t) == 22
    r = summary.iloc[3]
    assert t.loc[3, "rsum"] == f"{r['rsum_mean']:.1f} ± {r['rsum_std']:.1f}"
    assert t.loc[3, "PR-AUC"] == f"{r['pr_auc_mean']:.3f} ± {r['pr_auc_std']:.3f}"  # fractions: 3 decimals


def test_goal_matrix_puts_each_cell_at_its_pair_and_triplet():
    means = {g: 10 * GOAL_PAIRS.index(g.split(",")[1]) + GOAL_TRIPLETS.index(g[5:].split(",")[0]) for g in GOAL}
    s = hand_summary({"info_nce": -1.0, **means}, {k: 0.5 for k in ["info_nce", *GOAL]})
    mean, std = report.goal_matrix(s, "rsum")
    assert mean.shape == (5, 3)
    np.testing.assert_array_equal(mean, 10 * np.arange(5)[:, None] + np.arange(3)[None, :])
    assert (std == 0.5).all()
    table = report.goal_table(s, "rsum")
    assert list(table.index) == [f"P^{p}" for p in GOAL_PAIRS] and list(table.columns) == ["T^con", "T^nca", "T^cir"]
    assert table.loc["P^sig", "T^cir"] == "22.0 ± 0.5"
    partial = report.goal_matrix(s[s["loss"] != "goal:cir,sig"], "rsum")[0]
    assert np.isnan(partial[2, 2]) and np.isfinite(partial).sum() == 14
    with pytest.raises(ValueError, match="^metric"):
        report.goal_matrix(s, "r1")


# --------------------------------------------------------------------------- uncertainty


def test_separations_and_ranking_by_hand():
    s = hand_summary({"a_loss": 10.0, "b_loss": 8.0, "c_loss": 2.0}, {"a_loss": 1.0, "b_loss": 1.0, "c_loss": 1.0})
    seps = report.separations(s).set_index(["a", "b"])
    assert not seps.loc[("a_loss", "b_loss"), "separated"]  # |2| > 1 + 1 is false: touching bands are a tie
    assert seps.loc[("a_loss", "c_loss"), "separated"] and seps.loc[("b_loss", "c_loss"), "separated"]
    assert seps.loc[("a_loss", "c_loss"), "delta"] == 8.0 and seps.loc[("a_loss", "c_loss"), "noise"] == 2.0
    rank = report.ranking(s)
    assert list(rank["loss"]) == ["a_loss", "b_loss", "c_loss"]
    assert list(rank["tied_with_best"]) == [True, True, False]


def test_separations_count_matches_brute_force(summary):
    for metric in ("rsum", "pr_auc", "t2i_r1"):
        seps = report.separations(summary, metric)
        m, s = summary[f"{metric}_mean"].to_numpy(), summary[f"{metric}_std"].to_numpy()
        brute = sum(abs(m[i] - m[j]) > s[i] + s[j] for i in range(len(m)) for j in range(i + 1, len(m)))
        assert len(seps) == 22 * 21 // 2 and int(seps["separated"].sum()) == brute


def test_compare_sentences_and_errors():
    s = hand_summary({"triplet_hardest": 10.0, "triplet_all": 5.0, "info_nce": 9.5},
                     {"triplet_hardest": 1.0, "triplet_all": 1.0, "info_nce": 1.0})
    c = report.compare(s, "triplet_hardest", "triplet_all")
    assert c["separated"] and c["delta"] == 5.0 and "is ahead by 5.0" in c["text"]
    assert c["text"].startswith("Triplet-SH 10.0 ± 1.0 vs Triplet 5.0 ± 1.0")
    tie = report.compare(s, "triplet_hardest", "info_nce")
    assert not tie["separated"] and "within the seed noise" in tie["text"]
    with pytest.raises(ValueError, match="^b"):
        report.compare(s, "triplet_hardest", "smooth_ap")


def test_reading_claims_hold_reverse_or_stay_open():
    means = {"triplet_hardest": 10.0, "triplet_all": 5.0, "info_nce": 14.0, "smooth_ap": 9.0, "unified": 10.5,
             "sampled_softmax": 3.0, "cross_example_softmax": 8.0}
    s = hand_summary(means, {k: 1.0 for k in means})
    facts = report.reading(s)
    claims = {(c["a"], c["b"]): c for c in facts["claims"]}
    assert claims[("triplet_hardest", "triplet_all")]["agrees"]  # 5 > 2: holds
    assert not claims[("triplet_hardest", "info_nce")]["agrees"] and claims[("triplet_hardest", "info_nce")]["separated"]
    assert not claims[("triplet_hardest", "smooth_ap")]["separated"]  # 1 < 2: open
    assert ("goal:cir,sig-ms", "goal:con,con") not in claims  # GOAL not trained: no claim
    assert facts["best"] == "info_nce" and facts["tied"] == ["info_nce"]
    assert "holds here" in facts["text"] and "is reversed here" in facts["text"] and "not resolved" in facts["text"]
    assert facts["goal_best"] is None and facts["n_pairs"] == 21


def test_reading_on_the_full_grid(summary):
    facts = report.reading(summary)
    assert len(facts["claims"]) == len(report.PAPER_CLAIMS)
    best = summary.loc[summary["rsum_mean"].idxmax(), "loss"]
    assert facts["best"] == best and registry.label(best) in facts["text"]
    goal = summary[summary["loss"].str.startswith("goal:")]
    assert facts["goal_best"] == goal.loc[goal["rsum_mean"].idxmax(), "loss"]
    for c in facts["claims"]:
        assert c["text"] in facts["text"]




# --------------------------------------------------------------------------- COCOS and Markdown


def test_cocos_own_rule_rows(runs):
    own = report.cocos_own_rule(runs)
    assert list(own["rule"]) == ["Triplet", "Triplet-SH", "NT-Xent", "SmoothAP"]
    assert list(own["loss"]) == ["Triplet", "Triplet-SH", "NT-Xent", "SmoothAP"]
    nt = own.set_index("rule").loc["NT-Xent"]
    assert nt["W_pos i2t"] == pytest.approx(runs[runs["loss"] == "info_nce"]["sel_cocos_nt_xent_i2t_W_pos"].mean())
    assert np.isnan(own.set_index("rule").loc["Triplet", "W_neg i2t"])


def test_to_markdown_by_hand():
    df = pd.DataFrame({"a": ["1 ± 0", "x|y"], "b": [2, 3]}, index=["P^con", "P^lin"])
    assert report.to_markdown(df) == "|  | a | b |\n|---|---|---|\n| P^con | 1 ± 0 | 2 |\n| P^lin | x\\|y | 3 |"
    assert report.to_markdown(df.reset_index(drop=True)).splitlines()[0] == "| a | b |"



# --------------------------------------------------------------------------- history_frame


def test_history_frame_flattens_and_derives_the_gap(histories):
    f = report.history_frame(histories)
    assert list(dict.fromkeys(f["run"])) == ["A", "B", "C"]
    assert len(f) == EPOCHS + (EPOCHS + 1) + EPOCHS
    b = f[f["run"] == "B"]
    assert b["epoch"].tolist() == list(range(EPOCHS + 1))
    for rec, (_, row) in zip(histories["B"], b.iterrows()):
        assert row["sim_gap"] == pytest.approx(rec["pos_sim"] - rec["hardneg_sim"])
        if "cocos" in rec:
            assert row["cocos_i2t_C_0"] == rec["cocos"]["i2t"]["C_0"]
    assert math.isnan(b["cocos_i2t_C_0"].iloc[0])  # epoch 0 has no COCOS


def test_history_frame_accepts_frames_and_sorts_epochs(histories):
    shuffled = pd.DataFrame(histories["A"][::-1]).drop(columns="cocos")
    f = report.history_frame({"A": shuffled})
    assert f["epoch"].tolist() == list(range(1, EPOCHS + 1))


@pytest.mark.parametrize("bad", [{}, {"A": []}, {"A": [{"loss": 1.0}]}, []])
def test_history_frame_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="histories"):
        report.history_frame(bad)


def test_history_values_relative_loss_and_missing_metrics(histories):
    f = report.history_frame(histories)
    b = f[f["run"] == "B"]  # epoch 0 has no loss: relative to the first recorded one, epoch 1
    np.testing.assert_allclose(report.history_values(b, "rsum"), [r["rsum"] for r in histories["B"]])
    rel = report.history_values(b, "loss", relative=True)
    assert math.isnan(rel[0]) and rel[1] == 1.0
    np.testing.assert_allclose(rel[2:], [r["loss"] / histories["B"][1]["loss"] for r in histories["B"][2:]])
    assert np.isnan(report.history_values(b, "not recorded")).all() and len(b) == EPOCHS + 1




# --------------------------------------------------------------------------- sweeps


def test_sweep_values_and_losses(sweep):
    assert report.sweep_values(sweep, "unified") == {"margin": MARGINS, "gamma": GAMMAS}  # epochs does not vary
    assert report.sweep_values(sweep, "info_nce") == {"temperature": TEMPS}
    assert report.sweep_values(sweep, "triplet_hardest") == {}
    assert report.sweep_losses(sweep) == ["unified", "info_nce"]
    with pytest.raises(ValueError, match="loss"):
        report.sweep_values(sweep, "smooth_ap")
    with pytest.raises(TypeError, match="runs"):
        report.sweep_values(sweep.to_dict(), "unified")


def slow_slice(sweep: pd.DataFrame, x: str, other: str, at: float, metric: str) -> dict[float, tuple[float, float]]:
    """Mean and sample std over seeds of each x value, by loops over the rows."""
    groups: dict[float, list[float]] = {}
    for _, row in sweep.iterrows():
        if row["loss"] == "unified" and abs(row[other] - at) < 1e-12:
            groups.setdefault(row[x], []).append(row[metric])
    out = {}
    for v, ys in groups.items():
        mean = sum(ys) / len(ys)
        std = math.sqrt(sum((y - mean) ** 2 for y in ys) / (len(ys) - 1))
        out[v] = (mean, std)
    return out


@pytest.mark.parametrize("x,other,values", [("gamma", "margin", MARGINS), ("margin", "gamma", GAMMAS)])
@pytest.mark.parametrize("metric", ["rsum", "i2t_r1"])
def test_sweep_slice_matches_loops(sweep, x, other, values, metric):
    for at in values:
        s = report.sweep_slice(sweep, "unified", x, {other: at}, metric)
        ref = slow_slice(sweep, x, other, at, metric)
        assert s[x].tolist() == sorted(ref)
        np.testing.assert_allclose(s["mean"], [ref[v][0] for v in s[x]])
        np.testing.assert_allclose(s["std"], [ref[v][1] for v in s[x]], atol=1e-12)
        assert (s["n"] == len(SEEDS)).all()


def test_sweep_slice_defaults_and_errors(sweep):
    s = report.sweep_slice(sweep, "unified", "gamma")  # margin held at its first value
    np.testing.assert_allclose(s["mean"], [np.mean([rsum_of(0.0, g, k) for k in SEEDS]) for g in GAMMAS])
    with pytest.raises(ValueError, match="x"):
        report.sweep_slice(sweep, "unified", "temperature")
    with pytest.raises(ValueError, match="fixed"):
        report.sweep_slice(sweep, "unified", "gamma", {"tau": 0.1})
    with pytest.raises(ValueError, match="metric"):
        report.sweep_slice(sweep, "unified", "gamma", metric="nope")


@pytest.mark.parametrize("x,y", [("gamma", "margin"), ("margin", "gamma")])
def test_sweep_grid_is_the_slices_side_by_side(sweep, x, y):
    g = report.sweep_grid(sweep, "unified", x, y)
    assert (g.index.name, g.columns.name) == (y, x)
    assert list(g.index) == report.sweep_values(sweep, "unified")[y]
    for at in g.index:  # each row is a slice, means over seeds from loops
        ref = slow_slice(sweep, x, y, at, "rsum")
        np.testing.assert_allclose(g.loc[at].to_numpy(), [ref[v][0] for v in g.columns])
    holes = sweep[~((sweep["loss"] == "unified") & (sweep["margin"] == MARGINS[0]) & (sweep["gamma"] == GAMMAS[0]))]
    assert math.isnan(report.sweep_grid(holes, "unified", "gamma", "margin").iloc[0, 0])
    for args, match in [(("temperature", "margin"), "^x"), (("gamma", "tau"), "^y"), (("gamma", "gamma"), "different"),
                        (("gamma", "margin", "nope"), "metric")]:
        with pytest.raises(ValueError, match=match):
            report.sweep_grid(sweep, "unified", *args)


def test_sweep_slice_tolerates_values_read_back_from_csv(sweep):
    noisy = sweep.copy()
    noisy["margin"] = noisy["margin"] * 3 / 3 + 1e-16  # what a round trip through text can do to 0.1
    s = report.sweep_slice(noisy, "unified", "gamma", {"margin": 0.1})
    assert len(s) == len(GAMMAS)


EMPTY = pd.DataFrame()


def _bad_library_calls():
    """Issue 23: each was a KeyError, an unpacking error, a silent 'inf ± nan' or a NaN drawn as a blank."""
    import torch

    from vlr_lib import viz

    nan_s = torch.tensor([[1.0, float("nan")], [0.0, 1.0]])
    return [
        ("markdown_block(empty, {})", lambda: report.markdown_block(EMPTY, {}), ValueError, "^runs is empty"),
        ("summary_table(empty)", lambda: report.summary_table(EMPTY), ValueError, "^summary is empty"),
        ("summary_table(list)", lambda: report.summary_table([]), TypeError, "^summary must be a pandas DataFrame"),
        ("summary_table(no n_seeds)", lambda: report.summary_table(pd.DataFrame({"config": ["a"]})), ValueError,
         r"^summary lacks the columns \['loss', 'name', 'n_seeds'\]"),
        ("metric_errorbars(empty)", lambda: viz.showdown.metric_errorbars(EMPTY), ValueError, "^summary is empty"),
        ("mean_std(inf, nan)", lambda: report.mean_std(math.inf, math.nan, "rsum"), ValueError, "^mean must be"),
        ("mean_std(1, nan)", lambda: report.mean_std(1.0, math.nan, "rsum"), ValueError, "^std must be"),
        ("mean_std(1, -1)", lambda: report.mean_std(1.0, -1.0, "rsum"), ValueError, "^std must be"),
        ("similarity_heatmap(nan)", lambda: viz.matrix.similarity_heatmap(nan_s), ValueError, "^S contains NaN or inf"),
        ("gradient_heatmap(inf)", lambda: viz.matrix.gradient_heatmap(nan_s.nan_to_num(nan=math.inf)), ValueError,
         "^S contains NaN or inf"),
        ("info_nce(meta)", lambda: losses.info_nce(torch.empty(4, 4, device="meta")), ValueError,
         "^S is a meta tensor"),
    ]


@pytest.mark.parametrize("call, error, match", [c[1:] for c in _bad_library_calls()],
                         ids=[c[0] for c in _bad_library_calls()])
def test_bad_library_calls_raise_a_named_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_markdown_block_names_what_meta_lacks(runs):
    with pytest.raises(ValueError, match="^meta lacks spec, date, command"):
        report.markdown_block(runs, {})
    with pytest.raises(TypeError, match="^meta must be"):
        report.markdown_block(runs, None)
