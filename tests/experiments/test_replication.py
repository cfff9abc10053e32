"""Chapter 13's replication: the pre-registration the code enforces, the tuning rule, the family's verdicts.

The selection, the extension rule and the verdicts are checked on hand-made run tables whose answers are known;
the shipped record is checked against the pre-registration file (its sha256), and one fast run of a two-loss
pre-registration trains the whole protocol end to end.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlr_lib.experiments import preregistration as P
from vlr_lib.experiments import record as R
from vlr_lib.experiments import replication as X

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = P.load()
LIST = ("triplet_all", "triplet_hardest", "info_nce", "unified", "goal:con,con", "goal:cir,sig-ms", "goal:con,sig")


def edited(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    """A copy of the shipped pre-registration with `old` replaced by `new` (which must occur)."""
    text = SHIPPED.text
    assert old in text, old
    path = tmp_path / "replication.toml"
    path.write_text(text.replace(old, new, count))
    return path


# --------------------------------------------------------------------------- the file


def test_the_shipped_preregistration_declares_the_issues_protocol():
    p = SHIPPED
    assert p.seeds == tuple(range(8, 16)) and not set(p.tuning_seeds) & set(p.seeds)
    assert tuple(g.loss for g in p.losses) == LIST and p.settings == ("features", "vsepp")
    assert all(len(g.values) == 3 and len(g.extension) == 2 for g in p.losses) and p.budget == 11
    assert all(len(p.lr_grid(s)[0]) == 3 for s in p.settings)
    assert p.family == tuple(c.name for c in p.comparisons) and len(set(p.family)) == len(p.family) == 10
    assert {c.setting for c in p.comparisons} == {"features", "vsepp"}
    assert not p.conditions and X.parts(p) == ("features", "vsepp")  # the optimizer experiment is declared out
    assert "is NOT part of this replication" in p.text
    assert p.grid_of("goal:con,con").same_as == "triplet_hardest"
    assert p.max_last_epoch_share == 0.25 and p.metric == "sel_rsum"
    assert p.sha256 == P.sha256_of(P.REPLICATION)
    assert '"preregistration/*.toml"' in (ROOT / "pyproject.toml").read_text()  # ships with the package


@pytest.mark.parametrize("old, new, problem", [
    ("tuning_seeds = [16]", "tuning_seeds = [8]", "tuning_seeds"),
    ("seeds = [8, 9, 10, 11, 12, 13, 14, 15]", "seeds = [8, 8, 10]", "seeds must be distinct"),
    ('parameter = "temperature"', 'parameter = "tau"', "no tunable hyperparameter 'tau'"),
    ("values = [0.05, 0.1, 0.2]", "values = [0.1, 0.05, 0.2]", "distinct and increasing"),
    ("extension = [0.025, 0.4]", "extension = [0.1, 0.4]", "below the values"),
    ("extension = [5.0, 80.0]", "extension = [5.0, 4000.0]", "sensible range"),
    ("expected = -1", "expected = 2", "expected must be 1, -1"),
    ('b = "triplet_all"', 'b = "smooth_ap"', "'smooth_ap' is not declared"),
    ("budget = 11", "budget = 12", "budget must be 11"),
    ('same_as = "triplet_hardest"', 'same_as = "info_nce"', "its grid must be info_nce's"),
    ('same_as = "triplet_hardest"', 'same_as = "goal:con,con"', "a declared loss that is trained itself"),
    ('name = "Unified > Triplet-SH"', 'name = "Triplet-SH > Triplet"', "names must be distinct"),
])
def test_a_bad_preregistration_is_refused_naming_the_file_and_the_field(tmp_path, old, new, problem):
    path = edited(tmp_path, old, new)
    with pytest.raises(P.PreregistrationError, match=re.escape(problem)) as err:
        P.load(path)
    assert str(path) in str(err.value)


def test_an_optimizer_experiment_is_read_when_declared(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text(TWO_LOSSES)
    p = P.load(path)
    assert [c.name for c in p.conditions] == ["fresh", "carried-long"] and p.conditions[1].length == 2
    assert p.family[-1] == "fresh vs carried, longer (features)" and X.parts(p) == ("features", "optimizer")
    path.write_text(TWO_LOSSES.replace('optimizer_at_switch = "carry"', 'optimizer_at_switch = "keep"'))
    with pytest.raises(P.PreregistrationError, match="optimizer.conditions.carried-long.optimizer_at_switch"):
        P.load(path)
    path.write_text(TWO_LOSSES.replace('loss = "warmup:triplet_all:1:triplet_hardest"', 'loss = "triplet_all"'))
    with pytest.raises(P.PreregistrationError, match="optimizer.loss must be a loss schedule"):
        P.load(path)


def test_an_unreadable_preregistration_names_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("seeds = [8,")
    with pytest.raises(P.PreregistrationError, match="broken.toml: cannot be read as TOML"):
        P.load(path)
    with pytest.raises(P.PreregistrationError, match="missing.toml"):
        P.load(tmp_path / "missing.toml")


# --------------------------------------------------------------------------- seeds never seen


def notebook_seeds() -> dict[int, list[str]]:
    """{seed: notebooks}: every integer a notebook gives a seed setting -- a ``seed``/``seeds`` keyword or dict key,
    or a name with "seed" in it assigned a number, a tuple, a list or a range."""
    found: dict[int, set[str]] = {}

    def ints(node) -> list[int]:
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "range":
            bounds = [n.value for n in node.args if isinstance(n, ast.Constant) and type(n.value) is int]
            return list(range(*bounds)) if len(bounds) == len(node.args) else []
        return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is int]

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")):
        values = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg and "seed" in node.arg:
                values += ints(node.value)
            elif isinstance(node, ast.Dict):
                values += [v for k, val in zip(node.keys, node.values)
                           if isinstance(k, ast.Constant) and "seed" in str(k.value) for v in ints(val)]
            elif isinstance(node, ast.Assign) and any("seed" in getattr(t, "id", "").lower() for t in node.targets):
                values += ints(node.value)
        for v in values:
            found.setdefault(v, set()).add(path.name)
    return {s: sorted(n) for s, n in found.items()}


def test_the_declared_seeds_appear_in_no_other_record_nor_in_any_notebooks_settings():
    declared = {*SHIPPED.seeds, *SHIPPED.tuning_seeds}
    records = P.development_seeds()  # every record but the pre-registered ones (P.PREREGISTERED)
    assert records and 0 in records  # the scan finds the development seeds
    assert not declared & set(records), {s: records[s] for s in declared & set(records)}
    notebooks = notebook_seeds()
    assert 0 in notebooks  # every notebook seeds with setup(seed=0): the scan finds it
    assert not declared & set(notebooks), {s: notebooks[s] for s in declared & set(notebooks)}
    P.check_unseen(SHIPPED)


def test_reusing_a_development_seed_fails_naming_the_file(tmp_path):
    path = edited(tmp_path, "seeds = [8, 9, 10, 11, 12, 13, 14, 15]", "seeds = [0, 9, 10, 11, 12, 13, 14, 15]")
    with pytest.raises(P.PreregistrationError, match=r"seeds \[0\] were used in development") as err:
        P.check_unseen(P.load(path))
    assert str(path) in str(err.value)
    with pytest.raises(P.PreregistrationError, match="used in development"):
        X.run(P.load(path), fast=True, record=False)  # refused before anything trains


# --------------------------------------------------------------------------- the tuning rule


def tuning_runs(setting: str, val: dict, extension: dict | None = None, seed: int = 16) -> pd.DataFrame:
    rows = [{"phase": phase, "setting": setting, "loss": loss, "lr": lr, "value": v, "seed": seed, "best_rsum": m}
            for phase, table in (("tuning", val), ("extension", extension or {}))
            for (loss, lr, v), m in table.items()]
    return pd.DataFrame(rows)


def one_loss(grid_val: dict[tuple[float, float], float], extension: dict | None = None) -> X.Replication:
    """A replication holding only Triplet-SH's tuning in the features setting."""
    loss = "triplet_hardest"
    runs = tuning_runs("features", {(loss, lr, v): m for (lr, v), m in grid_val.items()},
                       {(loss, lr, v): m for (lr, v), m in (extension or {}).items()})
    prereg = SHIPPED.__class__(**{**SHIPPED.__dict__, "losses": (SHIPPED.grid_of(loss),), "settings": ("features",)})
    return X.Replication(runs, pd.DataFrame(), {"chance_rsum_val": {"features": 16.0}}, prereg)


