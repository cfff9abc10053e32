"""The small shared facts of vlr_lib, written once: loss names and their glossary, GOAL's parameter tables,
COCOS rules, the one integer check."""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

from vlr_lib import analysis, goal, losses
from vlr_lib._checks import check_int

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_every_loss_has_one_label_and_its_other_names():
    assert set(losses.LOSS_LABELS) == set(losses.LOSSES) == set(losses.ALSO_KNOWN_AS)
    assert len(set(losses.LOSS_LABELS.values())) == len(losses.LOSS_LABELS)  # one name each, no two alike
    for name, label in losses.LOSS_LABELS.items():
        assert losses.loss_label(name) == label
        assert losses.ALSO_KNOWN_AS[name] and all(isinstance(a, str) and a for a in losses.ALSO_KNOWN_AS[name])
    assert losses.loss_label("triplet_hardest") == "Triplet-SH" and losses.loss_label("info_nce") == "NT-Xent"


def test_goal_labels_and_bad_names():
    assert losses.loss_label("goal:cir,sig-ms") == "GOAL (cir, sig-ms)"
    assert losses.loss_label("goal: nca , con") == "GOAL (nca, con)"
    assert goal.GoalConfig("cir", "sig-ms").label == "GOAL (cir, sig-ms)"
    for bad in ("vse++", "", "Triplet-SH"):
        with pytest.raises(ValueError, match="^name"):
            losses.loss_label(bad)


def test_glossary_in_the_docs_lists_every_name():
    """docs/architecture.md's glossary has a row per loss with its label, its function and every other name."""
    rows = {line.split("|")[2].strip(" `"): line for line in ARCHITECTURE.read_text().splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    for name, label in losses.LOSS_LABELS.items():
        row = rows[name]
        assert row.split("|")[1].strip() == label
        assert all(alias in row for alias in losses.ALSO_KNOWN_AS[name]), name


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
    assert set(analysis.COCOS_RULE_OF_LOSS.values()) == set(analysis.COCOS_LOSSES)
    assert set(analysis.COCOS_RULE_OF_LOSS) <= set(losses.LOSSES)
    assert analysis.COCOS_RULE_OF_LOSS["triplet_hardest"] == "triplet_sh"


@pytest.mark.parametrize("value, low, high", [(1, 1, None), (np.int64(5), 1, 5), (0, 0, 3)])
def test_check_int_accepts(value, low, high):
    assert check_int("n", value, low, high) == int(value) and type(check_int("n", value, low, high)) is int


@pytest.mark.parametrize("value, exc, match", [(True, TypeError, "n must be an int"), (1.0, TypeError, "n must be"),
                                               ("3", TypeError, "n must"), (0, ValueError, "n must be >= 1"),
                                               (7, ValueError, "n must be >= 1 and <= 5")])
def test_check_int_rejects(value, exc, match):
    with pytest.raises(exc, match=match):
        check_int("n", value, 1, 5 if value == 7 else None)
