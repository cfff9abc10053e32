"""The registry and the small shared facts of vlr_lib, written once: one entry per loss (its name, label, the papers'
names, hyperparameters, COCOS rule, reference test and notebook), every name form parsed in one place, GOAL's
parameter tables, the one integer check."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.core import references
from vlr_lib import analysis, goal, losses, registry
from vlr_lib._checks import check_int

ROOT = Path(__file__).resolve().parents[2]


def test_every_loss_has_one_label_and_its_other_names():
    entries = [registry.entry(name) for name in registry.names()]
    assert [e.name for e in entries] == [e.name for e in losses.REGISTERED]
    assert len({e.label for e in entries}) == len(entries)  # one name each, no two alike
    for e in entries:
        assert registry.label(e.name) == e.label
        assert e.aliases and all(isinstance(a, str) and a for a in e.aliases)
    assert registry.label("triplet_hardest") == "Triplet-SH" and registry.label("info_nce") == "NT-Xent"


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_loss_has_a_reference_test_and_a_notebook(name):
    """Adding a loss is its function and entry (vlr_lib/losses.py), its slow reference and case
    (tests/core/references.py) and the notebook that derives it: a loss missing either fails here, by name."""
    assert callable(getattr(references, name, None)), f"{name} has no slow reference in tests/core/references.py"
    assert name in references.CASES, f"{name} has no case in tests/core/references.py's CASES"
    notebook = registry.entry(name).notebook
    assert notebook, f"{name}'s docstring names no notebook ('Derived in notebooks/NN_topic.py.')"
    source = ROOT / notebook
    assert source.is_file(), f"{name} is derived in {notebook}, which does not exist"
    assert re.search(rf"\blosses\.{name}\(", source.read_text()), f"{notebook} never calls losses.{name}"


def test_every_hyperparameter_is_a_keyword_with_a_default():
    for name in [*registry.names(), *registry.goal_names()]:
        e = registry.entry(name)
        signature = inspect.signature(e.fn).parameters
        assert set(e.hyper) <= set(signature), name
        defaults = e.defaults()
        assert all(defaults[k] is not inspect.Parameter.empty for k in e.hyper), name
        for k, h in e.hyper.items():  # a default lies in its range
            if h.kind == "float":
                assert (h.low is None or h.low <= defaults[k]) and (h.high is None or defaults[k] <= h.high), (name, k)


def test_goal_labels_and_bad_names():
    assert registry.label("goal:cir,sig-ms") == "GOAL (cir, sig-ms)"
    assert registry.label("goal: nca , con") == "GOAL (nca, con)"
    assert goal.GoalConfig("cir", "sig-ms").label == "GOAL (cir, sig-ms)"
    assert registry.label("warmup:triplet_all:2:goal:cir,sig-ms") == "Triplet → GOAL (cir, sig-ms) after 2 epochs"
    for bad in ("vse++", "", "Triplet-SH"):
        with pytest.raises(ValueError, match="is not a registered loss"):
            registry.label(bad)


@pytest.mark.parametrize("typed, near", [("tripet_hardest", "triplet_hardest"), ("infonce", "info_nce"),
                                         ("goal:cir,sigms", "sig-ms"), ("warmup:triplet_al:1:triplet_hardest",
                                                                        "triplet_all")])
def test_an_unknown_name_lists_the_near_matches(typed, near):
    with pytest.raises(ValueError, match=near):
        registry.check(typed)


def test_every_name_form_is_split_and_parsed_here():
    assert registry.split_names("goal:cir,sig-ms,info_nce") == ["goal:cir,sig-ms", "info_nce"]
    assert registry.split_names("warmup:triplet_all:1:goal:cir,sig-ms, unified") == [
        "warmup:triplet_all:1:goal:cir,sig-ms", "unified"]
    assert registry.schedule("warmup:triplet_all:3:goal:cir,sig-ms") == ("triplet_all", 3, "goal:cir,sig-ms")
    assert registry.parameters("goal:con,con") == tuple(goal.HYPER)
    assert registry.hyperparameters("goal:con,con") == ("margin",)


def test_resolved_fills_in_every_default():
    assert registry.resolved("triplet_hardest") == {"margin": 0.2, "reduction": "sum"}
    assert registry.resolved("unified", {"gamma": 30.0}) == {"margin": 0.2, "gamma": 30.0, "reduction": "sum"}
    assert registry.resolved("goal:cir,con", {"tau": 2.0}) == {"tau": 2.0}
    assert registry.resolved("warmup:triplet_all:1:info_nce", {"margin": 0.3}) == {
        "phases": [{"margin": 0.3, "reduction": "sum"}, {"temperature": 0.1, "reduction": "mean"}]}
    assert registry.resolved_config({"loss": "info_nce", "lr": 0.1}) == {
        "loss": "info_nce", "lr": 0.1, "temperature": 0.1, "reduction": "mean"}
    assert registry.resolved_config({"loss": "custom:mine"}) == {"loss": "custom:mine"}


def test_a_changed_default_changes_the_resolved_values(monkeypatch):
    before = registry.resolved_config({"loss": "triplet_hardest"})
    monkeypatch.setattr(losses.triplet_hardest, "__defaults__", (0.3, "sum", None))
    assert registry.resolved_config({"loss": "triplet_hardest"}) == {**before, "margin": 0.3}


def test_glossary_lists_every_loss_once():
    rows = registry.glossary()
    assert [r["name"] for r in rows[:-1]] == [registry.label(n) for n in registry.names()]
    for row, name in zip(rows, registry.names()):
        assert all(a in row["also called"] for a in registry.entry(name).aliases)
        assert row["notebook"] == registry.entry(name).notebook


def test_command_line_parameters_are_the_numeric_hyperparameters():
    params = registry.command_line_parameters()
    assert params["topk"] == "topk" and params["margin"] == "float" and "reduction" not in params
    assert set(params) >= {k for n in registry.names() for k, h in registry.entry(n).hyper.items() if h.kind != "choice"}


def test_goal_parameter_tables_match_the_weights():
    assert set(goal.TRIPLET_PARAMS) == set(goal.GOAL_TRIPLETS) and set(goal.PAIR_PARAMS) == set(goal.GOAL_PAIRS)
    objective = inspect.signature(goal.goal_objective).parameters
    for params in (*goal.TRIPLET_PARAMS.values(), *goal.PAIR_PARAMS.values()):
        assert all(p in objective for p in params)  # every listed parameter is a keyword the trainer can pass
    # a parameter not listed for a weight does not change it
    s = torch.linspace(-1, 1, 9, dtype=torch.float64)
    for name in goal.GOAL_TRIPLETS:
        base = goal.triplet_weight(name, s, s.flip(0))
        for p, other in (("margin", 0.7), ("tau", 3.0)):
            moved = goal.triplet_weight(name, s, s.flip(0), **{p: other})
            assert (p in goal.TRIPLET_PARAMS[name]) == (not torch.allclose(moved, base)), (name, p)
    for name in goal.GOAL_PAIRS:
        rel = {"rel": 1.5} if name.endswith("-ms") else {}
        for positive in (True, False):
            base = goal.pair_weight(name, s, positive, **rel)
            for p, other in (("alpha", 5.0), ("beta", 3.0), ("lam", -0.2)):
                moved = goal.pair_weight(name, s, positive, **rel, **{p: other})
                changes = not torch.allclose(moved, base)
                assert changes <= (p in goal.PAIR_PARAMS[name]), (name, p)  # unlisted parameters never matter


def test_cocos_rule_of_each_loss():
    rules = registry.cocos_rules()
    assert set(rules.values()) == set(analysis.COCOS_LOSSES)
    assert set(rules) <= set(registry.names())
    assert rules["triplet_hardest"] == "triplet_sh"


@pytest.mark.parametrize("value, low, high", [(1, 1, None), (np.int64(5), 1, 5), (0, 0, 3)])
def test_check_int_accepts(value, low, high):
    assert check_int("n", value, low, high) == int(value) and type(check_int("n", value, low, high)) is int


@pytest.mark.parametrize("value, exc, match", [(True, TypeError, "n must be an int"), (1.0, TypeError, "n must be"),
                                               ("3", TypeError, "n must"), (0, ValueError, "n must be >= 1"),
                                               (7, ValueError, "n must be >= 1 and <= 5")])
def test_check_int_rejects(value, exc, match):
    with pytest.raises(exc, match=match):
        check_int("n", value, 1, 5 if value == 7 else None)
