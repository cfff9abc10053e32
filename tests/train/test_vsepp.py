"""The VSE++ setting (fit_vsepp), end to end on tensors (fit_encoders), and the grid's three settings."""
from __future__ import annotations

import json

import pytest
import torch

from vlr_lib import metrics
from vlr_lib.data import make_shapes
from vlr_lib.models import LinearHead, TextBag, TextGRU, make_text_encoder
from vlr_lib.train import caption_ids, fit_end_to_end, fit_vsepp, shapes_inputs
from vlr_lib.experiments import grid
from vlr_lib.train.end_to_end import fit_encoders

TIME_KEYS = ("seconds", "train_seconds")
SMALL = dict(dim=16, word_dim=8, hidden=16, epochs=2, batch_size=10, lr=3e-3, progress=False)


def strip(history):
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in history]


@pytest.fixture(scope="module")
def dd():
    return make_shapes(20, 10, 10, seed=4)


@pytest.fixture(scope="module")
def texts(dd):
    return {s: [c for five in dd[s]["caption"] for c in five] for s in dd}


@pytest.fixture(scope="module")
def vsepp(dd):
    return shapes_inputs(dd, "vsepp")


def test_trains_a_head_on_features_and_a_gru_on_the_words(vsepp):
    inputs, vocab = vsepp
    result = fit_vsepp(*inputs["train"], "info_nce", val=inputs["validation"], **SMALL)
    assert isinstance(result.img_head, LinearHead) and isinstance(result.txt_head, TextGRU)
    assert result.txt_head.embed.num_embeddings == len(vocab)
    assert result.config["mode"] == "vsepp" and result.config["vocab_size"] == len(vocab)
    assert [r["epoch"] for r in result.history] == [1, 2] and result.history[-1]["rsum"] > 0
    assert result.extras["chance_rsum"] == metrics.chance_rsum(inputs["validation"][2])
    before = result.txt_head.embed.weight.clone()
    again = fit_vsepp(*inputs["train"], "info_nce", val=inputs["validation"], **SMALL)
    assert strip(again.history) == strip(result.history)  # deterministic on the CPU
    assert torch.equal(again.txt_head.embed.weight, before)


def test_texts_are_tokenised_with_the_training_vocabulary(vsepp, texts):
    inputs, vocab = vsepp
    c2i = {s: inputs[s][2] for s in inputs}
    from_texts = fit_vsepp(inputs["train"][0], texts["train"], c2i["train"], "triplet_hardest",
                           val=(inputs["validation"][0], texts["validation"], c2i["validation"]), **SMALL)
    from_ids = fit_vsepp(*inputs["train"], "triplet_hardest", val=inputs["validation"], **SMALL)
    assert strip(from_texts.history) == strip(from_ids.history)
    assert from_texts.extras["vocab"].itos == vocab.itos and from_ids.extras["vocab"] is None
    ids, v = caption_ids({"train": ["a red circle", "a red square"], "validation": ["a blue circle"]})
    assert v.itos[2:] == ["a", "red", "circle", "square"] and ids["validation"].tolist() == [[2, 1, 4]]  # blue: unk
    rare, v4 = caption_ids({"train": ["a b", "a c"]}, min_count=2)
    assert v4.itos == ["<pad>", "<unk>", "a"] and rare["train"].tolist() == [[2, 1], [2, 1]]


def test_caption_features_are_a_clear_error_naming_the_argument(dd):
    feats, _ = shapes_inputs(dd, "features", splits=("train", "validation"))
    with pytest.raises(ValueError, match=r"^captions must be the captions .* VSE\+\+ setting.*features"):
        fit_vsepp(*feats["train"], "info_nce", **SMALL)
    inputs, _ = shapes_inputs(dd, "vsepp", splits=("train", "validation"))
    with pytest.raises(ValueError, match=r"^val captions must be the captions"):
        fit_vsepp(*inputs["train"], "info_nce", val=feats["validation"], **SMALL)


@pytest.mark.parametrize("change, exc, match", [
    (lambda t: (t[0], t[1].float() * 0 + 1.5, t[2]), ValueError, "captions must be the captions"),
    (lambda t: (t[0], t[1][:, :0], t[2]), ValueError, "token ids must be an integer tensor"),
    (lambda t: (t[0], -t[1], t[2]), ValueError, "token ids must be >= 0"),
    (lambda t: (t[0], 7, t[2]), TypeError, "captions must be a list of caption strings"),
    (lambda t: (t[0], ["x"] * 3, t[2]), ValueError, "caption_to_image must be 1-D with one entry per caption"),
    (lambda t: (t[0][:, :5].T, t[1], t[2]), ValueError, "caption_to_image values must lie in"),
    (lambda t: (t[0][0], t[1], t[2]), ValueError, "img_feats must be a 2-D tensor"),
])
def test_bad_inputs_name_the_argument(vsepp, change, exc, match):
    with pytest.raises(exc, match=match):
        fit_vsepp(*change(vsepp[0]["train"]), "info_nce", **SMALL)