LRS, VALUES = SHIPPED.lr_grid("features")[0], SHIPPED.grid_of("triplet_hardest").values


def grid_val(best: tuple[float, float], chance_at: tuple[float, float] | None = None) -> dict:
    out = {(lr, v): 400.0 + i for i, (lr, v) in enumerate((lr, v) for lr in LRS for v in VALUES)}
    out[best] = 500.0
    if chance_at:
        out[chance_at] = 10.0
    return out


def test_a_choice_inside_the_grid_is_not_extended():
    pts = X.points(one_loss(grid_val((LRS[1], VALUES[1]))).runs, 16.0)
    assert X.choose(pts) == (LRS[1], VALUES[1])
    assert X.extension_points(SHIPPED.grid_of("triplet_hardest"), LRS, SHIPPED.lr_grid("features")[1],
                              (LRS[1], VALUES[1])) == []


def test_a_choice_on_an_edge_trains_the_declared_extension_and_chooses_again():
    grid = SHIPPED.grid_of("triplet_hardest")
    lr_ext = SHIPPED.lr_grid("features")[1]
    corner = (LRS[-1], VALUES[0])
    wanted = X.extension_points(grid, LRS, lr_ext, corner)
    assert wanted == [(lr_ext[1], VALUES[0]), (LRS[-1], grid.extension[0])]  # one per axis, beyond its edge
    rep = one_loss(grid_val(corner), {wanted[0]: 510.0, wanted[1]: 490.0})
    sel = X.selection(rep, "features")
    assert sel.loc[sel["chosen"], ["lr", "value"]].values.tolist() == [[lr_ext[1], VALUES[0]]]
    row = X.choices(rep).iloc[0]
    assert row["extended"] and row["edge"] == "lr" and row["runs"] == 11 and row["within_budget"]


