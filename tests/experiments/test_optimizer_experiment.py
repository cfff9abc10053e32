"""Chapter 13's optimizer experiment: its own pre-registration (optimizer.toml), enforced; its record; its family.

The file is checked field by field (an error names the file and the field); the verdicts are checked on a hand-made
runs table whose answers are known, the budget interaction as the per-seed difference of differences; a record
made from another version of the file is refused naming it; one fast run trains the whole protocol.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlr_lib.experiments import optimizer as O
from vlr_lib.experiments import preregistration as P
from vlr_lib.experiments import protocol
from vlr_lib.experiments import record as R
from vlr_lib.experiments import replication as X
from vlr_lib.stats import paired_interval
from vlr_lib.train import preset

SHIPPED = P.load_optimizer()


def edited(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the shipped file with `old` replaced by `new` (which must occur)."""
    assert old in SHIPPED.text, old
    path = tmp_path / "optimizer.toml"
    path.write_text(SHIPPED.text.replace(old, new, 1))
    return path


# --------------------------------------------------------------------------- the file


def test_the_shipped_file_declares_the_reviews_experiment():
    p = SHIPPED
    assert p.seeds == P.load().seeds == tuple(range(8, 16))  # the replication's final seeds
    assert p.setting == "features" and p.loss == "warmup:triplet_all:1:triplet_hardest"
    assert p.lr == preset("shapes", "features")["lr"]  # the showdown's, untuned
    assert [(b.epochs, b.lr_decay_epoch) for b in p.budgets] == [(20, 10), (40, 20)]
    fresh, carry, vse = (h.settings() for h in p.handlings)
    assert fresh == {"optimizer": "adam", "weight_decay": 0.0, "optimizer_at_switch": "fresh", "grad_clip": None}
    assert carry == {**fresh, "optimizer_at_switch": "carry"}
    assert vse == {"optimizer": "adamw", "weight_decay": 1e-4, "optimizer_at_switch": "carry", "grad_clip": 2.0}
    assert len(p.conditions) == 6 and len(p.family) == 5 and p.metric == "sel_rsum"
    assert ("fresh@e20 - carry@e20", "fresh@e40 - carry@e40") in {(c.a, c.b) for c in p.comparisons}
    assert p.max_last_epoch_share == 0.25 and p.sha256 == P.sha256_of(P.OPTIMIZER)


@pytest.mark.parametrize("old, new, problem", [
    ("lr = 1e-3", "lr = 2e-3", "lr must be the showdown's learning rate"),
    ('optimizer = "adamw"', 'optimizer = "sgd"', "handlings.vse_infinity.optimizer must be one of"),
    ("weight_decay = 1e-4", "weight_decay = -1e-4", "handlings.vse_infinity.weight_decay must be a finite number >= 0"),
    ("weight_decay = 1e-4", "weight_decay = nan", "handlings.vse_infinity.weight_decay must be a finite number >= 0"),
    ("weight_decay = 1e-4", 'weight_decay = "1e-4"', "handlings.vse_infinity.weight_decay must be a number"),
    ("grad_clip = 2.0", "grad_clip = 0.0", "handlings.vse_infinity.grad_clip must be a finite number > 0"),
    ('optimizer_at_switch = "fresh"', 'optimizer_at_switch = "reset"', "handlings.fresh.optimizer_at_switch"),
    ('label = "Adam carried over"', 'label = "Adam carried over"\nmomentum = 0.9', "momentum is not a field"),
    ("lr_decay_epoch = 20", "lr_decay_epoch = 40", "budgets.e40.lr_decay_epoch must lie in [1, epochs)"),
    ('a = "fresh@e40"', 'a = "fresh@e80"', "comparisons[1].a: 'fresh@e80' is not declared"),
    ('b = "fresh@e40 - carry@e40"', 'b = "fresh@e40 + carry@e40"', "comparisons[2].b"),
    ("expected = 1", "expected = 0", "comparisons[0].expected must be 1, -1"),
    ('name = "fresh − carried over, 40 epochs"', 'name = "fresh − carried over, 20 epochs"', "distinct names"),
    ('loss = "warmup:triplet_all:1:triplet_hardest"', 'loss = "triplet_hardest"', "loss must be a loss schedule"),
    ("seeds = [8, 9, 10, 11, 12, 13, 14, 15]", "seeds = [8]", "seeds must hold at least 2"),
    ('setting = "features"', 'setting = "e3e"', "setting"),
    ("metric = \"sel_rsum\"", "metric = \"rsum\"", "metric must be 'sel_rsum'"),
    ("alpha = 0.05", "", "alpha is missing"),
])
def test_a_bad_file_is_refused_naming_the_file_and_the_field(tmp_path, old, new, problem):
    path = edited(tmp_path, old, new)
    with pytest.raises(P.PreregistrationError, match=re.escape(problem)) as err:
        P.load_optimizer(path)
    assert str(path) in str(err.value)


