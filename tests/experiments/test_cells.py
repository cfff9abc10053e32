"""vlr_lib.experiments.cells, the cell runner the showdown, the tuned comparison and the lessons share: the spec of
each setting, the data of each mode (a tiny shapes set, a fake Flickr30K feature cache in the layout that
data_scripts/extract_features.py writes), and the callback that measures the test split and COCOS per epoch."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from vlr_lib import analysis, metrics
from vlr_lib.experiments import cells


def tiny_spec(**kw):
    base = dict(n_train=24, n_val=12, n_test=12, epochs=2, batch_size=12, dim=8, seeds=(0,), probe=12)
    return cells.spec_for("shapes", True, **{**base, **kw})


def test_callback_records_test_metrics_cocos_and_the_selected_epoch():
    from vlr_lib.train import fit

    spec = tiny_spec(epochs=3)
    data = cells.load_data(spec)
    probe = cells.probe_batch(data.train, spec.probe)
    cb = cells.ShowdownMetrics(data.test, probe)
    with cells.cpu_threads(1):
        result = fit(*data.train, loss="info_nce", val=data.val, settings=spec.settings(), callbacks=[cb],
                     **spec.model())
    h = result.history
    assert cb.trained == 3 and all("test" in r and "probe_cocos" in r for r in h)
    S = result.similarity(data.test[0], data.test[1])  # the final heads
    last = h[-1]["test"]
    assert last["rsum"] == pytest.approx(metrics.retrieval_metrics(S, data.test[2])["rsum"])
    assert last["map5"] == pytest.approx(metrics.map_at_k(S, data.test[2], 5))
    assert last["pr_auc"] == pytest.approx(metrics.pr_auc(S, data.test[2]))
    table = analysis.cocos_table(result.similarity(*probe)).set_index(["loss", "direction"])
    assert h[-1]["probe_cocos"]["nt_xent_t2i"]["W_pos"] == pytest.approx(table.loc[("nt_xent", "t2i"), "W_pos"])
    best = max(range(3), key=lambda e: (h[e]["rsum"], -e))  # earliest best validation rsum
    assert h[-1]["sel"]["epoch"] == best + 1
    assert h[-1]["sel"]["rsum"] == h[best]["test"]["rsum"]
    assert h[-1]["sel"]["cocos"] == h[best]["probe_cocos"]
    # the probe is the same batch for every run: distinct images, one caption each
    again = cells.probe_batch(data.train, spec.probe)
    assert torch.equal(again[0], probe[0]) and torch.unique(probe[0], dim=0).shape[0] == spec.probe


def test_flickr_mode_reads_a_cache_in_the_extract_features_layout(tmp_path):
    from vlr_lib.features import FeatureSet, default_cache_dir, save_features

    g = torch.Generator().manual_seed(0)
    sizes = {"train": 30, "validation": 10, "test": 10}
    for split, n in sizes.items():
        c2i = torch.arange(n).repeat_interleave(5)
        img = torch.randn(n, 16, generator=g)
        txt = img[c2i] + 0.3 * torch.randn(5 * n, 16, generator=g)
        manifest = {"backbone": "clip-vit-b32", "pretrained": "openai", "dataset_id": "flickr30k:flickr30k",
                    "revision": "", "split": split}
        save_features(default_cache_dir(tmp_path, "flickr30k:flickr30k", "", split, "clip-vit-b32"),
                      FeatureSet(img, txt, c2i, manifest))
    dirs = cells.flickr_feature_dirs(tmp_path)
    assert set(dirs) == {"train", "validation", "test"}
    spec = cells.spec_for("flickr30k", True, cache_root=str(tmp_path), n_train=20, batch_size=10, dim=8, epochs=1,
                       probe=10)
    data = cells.load_data(spec)
    assert data.train[0].shape == (20, 16) and data.train[1].shape == (100, 16) and int(data.train[2].max()) == 19
    assert data.test[0].shape[0] == 10 and "Flickr30K Karpathy split" in data.description
    assert data.data_id.startswith(cells.METRICS_VERSION + "|flickr30k|flickr30k:")


def test_several_flickr_feature_sets_are_an_error_not_a_silent_mix(tmp_path):
    """Two commits of the same dataset are two feature sets: the lookup never picks splits from both; the error names
    the flag that chooses, and the spec's revision chooses (weights default to the backbone's: "none" is asked for)."""
    from vlr_lib.features import FeatureSet, default_cache_dir, save_features

    for revision, pretrained in (("a" * 40, "openai"), ("b" * 40, "openai"), ("a" * 40, "none")):
        for split in ("train", "validation", "test"):
            c2i = torch.arange(3).repeat_interleave(5)
            manifest = {"backbone": "clip-vit-b32", "pretrained": pretrained, "dataset_id": "flickr30k:f",
                        "revision": revision, "split": split, "dtype": "float32"}
            save_features(default_cache_dir(tmp_path, "flickr30k:f", revision, split, "clip-vit-b32", pretrained),
                          FeatureSet(torch.randn(3, 4), torch.randn(15, 4), c2i, manifest))
    with pytest.raises(ValueError, match="several Flickr30K feature sets.*--revision") as err:
        cells.flickr_feature_dirs(tmp_path)
    assert "--weights" not in str(err.value).split("Choose")[1]
    chosen = cells.flickr_feature_dirs(tmp_path, revision="bbbbbbb")
    assert all("b" * 40 in p.name and "openai" in p.name for p in chosen.values())
    random = cells.flickr_feature_dirs(tmp_path, weights="none")
    assert all("a" * 40 in p.name and "none" in p.name for p in random.values())
    spec = cells.spec_for("flickr30k", True, cache_root=str(tmp_path), revision="aaaaaaa", n_train=3, batch_size=2,
                       dim=2, epochs=1, probe=2)
    assert "revision aaaaaaaaaaaa" in cells.load_data(spec).description


def test_each_setting_has_its_spec_folder_and_model(monkeypatch, tmp_path):
    monkeypatch.setenv("VLR_RUNS", str(tmp_path))
    feats, vsepp, e2e = (cells.spec_for("shapes", False, s) for s in ("features", "vsepp", "e2e"))
    assert feats.out == tmp_path / "showdown-shapes-features-full" and vsepp.out.name == "showdown-shapes-vsepp-full"
    assert feats.model() == {"dim": 256, "head": "linear"} and (feats.lr, vsepp.lr) == (1e-3, 2e-3)
    # budgets chosen on validation (docs/results.md, run 7); the VSE++ setting clips as VSE++ trains
    assert (feats.epochs, feats.lr_decay_epoch, vsepp.epochs, vsepp.lr_decay_epoch) == (20, 10, 20, 10)
    assert (feats.grad_clip, vsepp.grad_clip, e2e.grad_clip) == (None, 2.0, None) and e2e.epochs == 40
    assert vsepp.model() == {"text_encoder": "gru", "dim": 256, "head": "linear", "word_dim": 32, "hidden": 64}
    assert e2e.model() == {"text_encoder": "gru", "dim": 64, "width": 32} and e2e.settings().sampling == "images"
    assert feats.key() != vsepp.key() and feats.key()["setting"] == "features"
    assert cells.spec_for("shapes", True, "vsepp").epochs == cells.spec_for("shapes", True).epochs  # one fast schedule
    flickr = cells.spec_for("flickr30k", False, "vsepp")
    assert (flickr.dim, flickr.word_dim, flickr.hidden, flickr.min_count) == (1024, 300, 1024, 4)  # VSE++'s sizes
    with pytest.raises(ValueError, match="setting 'e2e' trains a CNN on the shapes images"):
        cells.spec_for("flickr30k", False, "e2e")
    with pytest.raises(ValueError, match="setting must be one of"):
        cells.spec_for("shapes", False, "clip")


def test_random_image_encoder_is_its_own_table(tmp_path):
    spec = tiny_spec(epochs=1)
    pretrained, random = cells.load_data(spec), cells.load_data(replace(spec, image_encoder="random"))
    assert pretrained.data_id != random.data_id and "random frozen" in random.description
    assert torch.equal(pretrained.train[1], random.train[1]) and not torch.equal(pretrained.train[0], random.train[0])