def test_a_record_whose_extension_breaks_the_rule_is_refused():
    corner = (LRS[-1], VALUES[0])
    with pytest.raises(ValueError, match="the pre-registration's rule asks for"):
        X.selection(one_loss(grid_val(corner)), "features")  # no extension trained
    with pytest.raises(ValueError, match="the pre-registration's rule asks for"):
        X.selection(one_loss(grid_val((LRS[1], VALUES[1])), {(LRS[0], VALUES[1]): 300.0}), "features")


def test_a_point_with_a_run_at_chance_is_never_chosen():
    rep = one_loss(grid_val((LRS[1], VALUES[1]), chance_at=(LRS[1], VALUES[1])))
    chosen = X.choose(X.points(rep.runs, 16.0))
    assert chosen != (LRS[1], VALUES[1])
    nothing = one_loss({k: 5.0 for k in grid_val((LRS[1], VALUES[1]))})
    with pytest.raises(ValueError, match="no point of triplet_hardest's grid learned"):
        X.selection(nothing, "features")


# --------------------------------------------------------------------------- the family's verdicts


def final_replication(gap: float = 10.0, prereg: P.Preregistration = SHIPPED) -> X.Replication:
    """Final and optimizer runs on the 8 seeds: every loss ``base + seed noise``, Unified `gap` ahead."""
    rng = np.random.default_rng(0)
    base = {loss: 450.0 for loss in LIST} | {"unified": 450.0 + gap}
    rows = []
    for setting in prereg.settings:
        for loss in [g.loss for g in prereg.losses]:
            for s in prereg.seeds:
                rows.append({"phase": "final", "setting": setting, "condition": None, "loss": loss, "seed": s,
                             "best_rsum": 0.0, "best_epoch": 10, "epochs": 20,
                             "sel_rsum": base[loss] + s + rng.normal(0, 1)})
    for c in prereg.conditions:
        for s in prereg.seeds:
            rows.append({"phase": "optimizer", "setting": "features", "condition": c.name, "loss": "w", "seed": s,
                         "best_rsum": 0.0, "best_epoch": 20 * c.length, "epochs": 20 * c.length,
                         "sel_rsum": 400.0 + s + rng.normal(0, 1)})
    return X.Replication(pd.DataFrame(rows), pd.DataFrame(), {}, prereg)