def test_the_declared_seeds_are_unseen_by_development_and_a_reused_one_fails_naming_the_file(tmp_path):
    assert set(P.PREREGISTERED) == {X.NAME, O.NAME}  # the two records that train the declared seeds
    P.check_unseen(SHIPPED)
    path = edited(tmp_path, "seeds = [8, 9, 10, 11, 12, 13, 14, 15]", "seeds = [0, 9, 10, 11, 12, 13, 14, 15]")
    with pytest.raises(P.PreregistrationError, match=r"seeds \[0\] were used in development") as err:
        P.check_unseen(P.load_optimizer(path))
    assert str(path) in str(err.value)
    with pytest.raises(P.PreregistrationError, match="used in development"):
        O.run(P.load_optimizer(path), fast=True, record=False)  # refused before anything trains


def test_each_condition_is_one_cell_config_and_fast_mode_scales_the_budgets():
    configs = [O.config(SHIPPED, c, False) for c in SHIPPED.conditions]
    assert len({str(sorted(c.items())) for c in configs}) == 6
    assert O.config(SHIPPED, "vse_infinity@e40", False) == {
        "loss": SHIPPED.loss, "optimizer": "adamw", "weight_decay": 1e-4, "optimizer_at_switch": "carry",
        "grad_clip": 2.0, "epochs": 40, "lr_decay_epoch": 20}
    assert [O.budget_of(SHIPPED, b, True) for b in SHIPPED.budgets] == [(4, 2), (8, 4)]
    assert O.seeds_of(SHIPPED, True) == (8, 9)


# --------------------------------------------------------------------------- the family, on known numbers


def made(gap20: float = 8.0, gap40: float = 0.0, vse: float = 0.0, noise: float = 1.0) -> O.OptimizerRuns:
    """A runs table of every condition on the shipped seeds: carrying over costs `gap20` at 20 epochs and `gap40`
    at 40, VSE∞'s recipe is `vse` from fresh; per-seed noise of `noise`."""
    rng = np.random.default_rng(0)
    cost = {"e20": gap20, "e40": gap40}
    rows = []
    for condition in SHIPPED.conditions:
        handling, budget = condition.split("@")
        base = 300.0 - (cost[budget] if handling == "carry" else 0.0) + (vse if handling == "vse_infinity" else 0.0)
        for seed in SHIPPED.seeds:
            epochs = 20 if budget == "e20" else 40
            rows.append({"condition": condition, "handling": handling, "budget": budget, "seed": seed,
                         "epochs": epochs, "best_rsum": 0.0, "best_epoch": epochs // 2,
                         "sel_rsum": base + seed + rng.normal(0, noise), "key": f"{condition}-{seed}"})
    return O.OptimizerRuns(pd.DataFrame(rows), pd.DataFrame(), {}, SHIPPED)


def test_the_family_reads_the_cost_and_its_budget_interaction():
    exp = made(gap20=8.0, gap40=0.0)
    v = O.verdicts(exp).set_index("a")
    assert list(O.verdicts(exp)["name"]) == list(SHIPPED.family)
    assert v.loc["fresh@e20", "verdict"] == "holds" and v.loc["fresh@e40", "verdict"] == "not told apart"
    inter = v.loc["fresh@e20 - carry@e20"]
    assert inter["verdict"] == "holds" and inter["delta"] == pytest.approx(8.0, abs=1.5)
    diff = lambda c1, c2: O.by_seed(exp, c1) - O.by_seed(exp, c2)  # noqa: E731
    assert (inter["delta"], inter["low"], inter["high"]) == pytest.approx(
        paired_interval(diff("fresh@e20", "carry@e20"), diff("fresh@e40", "carry@e40")))
    assert O.compare(exp, "fresh@e20", "carry@e20")["verdict"] == "holds"


def test_an_undeclared_comparison_is_refused_as_exploratory():
    exp = made()
    with pytest.raises(ValueError, match="exploratory"):
        O.compare(exp, "carry@e40", "carry@e20")
    delta, low, high = O.exploratory(exp, "carry@e40", "carry@e20")
    assert low < delta < high and delta == pytest.approx(8.0, abs=1.5)