def test_bad_model_arguments(vsepp):
    train = vsepp[0]["train"]
    with pytest.raises(ValueError, match="text_encoder must be one of"):
        fit_vsepp(*train, text_encoder="lstm", **SMALL)
    with pytest.raises(ValueError, match="hidden is a size of the GRU"):
        fit_vsepp(*train, text_encoder="bag", **SMALL)
    bag = fit_vsepp(*train, text_encoder="bag", **{**SMALL, "hidden": None, "epochs": 1})
    assert isinstance(bag.txt_head, TextBag) and bag.config["hidden"] is None
    assert isinstance(make_text_encoder("gru", 5, 4), TextGRU)
    with pytest.raises(ValueError, match="head must be one of"):
        fit_vsepp(*train, head="conv", **SMALL)
    with pytest.raises(ValueError, match="min_count"):
        fit_vsepp(train[0], ["a"] * train[1].shape[0], train[2], min_count=0, **SMALL)


def test_resume_after_interrupt_equals_uninterrupted_run(vsepp, tmp_path):
    train, val = vsepp[0]["train"], vsepp[0]["validation"]
    whole = fit_vsepp(*train, "unified", val=val, **{**SMALL, "epochs": 3})

    def stop(record, result):
        if record["epoch"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit_vsepp(*train, "unified", val=val, checkpoint_dir=tmp_path, callbacks=[stop], **{**SMALL, "epochs": 3})
    resumed = fit_vsepp(*train, "unified", val=val, checkpoint_dir=tmp_path, **{**SMALL, "epochs": 3})
    assert strip(resumed.history) == strip(whole.history)


def test_end_to_end_on_tensors_is_fit_end_to_end(dd):
    e2e, vocab = shapes_inputs(dd, "e2e", splits=("train", "validation"))
    kw = dict(dim=8, width=4, epochs=2, batch_size=10, progress=False)
    on_tensors = fit_encoders(*e2e["train"], "info_nce", val=e2e["validation"], **kw)
    on_dataset = fit_end_to_end(dd, "info_nce", **kw)
    assert strip(on_tensors.history) == strip(on_dataset.history)
    assert on_dataset.extras["vocab"].itos == vocab.itos
    with pytest.raises(ValueError, match="images must be a 4-D tensor"):
        fit_encoders(e2e["train"][0][0], *e2e["train"][1:], **kw)


# --------------------------------------------------------------------------- the grid's settings


def test_grid_trains_each_setting_and_names_it_in_cells_and_rows(dd, tmp_path):
    settings = dict(epochs=1, batch_size=10, lr=3e-3, dim=8, progress=False)
    done = {}
    for setting in ("features", "vsepp", "e2e"):
        inputs, _ = shapes_inputs(dd, setting, splits=("train", "validation"))
        extra = {"word_dim": 8, "hidden": 8} if setting == "vsepp" else {}
        out = tmp_path / setting
        done[setting] = grid(["info_nce"], train=inputs["train"], val=inputs["validation"], out=out,
                             **settings, **extra)
        cell = json.loads(next((out / "cells").glob("*.json")).read_text())
        assert cell["settings"]["setting"] == setting
        assert done[setting].runs["setting"].tolist() == [setting]
    assert done["e2e"].runs["sampling"].tolist() == ["images"]  # the e2e defaults fill what is not given
    assert done["features"].runs["sampling"].tolist() == ["captions"]


def test_grid_refuses_a_setting_its_data_cannot_serve(dd):
    feats, _ = shapes_inputs(dd, "features", splits=("train",))
    ids, _ = shapes_inputs(dd, "vsepp", splits=("train",))
    with pytest.raises(ValueError, match="setting 'vsepp' trains a text encoder on the captions' words, but train "
                                         "holds caption features"):
        grid(["info_nce"], train=feats["train"], setting="vsepp", progress=False)
    with pytest.raises(ValueError, match="setting 'features' trains heads on caption features"):
        grid(["info_nce"], train=ids["train"], setting="features", progress=False)
    with pytest.raises(ValueError, match="dataset= .* is for setting 'e2e'"):
        grid(["info_nce"], dataset=dd, setting="vsepp", progress=False)
    with pytest.raises(ValueError, match="setting must be one of"):
        grid(["info_nce"], dataset=dd, setting="clip", progress=False)
