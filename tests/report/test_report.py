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
from vlr_lib import losses, registry, stats
from vlr_lib.report.labels import TABLE1_COLUMNS, hyperparameters, mean_std, table1_name
from vlr_lib.report.layouts import goal_matrix, goal_table, table1
from vlr_lib.report.markdown import markdown_block, to_markdown
from vlr_lib.report.readings import PAPER_CLAIMS, PRACTICE_CLAIMS, ranking, reading, separations
from vlr_lib.report.summary import cocos_own_rule, summarize, summary_table
from vlr_lib.report.sweeps import (history_frame, history_values, loss_means, sweep_grid, sweep_losses, sweep_slice,
                                   sweep_values)
from vlr_lib.goal import GOAL_PAIRS, GOAL_TRIPLETS, TABLE1


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return synthetic_runs()


@pytest.fixture(scope="module")
def summary(runs) -> pd.DataFrame:
    return summarize(runs, prefix="sel_")


@pytest.fixture(scope="module")
def histories() -> dict[str, list[dict]]:
    return {"A": make_history(100.0, 0.3), "B": make_history(5.0, 0.8, start_epoch=0), "C": make_history(60.0, 0.1)}


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    return sweep_table()


# --------------------------------------------------------------------------- names


def test_names_are_the_library_labels_and_table1_names_its_goal_cells():
    s = summarize(synthetic_runs(), prefix="sel_")
    assert list(s["name"]) == [registry.label(x) for x in LOSS_NAMES]
    assert table1_name("cir", "lin") == "Circle"
    assert table1_name("con", "con") == "Triplet-SH"  # Xuan & Chen's "Triplet" is the hardest-negative one
    assert table1_name("cir", "sig-ms") == "New"
    named = [g for g in GOAL if table1_name(*g[5:].split(",")) != "New"]
    assert len(named) == sum(v != "New" for v in TABLE1.values()) == 5


def test_hyperparameters_are_the_library_defaults():
    sig = inspect.signature(losses.unified).parameters
    assert hyperparameters("unified") == f"margin={sig['margin'].default}, gamma={sig['gamma'].default}"
    assert hyperparameters("info_nce") == "temperature=0.1"
    assert hyperparameters("cross_example_softmax") == "scale=20.0"  # topk=None is not a setting
    assert hyperparameters("goal:nca,con") == "tau=10.0"  # T^nca has no margin; P^con no parameter
    assert hyperparameters("goal:con,lin") == "margin=0.2"
    assert hyperparameters("goal:cir,sig-ms") == "tau=10.0, alpha=2.0, beta=10.0, lam=0.5, eps=0.1"
    assert hyperparameters("unified", {"gamma": 30.0, "temperature": 9.0}) == "margin=0.2, gamma=30.0"


# --------------------------------------------------------------------------- tables


@pytest.mark.parametrize("prefix", ["sel_", "test_"])
def test_summarize_matches_a_plain_loop(runs, prefix):
    s = summarize(runs, prefix=prefix)
    assert list(s["config"]) == LOSS_NAMES  # input order kept
    assert (s["n_seeds"] == 3).all()
    for loss in ("info_nce", "goal:nca,sig"):
        for m in TABLE1_COLUMNS:
            values = [r[f"{prefix}{m}"] for _, r in runs.iterrows() if r["loss"] == loss]
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            got = s.set_index("loss").loc[loss]
            assert got[f"{m}_mean"] == pytest.approx(mean, rel=1e-12)
            assert got[f"{m}_std"] == pytest.approx(std, rel=1e-12)
    assert ("epoch_mean" in s) == (prefix == "sel_")


def test_summarize_one_seed_has_zero_std_and_bad_inputs_fail():
    s = summarize(synthetic_runs(seeds=(0,)), prefix="sel_")
    assert (s["rsum_std"] == 0).all()
    with pytest.raises(ValueError, match="^runs"):
        summarize(synthetic_runs().drop(columns=["sel_map5"]), prefix="sel_", metrics=TABLE1_COLUMNS)
    with pytest.raises(ValueError, match="^runs"):
        summarize(synthetic_runs().iloc[:0], prefix="sel_")


def test_table1_layout_and_formatting(summary):
    t = table1(summary)
    assert list(t.columns) == ["loss", "hyper-param", "i2t R@1", "i2t R@5", "i2t R@10", "i2t mAP@5",
                               "t2i R@1", "t2i R@5", "t2i R@10", "rsum", "PR-AUC"]
    assert len(t) == 24
    r = summary.iloc[3]
    assert t.loc[3, "rsum"] == f"{r['rsum_mean']:.1f} ± {r['rsum_std']:.1f}"
    assert t.loc[3, "PR-AUC"] == f"{r['pr_auc_mean']:.3f} ± {r['pr_auc_std']:.3f}"  # fractions: 3 decimals


