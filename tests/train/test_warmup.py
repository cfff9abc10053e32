"""Loss schedules ("warmup:<first>:<epochs>:<then>"): the epoch's loss, names, parameters, grid cells, resume."""
from __future__ import annotations

import pytest
import torch

from vlr_lib import losses as L
from vlr_lib import registry
from vlr_lib.report.labels import hyperparameters
from vlr_lib.train import fit, make_objective
from vlr_lib.experiments import grid

TIME_KEYS = ("seconds", "train_seconds")
WARMUP = "warmup:triplet_all:1:triplet_hardest"


def strip(history):
    return [{k: v for k, v in r.items() if k not in TIME_KEYS and k != "cocos"} for r in history]


@pytest.fixture(scope="module")
def feats():
    g = torch.Generator().manual_seed(1)
    img = torch.randn(40, 16, generator=g)
    c2i = torch.arange(40).repeat_interleave(5)
    txt = img[c2i] @ torch.randn(16, 16, generator=g) + 0.5 * torch.randn(200, 16, generator=g)
    return img, txt, c2i


RUN = dict(dim=8, epochs=3, batch_size=20, lr=1e-2, progress=False)


def test_the_objective_of_each_epoch():
    obj = make_objective(WARMUP, {"margin": 0.1})
    assert [obj.at_epoch(e).name for e in range(4)] == ["triplet_all", "triplet_hardest", "triplet_hardest",
                                                       "triplet_hardest"]
    assert obj.at_epoch(0).kwargs == obj.at_epoch(1).kwargs == {"margin": 0.1}
    S = torch.randn(6, 6, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(obj.at_epoch(0)(S), L.triplet_all(S, 0.1))
    torch.testing.assert_close(obj.at_epoch(2)(S), L.triplet_hardest(S, 0.1))
    plain = make_objective("info_nce")
    assert plain.at_epoch(7) is plain
    with pytest.raises(TypeError, match="loss schedule.*at_epoch"):
        obj(S)
    mixed = make_objective("warmup:info_nce:2:unified", {"temperature": 0.05, "gamma": 30.0})
    assert mixed.at_epoch(0).kwargs == {"temperature": 0.05} and mixed.at_epoch(2).kwargs == {"gamma": 30.0}


@pytest.mark.parametrize("name, phases", [
    ("warmup:triplet_all:1:goal:cir,sig-ms", ("triplet_all", 1, "goal:cir,sig-ms")),  # issue 23
    ("warmup:goal:cir,sig-ms:2:triplet_hardest", ("goal:cir,sig-ms", 2, "triplet_hardest")),
    ("warmup:goal:cir,sig-ms:1:goal:nca,lin", ("goal:cir,sig-ms", 1, "goal:nca,lin")),
])
def test_a_goal_combination_is_a_phase(name, phases):
    assert tuple(registry.schedule(name)) == phases
    make_objective(name).check(8)


@pytest.mark.parametrize("name, match", [
    ("warmup:triplet_all:0:triplet_hardest", "epochs >= 1"),
    ("warmup:triplet_all:x:triplet_hardest", "must look like"),
    ("warmup:triplet_all:triplet_hardest", "must look like"),
    ("warmup:nope:1:triplet_hardest", "'nope' is not a registered loss"),
    ("warmup:triplet_all:1:warmup:a:1:b", "must look like"),
    ("warmup:triplet_all:1:goal:cir", "must look like .goal:<triplet>,<pair>."),  # its pair missing
])
def test_bad_schedule_names_are_errors(name, match):
    with pytest.raises(ValueError, match=match):
        make_objective(name)


def test_unknown_parameters_name_the_schedule():
    with pytest.raises(ValueError, match=r"loss_kwargs has \['gamma'\] which loss 'warmup:.*' does not take"):
        make_objective(WARMUP, {"gamma": 10.0})
    with pytest.raises(ValueError, match="margin"):
        make_objective(WARMUP, {"margin": float("nan")}).check(8)


def test_training_switches_loss_after_the_warm_up(feats):
    warm = fit(*feats, WARMUP, val=feats, **RUN)
    first = fit(*feats, "triplet_all", val=feats, **RUN)
    hardest = fit(*feats, "triplet_hardest", val=feats, **RUN)
    assert strip(warm.history)[0] == strip(first.history)[0]  # epoch 1: Triplet (all), the same run
    assert warm.history[1]["loss"] != first.history[1]["loss"]  # then the hardest negative
    assert warm.history[1]["loss"] < first.history[1]["loss"]  # one hinge per query instead of a sum of them
    # The same loss in both phases: with Adam's state carried over it is the one-loss run, step for step ...
    same = fit(*feats, "warmup:triplet_hardest:1:triplet_hardest", val=feats, optimizer_at_switch="carry", **RUN)
    assert strip(same.history) == strip(hardest.history)
    # ... and by default the switch starts a fresh Adam, so epoch 2 differs from the one-loss run
    fresh = fit(*feats, "warmup:triplet_hardest:1:triplet_hardest", val=feats, **RUN)
    assert strip(fresh.history)[0] == strip(hardest.history)[0]
    assert fresh.history[1]["loss"] != hardest.history[1]["loss"]


def test_a_schedule_must_switch_inside_the_run(feats):
    with pytest.raises(ValueError, match=r"epochs is 3 but the loss schedule .* switches after 5 epoch"):
        fit(*feats, "warmup:triplet_all:5:triplet_hardest", val=feats, **RUN)


def test_adams_state_is_what_a_fresh_switch_resets(feats):
    """Carried or fresh, the warm-up epoch is the same run; after the switch only Adam's state differs."""
    carry = fit(*feats, WARMUP, val=feats, optimizer_at_switch="carry", **RUN)
    fresh = fit(*feats, WARMUP, val=feats, **RUN)
    assert strip(carry.history)[0] == strip(fresh.history)[0]
    assert carry.history[1]["loss"] != fresh.history[1]["loss"]


def test_a_resumed_run_keeps_the_schedule(feats, tmp_path):
    whole = fit(*feats, WARMUP, val=feats, **RUN)

    def stop(record, result):
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(*feats, WARMUP, val=feats, checkpoint_dir=tmp_path, callbacks=[stop], **RUN)
    assert strip(fit(*feats, WARMUP, val=feats, checkpoint_dir=tmp_path, **RUN).history) == strip(whole.history)


def test_names_and_parameters_in_reports_and_grid_cells(feats, tmp_path):
    assert registry.label(WARMUP) == "Triplet → Triplet-SH after 1 epoch"
    assert registry.label("warmup:triplet_all:2:unified") == "Triplet → Unified after 2 epochs"
    assert registry.parameters("warmup:info_nce:1:unified") == ("temperature", "reduction", "margin", "gamma")
    assert hyperparameters(WARMUP, {"margin": 0.3}) == "margin=0.3"
    kw = dict(train=feats, val=feats, out=tmp_path, **{k: v for k, v in RUN.items() if k != "progress"},
              progress=False)
    done = grid([WARMUP, "triplet_hardest"], {"margin": [0.1]}, seeds=[0, 1], **kw)
    assert len(done.runs) == 4 and set(done.summary["name"]) == {"Triplet → Triplet-SH after 1 epoch", "Triplet-SH"}
    assert grid([WARMUP], {"margin": [0.1]}, seeds=[0, 1], callbacks=pytest.fail, **kw).runs["key"].tolist() == \
        done.runs["key"].tolist()[:2]  # cached like any loss: nothing retrained
