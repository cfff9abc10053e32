"""Objectives that own parameters (a learned temperature, a bias): optimised with the models, clamped after every
step as open_clip clamps ``logit_scale``, reported per epoch, checkpointed and restored on resume.

A loss with a learned log-scale is registered here for the test (``registry._ENTRIES`` patched): NT-Xent at the scale
exp(logit_scale), written with plain torch so that the machinery, not a loss, is under test."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.train import test_train as T
from tests.train.toy import toy_features
from vlr_lib import registry
from vlr_lib.loss_entry import REDUCTION, Hyper, LossEntry
from vlr_lib.train import build_objective, checkpoint as ck, fit

CLAMP = math.log(100.0)


def learned_nt_xent(S, logit_scale, reduction="mean", pos_mask=None):
    """Cross-entropy of exp(logit_scale) * S over rows and columns, the diagonal positive (a test loss).

    Derived in notebooks/03_contrastive.py."""
    logits = logit_scale.exp() * S
    labels = torch.arange(S.shape[0], device=S.device)
    both = F.cross_entropy(logits, labels, reduction="sum") + F.cross_entropy(logits.T, labels, reduction="sum")
    return both / S.shape[0] if reduction == "mean" else both


ENTRY = LossEntry("learned_nt_xent", learned_nt_xent, "learned NT-Xent", ("a test loss",),
                  {"logit_scale": Hyper(low=0.0, high=CLAMP, learned=True, init=math.log(1 / 0.07)),
                   "reduction": REDUCTION})


@pytest.fixture
def learned_loss(monkeypatch):
    monkeypatch.setitem(registry._ENTRIES, ENTRY.name, ENTRY)
    return ENTRY.name


@pytest.fixture(scope="module")
def feats():
    return toy_features(32, 2, 16)


def run(feats, **kw):
    args = dict(dim=8, epochs=2, batch_size=16, lr=5e-2, val=feats, progress=False)
    return fit(*feats, **{**args, **kw})


def test_the_objective_owns_its_learned_parameter(learned_loss):
    objective = build_objective(learned_loss, batch_size=8, epochs=1)
    assert objective.learned() == {"logit_scale": (math.log(1 / 0.07), 0.0, CLAMP)}
    module = objective.parameters_module()
    assert [name for name, _ in module.named_parameters()] == ["values.logit_scale"]
    assert build_objective("info_nce", batch_size=8, epochs=1).parameters_module().readout() == {}


def test_an_initial_value_outside_the_clamp_is_refused_by_name(learned_loss):
    with pytest.raises(ValueError, match=r"logit_scale must start within its clamp"):
        build_objective(learned_loss, {"logit_scale": 5.0}, batch_size=8, epochs=1)


def test_the_learned_parameter_trains_and_is_reported_per_epoch(learned_loss, feats):
    res = run(feats, loss=learned_loss, epochs=3)
    path = [r["learned"]["logit_scale"] for r in res.history]
    assert len(path) == 3 and all(0.0 <= v <= CLAMP for v in path)
    assert path[0] != pytest.approx(math.log(1 / 0.07), abs=1e-6)  # it moved: Adam saw it
    assert "learned" not in run(feats, loss="info_nce", epochs=1).history[0]


def test_the_clamp_holds_after_every_step(learned_loss, feats):
    """Started at the clamp with a large step, the scale would leave [0, log 100]; it is put back every step."""
    res = run(feats, loss=learned_loss, loss_kwargs={"logit_scale": CLAMP}, lr=1.0, epochs=2)
    assert all(0.0 <= r["learned"]["logit_scale"] <= CLAMP + 1e-6 for r in res.history)


def test_resume_restores_the_learned_parameter(learned_loss, feats, tmp_path):
    full = run(feats, loss=learned_loss, epochs=3)
    with pytest.raises(KeyboardInterrupt):
        run(feats, loss=learned_loss, epochs=3, checkpoint_dir=tmp_path, callbacks=T.Interrupt(after_epoch=2))
    state = ck.load_checkpoint(tmp_path / ck.CHECKPOINT_NAME)
    assert set(state["objective"]) == {"values.logit_scale"}
    resumed = run(feats, loss=learned_loss, epochs=3, checkpoint_dir=tmp_path)
    assert T.strip_time(resumed.history) == T.strip_time(full.history)


def test_a_checkpoint_without_the_learned_parameter_is_refused_by_name(learned_loss, feats, tmp_path):
    run(feats, loss=learned_loss, epochs=1, checkpoint_dir=tmp_path)
    path = tmp_path / ck.CHECKPOINT_NAME
    state = ck.load_checkpoint(path)
    del state["objective"]
    ck.save_checkpoint(path, state)
    with pytest.raises(ValueError, match="lacks the learned parameters of 'learned_nt_xent' \\(logit_scale\\)"):
        run(feats, loss=learned_loss, epochs=2, checkpoint_dir=tmp_path)


def test_the_registered_practice_losses_train_their_scale_and_bias(feats):
    """CLIP's learned temperature and SigLIP's scale and bias, through the registry and the trainer."""
    assert set(registry.entry("siglip").learned()) == {"logit_scale", "logit_bias"}
    clip = run(feats, loss="clip_learned", epochs=2)
    siglip = run(feats, loss="siglip", epochs=2, loss_kwargs={"logit_bias": -5.0})
    assert set(clip.history[-1]["learned"]) == {"logit_scale"}
    assert set(siglip.history[-1]["learned"]) == {"logit_scale", "logit_bias"}
    assert siglip.history[0]["learned"]["logit_bias"] != pytest.approx(-5.0, abs=1e-6)  # trained from -5
    assert all(math.isfinite(r["rsum"]) for r in clip.history + siglip.history)
