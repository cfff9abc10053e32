"""The objective is built and checked once, where the call is read (``build_objective``), and passed down."""
from __future__ import annotations

import pytest

from vlr_lib.train import Objective, build_objective, fit
from vlr_lib.experiments import grid
from vlr_lib.train import objective as O

from .toy import toy_features

RUN = dict(dim=4, epochs=2, batch_size=8, progress=False)


@pytest.fixture
def checks(monkeypatch):
    """The number of times an objective is evaluated on a random batch (``Objective.check``)."""
    calls = []
    real = Objective.check
    monkeypatch.setattr(Objective, "check", lambda self, batch_size: calls.append(self.name) or real(self, batch_size))
    return calls


@pytest.fixture(scope="module")
def feats():
    return toy_features(16, 2, 6)


def test_a_built_objective_is_trained_as_it_is(feats, checks):
    objective = build_objective("unified", {"margin": 0.2}, batch_size=8, epochs=2)
    assert checks == ["unified"]
    built = fit(*feats, objective, val=feats, **RUN)
    assert checks == ["unified"]  # the trainer checks it no more
    named = fit(*feats, "unified", {"margin": 0.2}, val=feats, **RUN)
    assert checks == ["unified", "unified"]  # a name is built and checked once, in fit
    assert [r["loss"] for r in built.history] == [r["loss"] for r in named.history]
    with pytest.raises(TypeError, match="^loss_kwargs must be empty when loss is an Objective"):
        fit(*feats, objective, {"margin": 0.1}, **RUN)


def test_the_builder_checks_values_and_schedules_before_training():
    with pytest.raises(ValueError, match="^margin"):
        build_objective("unified", {"margin": -1.0}, batch_size=8, epochs=2)
    with pytest.raises(ValueError, match="switches after 2 epoch"):
        build_objective("warmup:triplet_all:2:triplet_hardest", batch_size=8, epochs=2)
    assert O.build_objective("warmup:triplet_all:1:triplet_hardest", batch_size=8, epochs=2).switches() == (1,)


def test_a_grid_checks_each_configuration_once(feats, checks):
    grid(["info_nce", "triplet_all"], seeds=[0, 1], train=feats, val=feats, **RUN)
    assert sorted(checks) == ["info_nce", "triplet_all"]