def test_the_family_is_read_through_stats_verdicts_with_holm():
    from vlr_lib import stats

    rep = final_replication()
    table = X.verdicts(rep)
    assert list(table["name"]) == list(SHIPPED.family)
    again = stats.verdicts(X.declared(rep), family=SHIPPED.family)
    assert np.allclose(table["p_holm"], again["p_holm"]) and list(table["verdict"]) == list(again["verdict"])
    unified = table[table["name"].str.startswith("Unified > Triplet-SH")]
    assert (unified["verdict"] == "holds").all() and (unified["delta"] > 9).all()
    row = X.compare(rep, "unified", "triplet_hardest", "vsepp")
    assert row["name"] == "Unified > Triplet-SH (vsepp)" and row["verdict"] == "holds"


def test_an_optimizer_comparison_without_a_claimed_sign_reads_as_a_ranking(tmp_path):
    from vlr_lib import stats

    path = tmp_path / "two.toml"
    path.write_text(TWO_LOSSES)
    table = X.verdicts(final_replication(prereg=P.load(path)))
    row = table[table["name"] == "fresh vs carried, longer (features)"].iloc[0]
    assert row["expected"] is None and row["verdict"] in stats.RANK_VERDICTS


def test_a_comparison_outside_the_family_is_refused_as_exploratory():
    rep = final_replication()
    with pytest.raises(ValueError, match="not in the declared family.*exploratory"):
        X.compare(rep, "unified", "info_nce", "features")
    with pytest.raises(ValueError, match="exploratory"):
        X.compare(rep, "triplet_all", "triplet_hardest", "features")  # the declared pair, the other way round
    delta, low, high = X.exploratory(rep, "unified", "info_nce", "features")
    assert low < delta < high and delta > 9


def test_convergence_is_read_per_loss_and_setting_against_the_declared_limit():
    rep = final_replication()
    runs = rep.runs.copy()
    hit = (runs["phase"] == "final") & (runs["loss"] == "info_nce") & (runs["setting"] == "vsepp")
    runs.loc[hit & (runs["seed"] < 11), "best_epoch"] = 20  # 3 of 8 select their last epoch: 37.5 % > 25 %
    conv = X.convergence(X.Replication(runs, rep.epochs, rep.meta, SHIPPED))
    bad = conv[~conv["ok"]]
    assert bad[["group", "setting", "what", "last", "runs"]].values.tolist() == [["final", "vsepp", "info_nce", 3, 8]]


# --------------------------------------------------------------------------- the record


def test_the_shipped_record_was_made_from_this_preregistration():
    rec = R.read(X.NAME, None)
    assert rec is not None, f"no record {X.NAME}: {X.REMAKE}"
    made = rec.manifest["meta"]["preregistration"]
    assert made["sha256"] == SHIPPED.sha256, (
        f"the record {X.NAME} was made from another version of {P.REPLICATION}: make it again ({X.REMAKE})")
    assert made["text"] == SHIPPED.text and made["file_committed"] and made["file_commit"]
    assert len(rec.manifest["meta"]["run_dates"]) == 2
    rep = X.recorded(SHIPPED)
    assert rep is not None and rep.record is not None
    final = rep.runs[rep.runs["phase"] == "final"]
    assert set(final["seed"]) == set(SHIPPED.seeds)
    assert set(rep.runs.loc[rep.runs["phase"].isin(["tuning", "extension"]), "seed"]) == set(SHIPPED.tuning_seeds)
    assert X.choices(rep)["within_budget"].all()  # the extensions the rule asked for, and no more
    assert len(X.verdicts(rep)) == len(SHIPPED.family)