def test_goal_matrix_puts_each_cell_at_its_pair_and_triplet():
    means = {g: 10 * GOAL_PAIRS.index(g.split(",")[1]) + GOAL_TRIPLETS.index(g[5:].split(",")[0]) for g in GOAL}
    s = hand_summary({"info_nce": -1.0, **means}, {k: 0.5 for k in ["info_nce", *GOAL]})
    mean, std = goal_matrix(s, "rsum")
    assert mean.shape == (5, 3)
    np.testing.assert_array_equal(mean, 10 * np.arange(5)[:, None] + np.arange(3)[None, :])
    assert (std == 0.5).all()
    table = goal_table(s, "rsum")
    assert list(table.index) == [f"P^{p}" for p in GOAL_PAIRS] and list(table.columns) == ["T^con", "T^nca", "T^cir"]
    assert table.loc["P^sig", "T^cir"] == "22.0 ± 0.5"
    partial = goal_matrix(s[s["loss"] != "goal:cir,sig"], "rsum")[0]
    assert np.isnan(partial[2, 2]) and np.isfinite(partial).sum() == 14
    with pytest.raises(ValueError, match="^metric"):
        goal_matrix(s, "r1")


# --------------------------------------------------------------------------- uncertainty


def hand_runs(values: dict[str, list[float]], metric: str = "rsum") -> pd.DataFrame:
    """A runs table with chosen per-seed values of one metric (every other metric the same values)."""
    rows = []
    for loss, per_seed in values.items():
        for seed, v in enumerate(per_seed):
            rows.append({"config": loss, "loss": loss, "seed": seed,
                         **{f"sel_{m}": v for m in TABLE1_COLUMNS}, f"sel_{metric}": v})
    return pd.DataFrame(rows)


def test_ranking_by_hand_is_a_picture_of_the_bars():
    s = hand_summary({"a_loss": 10.0, "b_loss": 8.0, "c_loss": 2.0}, {"a_loss": 1.0, "b_loss": 1.0, "c_loss": 1.0})
    rank = ranking(s)
    assert list(rank["loss"]) == ["a_loss", "b_loss", "c_loss"]
    assert list(rank["overlaps_best"]) == [True, True, False]  # |2| <= 1 + 1: touching bars overlap


def test_separations_are_paired_and_holm_corrected_by_hand():
    # b = a - 1 on every seed: a large seed effect, a constant gap -> told apart however noisy the seeds;
    # c differs from a by 3, -1, 2: the interval straddles 0.
    runs = hand_runs({"a_loss": [10.0, 30.0, 20.0], "b_loss": [9.0, 29.0, 19.0], "c_loss": [7.0, 31.0, 18.0]})
    seps = separations(runs).set_index(["a", "b"])
    assert seps.loc[("a_loss", "b_loss"), "verdict"] == "ahead" and seps.loc[("a_loss", "b_loss"), "p"] == 0.0
    d = np.array([3.0, -1.0, 2.0])
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    assert seps.loc[("a_loss", "c_loss"), "p"] == pytest.approx(stats_p(t, 2))
    assert seps.loc[("a_loss", "c_loss"), "verdict"] == "not told apart"
    assert list(seps["p_holm"]) == pytest.approx(list(report_holm(seps["p"])))
    assert int(seps["separated"].sum()) == int((seps["p_holm"] < 0.05).sum())


def stats_p(t: float, df: int) -> float:
    """Two-sided p of Student's t with df = 2 in closed form: 1 - |t| / sqrt(2 + t^2)."""
    assert df == 2
    return 1 - abs(t) / math.sqrt(2 + t * t)


def report_holm(p) -> list[float]:
    """Holm by hand: sorted ascending, (m - k) * p_(k) for k = 0.., capped at 1, running maximum."""
    order = sorted(range(len(p)), key=lambda i: p.iloc[i])
    out, running = [0.0] * len(p), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - k) * p.iloc[i]))
        out[i] = running
    return out


def test_separations_against_scipy(runs):
    scipy_stats = pytest.importorskip("scipy.stats")
    seps = separations(runs, "rsum")
    table = runs.pivot(index="seed", columns="loss", values="sel_rsum")
    for _, r in seps.sample(20, random_state=0).iterrows():
        assert r["p"] == pytest.approx(scipy_stats.ttest_rel(table[r["a"]], table[r["b"]]).pvalue, rel=1e-9)
    n = runs["loss"].nunique()
    assert len(seps) == n * (n - 1) // 2


