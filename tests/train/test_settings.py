"""TrainSettings (one settings object for fit and fit_end_to_end) and the one device parser."""
from __future__ import annotations

import pytest
import torch

from vlr_lib.report.labels import SETTING_COLUMNS
from vlr_lib.train import TrainSettings, fit
from vlr_lib.train.device import parse_device
from vlr_lib.experiments.grid_search import FIT_KEYS, MODEL_KEYS
from vlr_lib.train.settings import EXPERIMENT_FIELDS, RUN, fields, preset, run_defaults

from .toy import toy_features


@pytest.fixture(scope="module")
def feats():
    return toy_features(24, 2, 8)


def test_keywords_and_a_settings_object_are_the_same_run(feats):
    a = fit(*feats, "info_nce", dim=4, epochs=2, batch_size=8, lr=1e-2, val=feats, progress=False)
    s = TrainSettings(epochs=2, batch_size=8, lr=1e-2, progress=False)
    b = fit(*feats, "info_nce", dim=4, val=feats, settings=s)
    c = fit(*feats, "info_nce", dim=4, val=feats, settings=s.replace(epochs=1), epochs=2)  # keywords win
    for other in (b, c):
        assert [r["rsum"] for r in other.history] == [r["rsum"] for r in a.history]
        assert [r["loss"] for r in other.history] == [r["loss"] for r in a.history]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"epochs": 0}, ValueError, "^epochs"),
    ({"epochs": 2.0}, TypeError, "^epochs"),
    ({"batch_size": 1}, ValueError, "^batch_size"),
    ({"lr": 0.0}, ValueError, "^lr"),
    ({"lr_decay_epoch": -1}, ValueError, "^lr_decay_epoch"),
    ({"sampling": "random"}, ValueError, "^sampling"),
    ({"probe_batch": 1}, ValueError, "^probe_batch"),
    ({"seed": -1}, ValueError, "^seed"),
    ({"device": "bogus"}, ValueError, "^device"),
    ({"callbacks": [1]}, TypeError, "^callbacks"),
    ({"progress": "yes"}, TypeError, "^progress"),
])
def test_settings_are_validated_once_when_made(kwargs, error, match):
    with pytest.raises(error, match=match):
        TrainSettings(**kwargs)


def test_unknown_keywords_and_data_dependent_checks(feats):
    with pytest.raises(TypeError, match="epoch"):
        TrainSettings().replace(epoch=3)
    with pytest.raises(TypeError, match="epoch"):
        fit(*feats, epoch=3, progress=False)
    with pytest.raises(ValueError, match=r"^batch_size must be at most the number of training images \(24\)"):
        TrainSettings(batch_size=32).resolve(24)
    with pytest.raises(ValueError, match="divisible by the number of processes"):
        TrainSettings(batch_size=9).resolve(24, world=2)
    r = TrainSettings(epochs=5, batch_size=8).resolve(24)
    assert (r.lr_decay_epoch, r.probe_batch) == (2, 8)  # halfway; the batch size


def test_mode_defaults_and_the_grid_keys_come_from_one_place():
    e2e = {k: v for k, v in RUN["e2e"].items() if k != "dim"}
    assert TrainSettings.end_to_end().experiment() == {**TrainSettings().experiment(), **e2e}
    assert set(FIT_KEYS) == (set(EXPERIMENT_FIELDS) - {"seed"}) | set(MODEL_KEYS)
    assert FIT_KEYS == SETTING_COLUMNS and set(EXPERIMENT_FIELDS) <= set(fields())


def test_one_home_for_the_defaults():
    """One run's defaults and the experiments' presets: the vsepp setting runs its preset (decayed halfway), fast
    mode only shrinks, and an unknown data set and setting is named."""
    for data in ("shapes", "flickr30k"):
        assert run_defaults(data, "vsepp") == {**preset(data, "vsepp"), "lr_decay_epoch": None}
        assert run_defaults(data, "features")["dim"] == fit.__kwdefaults__["dim"] == 512
    assert run_defaults("shapes", "e2e")["epochs"] == 20 and preset("shapes", "e2e")["epochs"] == 40
    for setting in ("features", "vsepp", "e2e"):
        full, fast = preset("shapes", setting), preset("shapes", setting, fast=True)
        assert fast["epochs"] < full["epochs"] and fast["dim"] <= full["dim"]
    with pytest.raises(ValueError, match="no preset for data 'flickr30k' in setting 'e2e'"):
        preset("flickr30k", "e2e")


@pytest.mark.parametrize("text", ["bogus", "gpu", "cuda:x", "", "tpu"])
def test_bad_devices_are_named(text):
    with pytest.raises(ValueError, match="--device must be cpu, cuda, cuda:N or mps"):
        parse_device(text, "--device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_an_error_here_not_during_training():
    with pytest.raises(ValueError, match="no CUDA device is available"):
        parse_device("cuda:0")
    assert parse_device(" CPU ") == torch.device("cpu")


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf")])
def test_grad_clip_must_be_a_positive_number(value):
    with pytest.raises(ValueError, match="grad_clip"):
        TrainSettings(grad_clip=value)


def test_optimizer_at_switch_is_fresh_or_carry():
    assert TrainSettings().optimizer_at_switch == "fresh"
    with pytest.raises(ValueError, match="optimizer_at_switch must be one of"):
        TrainSettings(optimizer_at_switch="reset")