def test_a_record_of_another_version_of_the_file_is_refused_as_stale_naming_it(tmp_path, monkeypatch):
    """A record (here a small one written under $VLR_RECORD) made from the shipped file, read with the file changed."""
    rep = final_replication()
    made = {"preregistration": {"sha256": SHIPPED.sha256, "text": SHIPPED.text}, "chance_rsum_val": {}}
    R.write(X.NAME, X.record_key(SHIPPED), {"runs": R.frame_rows(rep.runs), "epochs": [{"key": "k", "epoch": 1, "rsum": 1.0}]}, command="test",
            title="test", wall_seconds=0, meta=made, root=tmp_path / "records")
    monkeypatch.setenv(R.RECORD_ENV, str(tmp_path / "records"))
    found = X.recorded(SHIPPED)
    assert found is not None and len(found.runs) == len(rep.runs)
    path = edited(tmp_path, "title = ", "# one more comment\ntitle = ")
    changed = P.load(path)
    assert changed.sha256 != SHIPPED.sha256
    with pytest.raises(X.StaleRecord, match=re.escape(str(path)) + ".*stale.*make record --only 13"):
        X.recorded(changed)


# --------------------------------------------------------------------------- end to end, fast


TWO_LOSSES = """
title = "two losses"
data = "shapes"
settings = ["features"]
seeds = [8, 9]
tuning_seeds = [16]
metric = "sel_rsum"
alpha = 0.05
max_last_epoch_share = 0.25
[tuning]
budget = 11
[tuning.lr]
features = { values = [1e-3, 3e-3, 6e-3], extension = [5e-4, 1e-2] }
[losses.triplet_hardest]
parameter = "margin"
values = [0.1, 0.2, 0.4]
extension = [0.05, 0.8]
[losses.info_nce]
parameter = "temperature"
values = [0.05, 0.1, 0.2]
extension = [0.025, 0.4]
[[comparisons]]
name = "NT-Xent < Triplet-SH"
a = "info_nce"
b = "triplet_hardest"
expected = -1
claim = "Bleeker & de Rijke, obs. 3"
settings = ["features"]
[optimizer]
setting = "features"
loss = "warmup:triplet_all:1:triplet_hardest"
[optimizer.conditions.fresh]
label = "fresh"
optimizer_at_switch = "fresh"
[optimizer.conditions.carried-long]
label = "carried, twice the epochs"
optimizer_at_switch = "carry"
length = 2
[[optimizer.comparisons]]
name = "fresh vs carried, longer"
a = "fresh"
b = "carried-long"
claim = "none"
"""


