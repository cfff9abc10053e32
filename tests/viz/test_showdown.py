"""vlr_lib.viz.showdown over grids of control values.

The figures and tables are checked on synthetic showdown tables whose numbers
are known by construction (means, stds, best cells and separations are
recomputed here with plain loops). The runner that makes the real tables
(vlr_lib.train.showdown) is tested in tests/train/test_showdown.py.
"""
from __future__ import annotations

import inspect
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from vlr_lib import losses
from vlr_lib.goal import GOAL_PAIRS, GOAL_TRIPLETS, TABLE1
from vlr_lib.viz import showdown as V

GOAL = [f"goal:{t},{p}" for t in GOAL_TRIPLETS for p in GOAL_PAIRS]
LOSS_NAMES = list(losses.LOSSES) + GOAL
RULES = ("triplet", "triplet_sh", "nt_xent", "smooth_ap")


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def synthetic_runs(seeds=(0, 1, 2), losses_=None, seed: int = 0) -> pd.DataFrame:
    """A showdown table: per config a base level, per seed noise; every column the figures read."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, loss in enumerate(losses_ or LOSS_NAMES):
        level = 100 + 7 * ((k * 5) % 11)  # distinct, shuffled levels
        for s in seeds:
            row = {"config": loss, "loss": loss, "seed": s, "sel_epoch": 1 + (k + s) % 3, "epoch": 3}
            for prefix, shift in (("sel_", 0.0), ("test_", -5.0)):
                rec = {f"{d}_r{r}": (level + shift) / 6 + rng.normal(0, 1.5) for d in ("i2t", "t2i") for r in (1, 5, 10)}
                rec["rsum"] = sum(rec.values())
                rec["map5"] = min(1.0, level / 400 + rng.normal(0, 0.01))
                rec["pr_auc"] = min(1.0, level / 500 + rng.normal(0, 0.01))
                row.update({prefix + key: v for key, v in rec.items()})
            for rule, d in itertools.product(RULES, ("i2t", "t2i")):
                row[f"sel_cocos_{rule}_{d}_C_q"] = 1.0 if rule == "triplet_sh" else 1 + k + s + rng.random()
                row[f"sel_cocos_{rule}_{d}_C_0"] = float((k + s) % 5)
                row[f"sel_cocos_{rule}_{d}_W_neg"] = 0.3 if rule == "nt_xent" else math.nan
                row[f"sel_cocos_{rule}_{d}_W_pos"] = 0.4 + 0.01 * k if rule == "nt_xent" else math.nan
            rows.append(row)
    return pd.DataFrame(rows)


def hand_summary(means: dict[str, float], stds: dict[str, float], metric: str = "rsum") -> pd.DataFrame:
    """A summary with chosen mean/std of one metric (others copied) for the reading tests."""
    rows = []
    for loss in means:
        row = {"config": loss, "loss": loss, "name": V.display_name(loss), "hyper": "", "n_seeds": 3}
        for m in V.METRICS:
            row[f"{m}_mean"], row[f"{m}_std"] = means[loss], stds[loss]
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return synthetic_runs()


@pytest.fixture(scope="module")
def summary(runs) -> pd.DataFrame:
    return V.summarize(runs)


# --------------------------------------------------------------------------- names


def test_display_names_follow_table1():
    assert V.display_name("triplet_hardest") == "Triplet-SH (hardest negative)"
    assert V.display_name("goal:cir,lin") == "GOAL (cir, lin) = Circle"
    assert V.display_name("goal:con,con") == "GOAL (con, con) = Triplet-SH (VSE++)"
    assert V.display_name("goal:cir,sig-ms") == "GOAL (cir, sig-ms)"  # "New" in Table 1
    named = [g for g in GOAL if "=" in V.display_name(g)]
    assert len(named) == sum(v != "New" for v in TABLE1.values()) == 5


def test_hyperparameters_are_the_library_defaults():
    sig = inspect.signature(losses.unified).parameters
    assert V.hyperparameters("unified") == f"margin={sig['margin'].default}, gamma={sig['gamma'].default}"
    assert V.hyperparameters("info_nce") == "temperature=0.1"
    assert V.hyperparameters("cross_example_softmax") == "scale=20.0"  # topk=None is not a setting
    assert V.hyperparameters("goal:nca,con") == "tau=10.0"  # T^nca has no margin; P^con no parameter
    assert V.hyperparameters("goal:con,lin") == "margin=0.2"
    assert V.hyperparameters("goal:cir,sig-ms") == "tau=10.0, alpha=2.0, beta=10.0, lam=0.5, eps=0.1"


# --------------------------------------------------------------------------- tables


@pytest.mark.parametrize("prefix", ["sel_", "test_"])
def test_summarize_matches_a_plain_loop(runs, prefix):
    s = V.summarize(runs, prefix=prefix)
    assert list(s["config"]) == LOSS_NAMES  # input order kept
    assert (s["n_seeds"] == 3).all()
    for loss in ("info_nce", "goal:nca,sig"):
        for m in V.METRICS:
            values = [r[f"{prefix}{m}"] for _, r in runs.iterrows() if r["loss"] == loss]
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            got = s.set_index("loss").loc[loss]
            assert got[f"{m}_mean"] == pytest.approx(mean, rel=1e-12)
            assert got[f"{m}_std"] == pytest.approx(std, rel=1e-12)
    assert ("epoch_mean" in s) == (prefix == "sel_")


def test_summarize_one_seed_has_zero_std_and_bad_inputs_fail():
    s = V.summarize(synthetic_runs(seeds=(0,)))
    assert (s["rsum_std"] == 0).all()
    with pytest.raises(ValueError, match="^runs"):
        V.summarize(synthetic_runs().drop(columns=["sel_map5"]))
    with pytest.raises(ValueError, match="^runs"):
        V.summarize(synthetic_runs().iloc[:0])


def test_table1_layout_and_formatting(summary):
    t = V.table1(summary)
    assert list(t.columns) == ["loss", "hyper-param", "i2t R@1", "i2t R@5", "i2t R@10", "i2t mAP@5",
                               "t2i R@1", "t2i R@5", "t2i R@10", "rsum", "PR-AUC"]
    assert len(t) == 22
    r = summary.iloc[3]
    assert t.loc[3, "rsum"] == f"{r['rsum_mean']:.1f} ± {r['rsum_std']:.1f}"
    assert t.loc[3, "PR-AUC"] == f"{r['pr_auc_mean']:.3f} ± {r['pr_auc_std']:.3f}"  # fractions: 3 decimals


def test_goal_matrix_puts_each_cell_at_its_pair_and_triplet():
    means = {g: 10 * GOAL_PAIRS.index(g.split(",")[1]) + GOAL_TRIPLETS.index(g[5:].split(",")[0]) for g in GOAL}
    s = hand_summary({"info_nce": -1.0, **means}, {k: 0.5 for k in ["info_nce", *GOAL]})
    mean, std = V.goal_matrix(s, "rsum")
    assert mean.shape == (5, 3)
    np.testing.assert_array_equal(mean, 10 * np.arange(5)[:, None] + np.arange(3)[None, :])
    assert (std == 0.5).all()
    table = V.goal_table(s, "rsum")
    assert list(table.index) == [f"P^{p}" for p in GOAL_PAIRS] and list(table.columns) == ["T^con", "T^nca", "T^cir"]
    assert table.loc["P^sig", "T^cir"] == "22.0 ± 0.5"
    partial = V.goal_matrix(s[s["loss"] != "goal:cir,sig"], "rsum")[0]
    assert np.isnan(partial[2, 2]) and np.isfinite(partial).sum() == 14
    with pytest.raises(ValueError, match="^metric"):
        V.goal_matrix(s, "r1")


# --------------------------------------------------------------------------- uncertainty


def test_separations_and_ranking_by_hand():
    s = hand_summary({"a_loss": 10.0, "b_loss": 8.0, "c_loss": 2.0}, {"a_loss": 1.0, "b_loss": 1.0, "c_loss": 1.0})
    seps = V.separations(s).set_index(["a", "b"])
    assert not seps.loc[("a_loss", "b_loss"), "separated"]  # |2| > 1 + 1 is false: touching bands are a tie
    assert seps.loc[("a_loss", "c_loss"), "separated"] and seps.loc[("b_loss", "c_loss"), "separated"]
    assert seps.loc[("a_loss", "c_loss"), "delta"] == 8.0 and seps.loc[("a_loss", "c_loss"), "noise"] == 2.0
    rank = V.ranking(s)
    assert list(rank["loss"]) == ["a_loss", "b_loss", "c_loss"]
    assert list(rank["tied_with_best"]) == [True, True, False]


def test_separations_count_matches_brute_force(summary):
    for metric in ("rsum", "pr_auc", "t2i_r1"):
        seps = V.separations(summary, metric)
        m, s = summary[f"{metric}_mean"].to_numpy(), summary[f"{metric}_std"].to_numpy()
        brute = sum(abs(m[i] - m[j]) > s[i] + s[j] for i in range(len(m)) for j in range(i + 1, len(m)))
        assert len(seps) == 22 * 21 // 2 and int(seps["separated"].sum()) == brute


def test_compare_sentences_and_errors():
    s = hand_summary({"triplet_hardest": 10.0, "triplet_all": 5.0, "info_nce": 9.5},
                     {"triplet_hardest": 1.0, "triplet_all": 1.0, "info_nce": 1.0})
    c = V.compare(s, "triplet_hardest", "triplet_all")
    assert c["separated"] and c["delta"] == 5.0 and "is ahead by 5.0" in c["text"]
    assert c["text"].startswith("Triplet-SH (hardest negative) 10.0 ± 1.0 vs Triplet (all negatives) 5.0 ± 1.0")
    tie = V.compare(s, "triplet_hardest", "info_nce")
    assert not tie["separated"] and "within the seed noise" in tie["text"]
    with pytest.raises(ValueError, match="^b"):
        V.compare(s, "triplet_hardest", "smooth_ap")


def test_reading_claims_hold_reverse_or_stay_open():
    means = {"triplet_hardest": 10.0, "triplet_all": 5.0, "info_nce": 14.0, "smooth_ap": 9.0, "unified": 10.5,
             "sampled_softmax": 3.0, "cross_example_softmax": 8.0}
    s = hand_summary(means, {k: 1.0 for k in means})
    facts = V.reading(s)
    claims = {(c["a"], c["b"]): c for c in facts["claims"]}
    assert claims[("triplet_hardest", "triplet_all")]["agrees"]  # 5 > 2: holds
    assert not claims[("triplet_hardest", "info_nce")]["agrees"] and claims[("triplet_hardest", "info_nce")]["separated"]
    assert not claims[("triplet_hardest", "smooth_ap")]["separated"]  # 1 < 2: open
    assert ("goal:cir,sig-ms", "goal:con,con") not in claims  # GOAL not trained: no claim
    assert facts["best"] == "info_nce" and facts["tied"] == ["info_nce"]
    assert "holds here" in facts["text"] and "is reversed here" in facts["text"] and "not resolved" in facts["text"]
    assert facts["goal_best"] is None and facts["n_pairs"] == 21


def test_reading_on_the_full_grid(summary):
    facts = V.reading(summary)
    assert len(facts["claims"]) == len(V.PAPER_CLAIMS)
    best = summary.loc[summary["rsum_mean"].idxmax(), "loss"]
    assert facts["best"] == best and V.display_name(best) in facts["text"]
    goal = summary[summary["loss"].str.startswith("goal:")]
    assert facts["goal_best"] == goal.loc[goal["rsum_mean"].idxmax(), "loss"]
    for c in facts["claims"]:
        assert c["text"] in facts["text"]


# --------------------------------------------------------------------------- figures over control grids


def _points(fig) -> tuple[np.ndarray, np.ndarray, list]:
    xs = np.concatenate([arr(t.x) for t in fig.data if t.x is not None and len(t.x)])
    errs = np.concatenate([arr(t.error_x.array) for t in fig.data if t.x is not None and len(t.x)])
    ys = [y for t in fig.data if t.y is not None for y in t.y]
    return xs, errs, ys


@pytest.mark.parametrize("metric,group,chance", [
    (m, g, c) for m in ("rsum", "i2t_r1", "map5", "pr_auc") for g in V.GROUPS for c in (None, 20.0)])
def test_metric_errorbars_over_controls(summary, metric, group, chance):
    fig = V.metric_errorbars(summary, metric, group, chance)
    part = summary if group == "all" else summary[summary["loss"].str.startswith("goal:") == (group == "GOAL")]
    xs, errs, ys = _points(fig)
    assert len(xs) == len(part) and np.isfinite(xs).all() and np.isfinite(errs).all()
    assert sorted(xs) == pytest.approx(sorted(part[f"{metric}_mean"]))
    best = fig.data[0]
    assert len(best.x) == 1 and best.x[0] == pytest.approx(part[f"{metric}_mean"].max())
    lo, hi = fig.layout.xaxis.range
    assert lo <= (xs - errs).min() and hi >= (xs + errs).max()
    if chance is not None:
        assert lo <= chance <= hi and any(getattr(s, "x0", None) == chance for s in fig.layout.shapes)
    # the y order puts the best at the top (categoryarray is bottom-to-top)
    assert list(fig.layout.yaxis.categoryarray)[-1] == best.y[0]


def test_metric_errorbars_colours_follow_the_noise_rule():
    s = hand_summary({"a_loss": 10.0, "b_loss": 8.5, "c_loss": 2.0}, {"a_loss": 1.0, "b_loss": 1.0, "c_loss": 1.0})
    fig = V.metric_errorbars(s)
    assert [len(t.x) for t in fig.data] == [1, 1, 1]
    assert [t.name for t in fig.data] == ["best", "within the best's seed noise", "separated from the best"]
    assert fig.data[2].x[0] == 2.0


def test_metric_errorbars_changes_with_controls_and_rejects_bad_ones(summary):
    a, b = V.metric_errorbars(summary, "rsum"), V.metric_errorbars(summary, "t2i_r5")
    assert not np.allclose(np.sort(_points(a)[0]), np.sort(_points(b)[0]))
    assert len(_points(V.metric_errorbars(summary, "rsum", "GOAL"))[0]) == 15
    with pytest.raises(ValueError, match="^group"):
        V.metric_errorbars(summary, "rsum", "triplets")
    with pytest.raises(ValueError, match="^metric"):
        V.metric_errorbars(summary, "R@1")


@pytest.mark.parametrize("metric,color", [(m, c) for m in ("r1", "rsum", "map5", "pr_auc", "t2i_r10")
                                          for c in ("mean", "delta")])
def test_goal_heatmaps_over_controls(summary, metric, color):
    fig = V.goal_heatmaps(summary, metric, color)
    heat = [t for t in fig.data if t.type == "heatmap"]
    marks = [s for s in fig.layout.shapes if (s.name or "").startswith("best ")]
    panels = ["i2t_r1", "t2i_r1"] if metric == "r1" else [metric]
    assert len(heat) == len(marks) == len(fig.data) == len(panels)
    for h, mark, m in zip(heat, marks, panels):
        mean, std = V.goal_matrix(summary, m)
        z = arr(h.z)
        assert z.shape == (5, 3) and np.isfinite(z).all()
        np.testing.assert_allclose(z, mean - mean[0, 0] if color == "delta" else mean)
        if color == "delta":
            assert z[0, 0] == 0 and h.zmid == 0
        i, j = np.unravel_index(np.argmax(mean), mean.shape)
        assert mark.name == f"best {m}" and (mark.x0, mark.x1, mark.y0, mark.y1) == (j - 0.5, j + 0.5, i - 0.5, i + 0.5)
        assert (mark.xref, mark.yref) == (h.xaxis, h.yaxis)  # the frame sits on its own panel
        assert h.text[0][0].startswith(V._fmt(mean[0, 0], std[0, 0], m)) and "Triplet-SH (VSE++)" in h.text[0][0]
        assert "Circle" in h.text[GOAL_PAIRS.index("lin")][GOAL_TRIPLETS.index("cir")]
        assert list(h.y) == [f"P<sup>{p}</sup>" for p in GOAL_PAIRS]
        assert list(h.x) == [f"T<sup>{t}</sup>" for t in GOAL_TRIPLETS]


def test_goal_heatmaps_bad_controls(summary):
    with pytest.raises(ValueError, match="^color"):
        V.goal_heatmaps(summary, "r1", "std")
    with pytest.raises(ValueError, match="^metric"):
        V.goal_heatmaps(summary, "r5")


@pytest.mark.parametrize("stat", V.COCOS_STATS)
def test_cocos_summary_and_heatmap(runs, stat):
    table = V.cocos_summary(runs, stat)
    assert table.shape == (22, 8)
    assert list(table.columns) == [f"{V.COCOS_RULES[r]} {d}" for r in RULES for d in ("i2t", "t2i")]
    assert table.index[1] == V.display_name("triplet_hardest")
    expected = runs[runs["loss"] == "smooth_ap"][f"sel_cocos_triplet_t2i_{stat}"].mean()
    got = table.loc[V.display_name("smooth_ap"), "Triplet t2i"]
    assert (np.isnan(expected) and np.isnan(got)) or got == pytest.approx(expected)
    fig = V.cocos_heatmap(table, stat)
    z = arr(fig.data[0].z)
    finite = np.isfinite(z)
    assert z.shape == (22, 8) and (z[finite] >= 0).all() and (z[finite] <= 1 + 1e-12).all()
    assert finite.any(axis=0).sum() == (2 if stat.startswith("W") else 8)  # W only exists for NT-Xent
    assert fig.data[0].text[0][0] == ("" if np.isnan(table.iloc[0, 0]) else f"{table.iloc[0, 0]:.2f}")
    with pytest.raises(ValueError, match="^stat"):
        V.cocos_summary(runs, "C_B")


def test_cocos_own_rule_rows(runs):
    own = V.cocos_own_rule(runs)
    assert list(own["rule"]) == ["Triplet", "Triplet-SH", "NT-Xent", "SmoothAP"]
    assert list(own["loss"]) == [V.display_name(x) for x in ("triplet_all", "triplet_hardest", "info_nce", "smooth_ap")]
    nt = own.set_index("rule").loc["NT-Xent"]
    assert nt["W_pos i2t"] == pytest.approx(runs[runs["loss"] == "info_nce"]["sel_cocos_nt_xent_i2t_W_pos"].mean())
    assert np.isnan(own.set_index("rule").loc["Triplet", "W_neg i2t"])


def test_to_markdown_by_hand():
    df = pd.DataFrame({"a": ["1 ± 0", "x|y"], "b": [2, 3]}, index=["P^con", "P^lin"])
    assert V.to_markdown(df) == "|  | a | b |\n|---|---|---|\n| P^con | 1 ± 0 | 2 |\n| P^lin | x\\|y | 3 |"
    assert V.to_markdown(df.reset_index(drop=True)).splitlines()[0] == "| a | b |"