def test_the_reading_says_no_more_than_the_corrected_verdict():
    exp = made(gap20=1.0, noise=1.0)  # a lead at best
    table, lines = O.verdicts(exp), O.reading(exp)
    assert len(lines) == len(table) == len(O.verdict_table(exp))
    for line, r in zip(lines, table.itertuples()):
        assert line.startswith(f"- {r.name}: **{r.verdict}**")
        assert ("a lead, not a finding" in line) == (r.verdict in ("cannot tell", "not told apart")
                                                     and r.verdict != r.uncorrected)


def test_convergence_is_checked_per_condition():
    exp = made()
    exp.runs.loc[(exp.runs["condition"] == "carry@e40") & (exp.runs["seed"] <= 10), "best_epoch"] = 40
    conv = O.convergence(exp).set_index("condition")
    assert conv.loc["carry@e40", "last"] == 3 and not conv.loc["carry@e40", "ok"]
    assert conv.drop("carry@e40")["ok"].all()


# --------------------------------------------------------------------------- the record


def test_the_protocol_makes_and_checks_the_record():
    e = protocol.get(O.NAME)
    assert e.step == "13-optimizer" and e.step in protocol.STEPS and e.chapter == "13_replication"
    assert "13-optimizer" in SHIPPED.text and "13-optimizer" in O.REMAKE


def test_the_shipped_record_follows_its_file_and_its_checked_run_reproduces():
    exp = O.run()  # the shipped record (the tests run without $VLR_RECORD)
    assert exp.record is not None and exp.meta["preregistration"]["sha256"] == SHIPPED.sha256
    assert exp.meta["preregistration"]["file_committed"] and not exp.meta["fast"]
    assert sorted(exp.runs["condition"].unique()) == sorted(SHIPPED.conditions)
    assert (exp.runs.groupby("condition")["seed"].apply(sorted) == [list(SHIPPED.seeds)] * 6).all()
    assert (exp.runs["epochs"] == exp.runs["budget"].map({"e20": 20, "e40": 40})).all()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "results.md").read_text()
    assert O.markdown(exp) in docs  # run 9b's numbers are the record's, as the code writes them
    recorded, again = O.recorded_and_again(epochs=2)  # the first 2 of its 20 epochs, re-trained
    assert len(recorded) == len(again) == 2
    assert max(abs(a - b) for a, b in zip(recorded, again)) <= protocol.tolerance(O.NAME)


def test_a_record_of_another_version_of_the_file_is_refused_as_stale_naming_it(tmp_path, monkeypatch):
    exp = made()
    meta = {"preregistration": {"sha256": SHIPPED.sha256, "text": SHIPPED.text}}
    R.write(O.NAME, O.record_key(SHIPPED), {"runs": R.frame_rows(exp.runs),
                                            "epochs": [{"key": "k", "epoch": 1, "rsum": 1.0}]},
            command="test", title="test", wall_seconds=0, meta=meta, root=tmp_path / "records")
    monkeypatch.setenv(R.RECORD_ENV, str(tmp_path / "records"))
    found = O.recorded(SHIPPED)
    assert found is not None and len(found.runs) == len(exp.runs)
    path = edited(tmp_path, "title = ", "# one more comment\ntitle = ")
    with pytest.raises(X.StaleRecord, match=re.escape(str(path)) + ".*stale.*make record --only 13-optimizer"):
        O.recorded(P.load_optimizer(path))


# --------------------------------------------------------------------------- end to end, fast


@pytest.mark.slow
def test_a_fast_run_trains_every_condition_and_resumes_from_its_cells(tmp_path, monkeypatch):
    monkeypatch.setenv("VLR_RUNS", str(tmp_path / "runs"))
    exp = O.run(fast=True, record=False, device="cpu")
    assert len(exp.runs) == 6 * 2 and set(exp.runs["seed"]) == {8, 9}
    epochs = exp.runs.groupby("condition")["epochs"].first()
    assert epochs["fresh@e20"] == 4 and epochs["vse_infinity@e40"] == 8
    assert exp.runs["sel_rsum"].notna().all() and set(exp.epochs["key"]) == set(exp.runs["key"])
    assert list(O.verdicts(exp)["name"]) == list(SHIPPED.family)
    cells = sorted((tmp_path / "runs").glob("replication-optimizer-shapes-fast/cells/*.json"))
    assert len(cells) == 12 and '"adamw"' in "".join(c.read_text() for c in cells)
    again = O.run(fast=True, record=False, device="cpu")  # every cell read back, none trained
    pd.testing.assert_frame_equal(again.runs, exp.runs)