@pytest.mark.slow
def test_a_fast_replication_trains_the_protocol_end_to_end_and_resumes_from_its_cells(tmp_path, monkeypatch):
    monkeypatch.setenv("VLR_RUNS", str(tmp_path / "runs"))
    path = tmp_path / "two.toml"
    path.write_text(TWO_LOSSES)
    prereg = P.load(path)
    rep = X.run(prereg, fast=True, record=False, device="cpu")
    tuning = rep.runs[rep.runs["phase"].isin(["tuning", "extension"])]
    assert set(tuning["seed"]) == {16} and 6 <= len(tuning) <= 8  # fast: 3 values per loss at the middle lr, + extension
    assert set(tuning["lr"]) == {3e-3}  # fast mode: the middle lr only
    assert rep.runs.loc[rep.runs["phase"] == "final", "seed"].tolist().count(8) == 2
    chosen = X.choices(rep)
    for r in chosen.itertuples():  # each loss's final runs are at its chosen point
        final = rep.runs[(rep.runs["phase"] == "final") & (rep.runs["loss"] == r.loss)]
        assert (final["lr"] == r.lr).all() and (final["value"] == r.value).all()
    optimizer = rep.runs[rep.runs["phase"] == "optimizer"].set_index("condition")["epochs"]
    assert optimizer["fresh"].tolist() == [4, 4] and optimizer["carried-long"].tolist() == [8, 8]
    assert list(X.verdicts(rep)["name"]) == list(prereg.family)
    assert set(rep.epochs["key"]) == set(rep.runs["key"]) and not rep.meta["preregistration"]["file_committed"]
    again = X.run(prereg, fast=True, record=False, device="cpu")  # every cell read back, none trained
    pd.testing.assert_frame_equal(again.runs, rep.runs)


@pytest.mark.parametrize("setting", ["features", "vsepp"])
def test_goal_con_con_trains_as_triplet_sh_to_the_bit(setting):
    """The pre-registration gives GOAL (con, con) Triplet-SH's runs (same_as): the two train identically."""
    from dataclasses import replace

    from vlr_lib.experiments import cells as S

    spec = replace(S.spec_for("shapes", True, setting), epochs=2, device="cpu")
    a = S.retrain(spec, "triplet_hardest", 16, loss_kwargs={"margin": 0.4})
    b = S.retrain(spec, "goal:con,con", 16, loss_kwargs={"margin": 0.4})
    assert [r["rsum"] for r in a.history] == [r["rsum"] for r in b.history]
    assert [r["loss"] for r in a.history] == [r["loss"] for r in b.history]


def test_the_reading_says_no_more_than_the_corrected_verdict():
    rep = final_replication(gap=1.5)  # Unified 1.5 ahead with a seed noise of 1: a lead at best
    table = X.verdicts(rep)
    lines = X.reading(rep)
    assert len(lines) == len(table) == len(X.verdict_table(rep))
    for line, r in zip(lines, table.itertuples()):
        assert line.startswith(f"- {r.name} (") and f"**{r.verdict}**" in line
        assert ("a lead, not a finding" in line) == (r.verdict != r.uncorrected)
    words = X.verdict_table(rep)["verdict (Holm)"].tolist()
    assert words == table["verdict"].tolist() and set(words) <= {"holds", "reverses", "cannot tell"}


def test_the_declared_claims_sit_beside_chapter_12s_untuned_verdicts():
    from vlr_lib.report.lessons import lesson_table
    from vlr_lib.experiments import lessons

    untuned = lessons.recorded(lessons.LessonsSpec())
    assert untuned is not None
    table = X.beside_untuned(final_replication(), lesson_table(untuned.runs))
    # chapter 12's experiment (d) holds the three papers' orderings in both settings; GOAL's are not among them
    assert len(table) == 6 and not table["comparison"].str.startswith("GOAL").any()
    assert table["chapter 12 (untuned, exploratory)"].str.contains("holds|reverses|cannot tell").all()


def test_the_grid_table_shows_every_point_and_marks_the_choice():
    corner = (LRS[-1], VALUES[0])
    grid = SHIPPED.grid_of("triplet_hardest")
    lr_ext = SHIPPED.lr_grid("features")[1]
    rep = one_loss(grid_val(corner), {(lr_ext[1], VALUES[0]): 510.0, (LRS[-1], grid.extension[0]): 490.0})
    table = X.grid_table(rep, "features")
    row = table.iloc[0]
    assert list(table.columns) == ["loss", "parameter", *[f"lr {lr:g}" for lr in LRS], "extension"]
    assert all(row[f"lr {lr:g}"].count(":") == 3 for lr in LRS) and "500.0" in row[f"lr {LRS[-1]:g}"]
    assert row["extension"].count("*") == 1 and "510.0*" in row["extension"]