def test_reading_claims_hold_reverse_or_cannot_tell():
    base = np.array([100.0, 140.0, 120.0])
    values = {"triplet_hardest": base, "triplet_all": base - [5.0, 5.1, 4.9], "info_nce": base + [4.0, 4.1, 3.9],
              "smooth_ap": base + [3.0, -6.0, 1.0], "unified": base + [0.5, -0.5, 0.2],
              "sampled_softmax": base - 20, "cross_example_softmax": base - 15}
    facts = reading(hand_runs({k: list(v) for k, v in values.items()}))
    claims = {(c["a"], c["b"]): c for c in facts["claims"]}
    assert claims[("triplet_hardest", "triplet_all")]["verdict"] == "holds"
    assert claims[("triplet_hardest", "info_nce")]["verdict"] == "reverses"
    assert claims[("triplet_hardest", "smooth_ap")]["verdict"] == "cannot tell"
    assert all(c["family_size"] == 5 for c in facts["claims"])  # GOAL not trained: its claim leaves the family
    assert ("goal:cir,sig-ms", "goal:con,con") not in claims and facts["goal_claims"] == []
    p = [c["p"] for c in facts["claims"]]
    assert [c["p_holm"] for c in facts["claims"]] == pytest.approx(list(stats.holm(p)))
    assert facts["best"] == "info_nce" and facts["n_pairs"] == 21
    assert "holds here" in facts["text"] and "is reversed here" in facts["text"] and "cannot be told" in facts["text"]
    assert facts["goal_best"] is None


def test_a_claim_that_holds_alone_can_fail_in_its_family():
    """Triplet-SH - Triplet = +2, +3, +1 has p = 0.074 alone (cannot tell); +2, +2.5, +1.5 has p = 0.013 alone
    (holds) but, with five other claims far from 0, Holm multiplies it by 6 -- unless it is the only claim."""
    base = np.array([100.0, 140.0, 120.0])
    few = reading(hand_runs({"triplet_hardest": list(base), "triplet_all": list(base - [2.0, 2.5, 1.5])}))
    assert few["claims"][0]["verdict"] == "holds"
    many = {"triplet_hardest": base, "triplet_all": base - [2.0, 2.5, 1.5], "info_nce": base + [3.0, -6.0, 1.0],
            "smooth_ap": base + [3.0, -6.0, 1.1], "unified": base + [0.5, -0.5, 0.2],
            "sampled_softmax": base - [1.0, -2.0, 0.5], "cross_example_softmax": base - [0.4, 0.5, -1.0]}
    c = reading(hand_runs({k: list(v) for k, v in many.items()}))["claims"][0]
    assert (c["uncorrected"], c["verdict"]) == ("holds", "cannot tell") and "uncorrected it would read" in c["text"]


def test_goal_pair_weights_are_one_family(runs):
    facts = reading(runs)
    assert len(facts["goal_claims"]) == 12 and all(c["family_size"] == 12 for c in facts["goal_claims"])
    assert {c["expected"] for c in facts["goal_claims"]} == {-1}
    assert all(c["a"].endswith(",con") and not c["b"].endswith(",con") for c in facts["goal_claims"])


def test_the_practice_losses_are_one_family_of_their_own():
    """Issue 36: CLIP's learned tau and SigLIP against NT-Xent at its fixed tau, declared before the runs."""
    base = np.array([100.0, 140.0, 120.0])
    values = {"info_nce": base, "clip_learned": base + [4.0, 4.1, 3.9], "siglip": base + [3.0, -6.0, 1.0],
              "triplet_hardest": base - [5.0, 5.1, 4.9], "triplet_all": base - 20}
    facts = reading(hand_runs({k: list(v) for k, v in values.items()}))
    practice = {(c["a"], c["b"]): c for c in facts["practice_claims"]}
    assert set(practice) == {(a, b) for a, b, *_ in PRACTICE_CLAIMS} and len(facts["claims"]) == 2
    assert all(c["family_size"] == 2 and c["text"] in facts["text"] for c in practice.values())
    assert practice[("clip_learned", "info_nce")]["verdict"] == "holds"
    assert practice[("siglip", "info_nce")]["verdict"] == "cannot tell"
    p = [c["p"] for c in facts["practice_claims"]]
    assert [c["p_holm"] for c in facts["practice_claims"]] == pytest.approx(list(stats.holm(p)))
    assert reading(hand_runs({k: list(values[k]) for k in ("info_nce", "triplet_all")}))["practice_claims"] == []


