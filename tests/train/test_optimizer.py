"""The optimizer: Adam (the default) or AdamW, with a weight decay (issue 33: VSE∞'s recipe).

AdamW is Loshchilov & Hutter's decoupled weight decay ("Decoupled Weight Decay Regularization", ICLR 2019,
Algorithm 2), checked here against a float64 loop written from the paper; at weight decay 0 it is Adam, step for
step. The stacked heads of ``fit_many`` step as the runs alone; a checkpoint resumes only under its optimizer; the
fields stay out of every key at their defaults.
"""
from __future__ import annotations

import math

import pytest
import torch

from vlr_lib.train import TrainSettings, fit, fit_many
from vlr_lib.train.engine import make_optimizer

from .test_batched import SHARED, alone, assert_same_run
from .test_warmup import RUN, WARMUP, feats, strip  # noqa: F401 - feats is a fixture

LR, BETAS, EPS = 1e-2, (0.9, 0.999), 1e-8


def by_hand(p0: torch.Tensor, grads: list[torch.Tensor], lr: float, wd: float, decoupled: bool) -> torch.Tensor:
    """Adam (Kingma & Ba, Algorithm 1) in float64: with `decoupled`, AdamW (Loshchilov & Hutter, Algorithm 2: the
    weights shrink by lr x wd before the step); otherwise Adam's L2 term wd x p added to the gradient."""
    p, m, v = p0.double().clone(), torch.zeros_like(p0, dtype=torch.float64), torch.zeros_like(p0, dtype=torch.float64)
    for t, g in enumerate(grads, 1):
        g = g.double() + (0.0 if decoupled else wd * p)
        if decoupled:
            p = p * (1 - lr * wd)
        m = BETAS[0] * m + (1 - BETAS[0]) * g
        v = BETAS[1] * v + (1 - BETAS[1]) * g * g
        m_hat, v_hat = m / (1 - BETAS[0] ** t), v / (1 - BETAS[1] ** t)
        p = p - lr * m_hat / (v_hat.sqrt() + EPS)
    return p


@pytest.mark.parametrize("optimizer, wd", [("adamw", 0.1), ("adamw", 0.0), ("adam", 0.1), ("adam", 0.0)])
def test_the_optimizer_steps_as_the_paper_by_hand(optimizer, wd):
    gen = torch.Generator().manual_seed(0)
    p0 = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    grads = [torch.randn(5, 3, generator=gen, dtype=torch.float64) for _ in range(6)]
    param = torch.nn.Parameter(p0.clone())
    opt = make_optimizer([param], TrainSettings(lr=LR, optimizer=optimizer, weight_decay=wd))
    assert isinstance(opt, torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam)
    for g in grads:
        param.grad = g.clone()
        opt.step()
    torch.testing.assert_close(param.detach(), by_hand(p0, grads, LR, wd, optimizer == "adamw"), rtol=1e-12,
                               atol=1e-12)


def test_decoupled_decay_is_not_adams_l2_term():
    gen = torch.Generator().manual_seed(1)
    p0, grads = torch.randn(4, generator=gen), [torch.randn(4, generator=gen) for _ in range(3)]
    assert not torch.allclose(by_hand(p0, grads, LR, 0.1, True), by_hand(p0, grads, LR, 0.1, False))


def test_adamw_at_weight_decay_0_is_adam_step_for_step(feats):
    adam = fit(*feats, WARMUP, val=feats, optimizer_at_switch="carry", **RUN)
    adamw = fit(*feats, WARMUP, val=feats, optimizer_at_switch="carry", optimizer="adamw", weight_decay=0.0, **RUN)
    assert strip(adamw.history) == strip(adam.history)
    for a, b in ((adam.img_head, adamw.img_head), (adam.txt_head, adamw.txt_head)):
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(pa, pb)


def test_the_trainer_decays_with_adamw(feats, tmp_path):
    """The run's optimizer is the settings' (its checkpoint holds AdamW's weight decay), and the decay shrinks
    the heads."""
    plain = fit(*feats, WARMUP, val=feats, optimizer="adamw", **RUN)
    decayed = fit(*feats, WARMUP, val=feats, optimizer="adamw", weight_decay=5.0, checkpoint_dir=tmp_path, **RUN)
    assert strip(decayed.history) != strip(plain.history)
    norm = lambda r: math.sqrt(sum(float(p.detach().square().sum()) for p in r.img_head.parameters()))  # noqa: E731
    assert norm(decayed) < norm(plain)
    state = torch.load(tmp_path / "last.pt", weights_only=False)
    assert [g["weight_decay"] for g in state["optimizer"]["param_groups"]] == [5.0]
    assert decayed.config["optimizer"] == "adamw" and decayed.config["weight_decay"] == 5.0


def test_batched_adamw_runs_equal_the_runs_alone():
    runs = [dict(loss=WARMUP, seed=3), dict(loss="info_nce", seed=4)]
    shared = dict(optimizer="adamw", weight_decay=1e-2, optimizer_at_switch="carry", grad_clip=0.5)
    for run, result in zip(runs, fit_many(runs, **{**SHARED, **shared}), strict=True):
        assert_same_run(alone(run, **shared), result)


def test_a_resume_under_another_optimizer_is_refused_by_name(feats, tmp_path):
    fit(*feats, WARMUP, val=feats, **{**RUN, "epochs": 2}, checkpoint_dir=tmp_path)
    for other in (dict(optimizer="adamw"), dict(weight_decay=1e-4)):
        with pytest.raises(ValueError, match=f"differs in .*{next(iter(other))}"):
            fit(*feats, WARMUP, val=feats, **RUN, checkpoint_dir=tmp_path, **other)


def test_the_defaults_stay_out_of_every_key():
    """Keys made before the optimizer was a setting (cells, checkpoints, records) are the keys of its defaults."""
    assert "optimizer" not in TrainSettings().experiment() and "weight_decay" not in TrainSettings().experiment()
    assert TrainSettings(optimizer="adam", weight_decay=0).experiment() == TrainSettings().experiment()
    assert TrainSettings(optimizer="adamw").experiment()["optimizer"] == "adamw"
    assert TrainSettings(weight_decay=1e-4).experiment()["weight_decay"] == 1e-4


@pytest.mark.parametrize("kw, error, match", [
    ({"optimizer": "sgd"}, ValueError, "optimizer must be one of"),
    ({"weight_decay": -1.0}, ValueError, "weight_decay must be a finite number >= 0"),
    ({"weight_decay": float("nan")}, ValueError, "weight_decay must be a finite number >= 0"),
    ({"weight_decay": True}, TypeError, "weight_decay must be a number"),
])
def test_bad_optimizer_settings_name_the_field(kw, error, match):
    with pytest.raises(error, match=match):
        TrainSettings(**kw)
