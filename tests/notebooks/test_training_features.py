"""notebook.training_features: choices on the validation split, the test split only when asked (one final report)."""
from __future__ import annotations

import pytest
import torch

from vlr_lib import notebook
from vlr_lib.features import FeatureSet, default_cache_dir, save_features

SIZES = {"train": 12, "validation": 7, "test": 5}  # distinct sizes tell the splits apart


def _cache(root, revision: str, dim: int = 6) -> None:
    """A complete Flickr30K feature set in the layout extract_features.py writes."""
    for split, n in SIZES.items():
        c2i = torch.arange(n).repeat_interleave(5)
        manifest = {"backbone": "clip-vit-b32", "pretrained": "openai", "dataset_id": "nlphuji/flickr30k",
                    "revision": revision, "split": split, "dtype": "float16"}
        save_features(default_cache_dir(root, "nlphuji/flickr30k", revision, split, "clip-vit-b32", dtype="float16"),
                      FeatureSet(torch.randn(n, dim).half(), torch.randn(5 * n, dim).half(), c2i, manifest))


@pytest.fixture
def flickr(monkeypatch, tmp_path):
    monkeypatch.setenv("VLR_DATA", "flickr30k")
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    monkeypatch.setenv("VLR_CACHE", str(tmp_path))
    monkeypatch.delenv("VLR_FLICKR_REVISION", raising=False)
    return notebook.setup(renderer=None)


def test_flickr30k_mode_selects_on_the_validation_split(flickr, tmp_path):
    _cache(tmp_path / "features", "a" * 40)
    train, val = notebook.training_features(flickr)
    assert (train[0].shape[0], val[0].shape[0]) == (SIZES["train"], SIZES["validation"])  # not the test split
    assert train[0].dtype == torch.float32  # float16 caches are read as float32
    *_, test = notebook.training_features(flickr, test=True)
    assert test[0].shape[0] == SIZES["test"] and test[1].shape[0] == 5 * SIZES["test"]


def test_a_commit_in_vlr_flickr_revision_chooses_between_caches(flickr, tmp_path, monkeypatch):
    _cache(tmp_path / "features", "a" * 40, dim=6)
    _cache(tmp_path / "features", "b" * 40, dim=4)
    with pytest.raises(ValueError, match="several Flickr30K feature sets.*VLR_FLICKR_REVISION"):
        notebook.training_features(flickr)
    monkeypatch.setenv("VLR_FLICKR_REVISION", "bbbbbbbb")
    assert notebook.training_features(flickr)[0][0].shape[1] == 4
    monkeypatch.setenv("VLR_FLICKR_REVISION", "refs/convert/parquet")  # a branch cannot choose a cache
    with pytest.raises(ValueError, match="several"):
        notebook.training_features(flickr)


def test_shapes_test_split_leaves_train_and_validation_unchanged(monkeypatch):
    monkeypatch.setenv("VLR_DATA", "shapes")
    monkeypatch.setenv("VLR_FAST", "1")
    cfg = notebook.setup(renderer=None)
    two = notebook.training_features(cfg, n_train=(40, 40), n_val=(12, 12))
    three = notebook.training_features(cfg, n_train=(40, 40), n_val=(12, 12), test=True)
    assert len(two) == 2 and len(three) == 3 and three[2][0].shape[0] == 12
    for a, b in zip(two, three[:2]):
        assert all(torch.equal(x, y) for x, y in zip(a, b))