def test_unpaired_runs_are_refused():
    runs = hand_runs({"a_loss": [1.0, 2.0, 3.0], "b_loss": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="same seeds"):
        separations(runs[~((runs["loss"] == "b_loss") & (runs["seed"] == 2))])
    with pytest.raises(ValueError, match="two runs of one loss and seed"):
        separations(pd.concat([runs, runs.iloc[:1]]))


def test_reading_on_the_full_grid(runs, summary):
    facts = reading(runs)
    assert len(facts["claims"]) == len(PAPER_CLAIMS)
    best = summary.loc[summary["rsum_mean"].idxmax(), "loss"]
    assert facts["best"] == best and registry.label(best) in facts["text"]
    goal = summary[summary["loss"].str.startswith("goal:")]
    assert facts["goal_best"] == goal.loc[goal["rsum_mean"].idxmax(), "loss"]
    for c in facts["claims"]:
        assert c["text"] in facts["text"]




# --------------------------------------------------------------------------- COCOS and Markdown


def test_cocos_own_rule_rows(runs):
    own = cocos_own_rule(runs)
    assert list(own["rule"]) == ["Triplet", "Triplet-SH", "NT-Xent", "SmoothAP"]
    assert list(own["loss"]) == ["Triplet", "Triplet-SH", "NT-Xent", "SmoothAP"]
    nt = own.set_index("rule").loc["NT-Xent"]
    assert nt["W_pos i2t"] == pytest.approx(runs[runs["loss"] == "info_nce"]["sel_cocos_nt_xent_i2t_W_pos"].mean())
    assert np.isnan(own.set_index("rule").loc["Triplet", "W_neg i2t"])


def test_to_markdown_by_hand():
    df = pd.DataFrame({"a": ["1 ± 0", "x|y"], "b": [2, 3]}, index=["P^con", "P^lin"])
    assert to_markdown(df) == "|  | a | b |\n|---|---|---|\n| P^con | 1 ± 0 | 2 |\n| P^lin | x\\|y | 3 |"
    assert to_markdown(df.reset_index(drop=True)).splitlines()[0] == "| a | b |"



# --------------------------------------------------------------------------- history_frame


def test_history_frame_flattens_and_derives_the_gap(histories):
    f = history_frame(histories)
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
    f = history_frame({"A": shuffled})
    assert f["epoch"].tolist() == list(range(1, EPOCHS + 1))


@pytest.mark.parametrize("bad", [{}, {"A": []}, {"A": [{"loss": 1.0}]}, []])
def test_history_frame_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="histories"):
        history_frame(bad)


def test_history_values_relative_loss_and_missing_metrics(histories):
    f = history_frame(histories)
    b = f[f["run"] == "B"]  # epoch 0 has no loss: relative to the first recorded one, epoch 1
    np.testing.assert_allclose(history_values(b, "rsum"), [r["rsum"] for r in histories["B"]])
    rel = history_values(b, "loss", relative=True)
    assert math.isnan(rel[0]) and rel[1] == 1.0
    np.testing.assert_allclose(rel[2:], [r["loss"] / histories["B"][1]["loss"] for r in histories["B"][2:]])
    assert np.isnan(history_values(b, "not recorded")).all() and len(b) == EPOCHS + 1




# --------------------------------------------------------------------------- sweeps


def test_sweep_values_and_losses(sweep):
    assert sweep_values(sweep, "unified") == {"margin": MARGINS, "gamma": GAMMAS}  # epochs does not vary
    assert sweep_values(sweep, "info_nce") == {"temperature": TEMPS}
    assert sweep_values(sweep, "triplet_hardest") == {}
    assert sweep_losses(sweep) == ["unified", "info_nce"]
    with pytest.raises(ValueError, match="loss"):
        sweep_values(sweep, "smooth_ap")
    with pytest.raises(TypeError, match="runs"):
        sweep_values(sweep.to_dict(), "unified")


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
        s = sweep_slice(sweep, "unified", x, {other: at}, metric)
        ref = slow_slice(sweep, x, other, at, metric)
        assert s[x].tolist() == sorted(ref)
        np.testing.assert_allclose(s["mean"], [ref[v][0] for v in s[x]])
        np.testing.assert_allclose(s["std"], [ref[v][1] for v in s[x]], atol=1e-12)
        assert (s["n"] == len(SEEDS)).all()


def test_sweep_slice_defaults_and_errors(sweep):
    s = sweep_slice(sweep, "unified", "gamma")  # margin held at its first value
    np.testing.assert_allclose(s["mean"], [np.mean([rsum_of(0.0, g, k) for k in SEEDS]) for g in GAMMAS])
    with pytest.raises(ValueError, match="x"):
        sweep_slice(sweep, "unified", "temperature")
    with pytest.raises(ValueError, match="fixed"):
        sweep_slice(sweep, "unified", "gamma", {"tau": 0.1})
    with pytest.raises(ValueError, match="metric"):
        sweep_slice(sweep, "unified", "gamma", metric="nope")


@pytest.mark.parametrize("x,y", [("gamma", "margin"), ("margin", "gamma")])
def test_sweep_grid_is_the_slices_side_by_side(sweep, x, y):
    g = sweep_grid(sweep, "unified", x, y)
    assert (g.index.name, g.columns.name) == (y, x)
    assert list(g.index) == sweep_values(sweep, "unified")[y]
    for at in g.index:  # each row is a slice, means over seeds from loops
        ref = slow_slice(sweep, x, y, at, "rsum")
        np.testing.assert_allclose(g.loc[at].to_numpy(), [ref[v][0] for v in g.columns])
    holes = sweep[~((sweep["loss"] == "unified") & (sweep["margin"] == MARGINS[0]) & (sweep["gamma"] == GAMMAS[0]))]
    assert math.isnan(sweep_grid(holes, "unified", "gamma", "margin").iloc[0, 0])
    for args, match in [(("temperature", "margin"), "^x"), (("gamma", "tau"), "^y"), (("gamma", "gamma"), "different"),
                        (("gamma", "margin", "nope"), "metric")]:
        with pytest.raises(ValueError, match=match):
            sweep_grid(sweep, "unified", *args)


def test_sweep_slice_tolerates_values_read_back_from_csv(sweep):
    noisy = sweep.copy()
    noisy["margin"] = noisy["margin"] * 3 / 3 + 1e-16  # what a round trip through text can do to 0.1
    s = sweep_slice(noisy, "unified", "gamma", {"margin": 0.1})
    assert len(s) == len(GAMMAS)


EMPTY = pd.DataFrame()


def _bad_library_calls():
    """Issue 23: each was a KeyError, an unpacking error, a silent 'inf ± nan' or a NaN drawn as a blank."""
    import torch

    from vlr_lib import viz

    nan_s = torch.tensor([[1.0, float("nan")], [0.0, 1.0]])
    return [
        ("markdown_block(empty, {})", lambda: markdown_block(EMPTY, {}), ValueError, "^runs is empty"),
        ("summary_table(empty)", lambda: summary_table(EMPTY), ValueError, "^summary is empty"),
        ("summary_table(list)", lambda: summary_table([]), TypeError, "^summary must be a pandas DataFrame"),
        ("summary_table(no n_seeds)", lambda: summary_table(pd.DataFrame({"config": ["a"]})), ValueError,
         r"^summary lacks the columns \['loss', 'name', 'n_seeds'\]"),
        ("metric_errorbars(empty)", lambda: viz.showdown.metric_errorbars(EMPTY), ValueError, "^summary is empty"),
        ("mean_std(inf, nan)", lambda: mean_std(math.inf, math.nan, "rsum"), ValueError, "^mean must be"),
        ("mean_std(1, nan)", lambda: mean_std(1.0, math.nan, "rsum"), ValueError, "^std must be"),
        ("mean_std(1, -1)", lambda: mean_std(1.0, -1.0, "rsum"), ValueError, "^std must be"),
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
        markdown_block(runs, {})
    with pytest.raises(TypeError, match="^meta must be"):
        markdown_block(runs, None)


def test_loss_means_are_each_losss_mean_over_its_runs(sweep):
    """triplet_hardest: rsum 150 + seed by design; unified: the mean of rsum_of over its whole grid."""
    means = loss_means(sweep, ["triplet_hardest", "unified"])
    assert means["triplet_hardest"] == pytest.approx(150.0 + np.mean(SEEDS))
    cells = [rsum_of(m, g, s) for s in SEEDS for m in MARGINS for g in GAMMAS]
    assert means["unified"] == pytest.approx(sum(cells) / len(cells))
    assert loss_means(sweep, []) == {}
    with pytest.raises(ValueError, match="loss 'nope'"):
        loss_means(sweep, ["nope"])
