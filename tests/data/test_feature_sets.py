"""Several Flickr30K feature caches side by side: found, chosen by flag, never reused or rebuilt silently.

The caches are real ones (``features.save_features`` / ``load_or_build_features``) of a shapes
dataset in the Flickr30K schema; the encoder is a stand-in with the real backbone's identity, so
nothing is downloaded and no network model runs.
"""
from __future__ import annotations

import pytest
import torch

from vlr_lib import features as V
from vlr_lib.data import make_shapes
from vlr_lib.data.flickr30k import Source

from .fakes import FakeClip

COMMIT, OLD_COMMIT = "1" * 40, "2" * 40
HUB = Source("nlphuji/flickr30k", COMMIT, None, "refs/convert/parquet")  # a branch, resolved to COMMIT


@pytest.fixture(scope="module")
def data():
    return make_shapes(4, 3, 2, seed=1)


@pytest.fixture
def encodings(monkeypatch):
    """Counts the encoders built (each is one extraction) and hands out the stand-in."""
    built = []

    def build(backbone, pretrained=True, *args, **kwargs):
        built.append((backbone, V.resolve_pretrained(backbone, pretrained)))
        return FakeClip(V.resolve_pretrained(backbone, pretrained))

    monkeypatch.setattr(V, "build_encoder", build)
    return built


def _build(root, data, source=HUB, **kwargs):
    return V.flickr30k_features(source, root, splits=("train", "validation", "test"), dataset=data, progress=False,
                                **kwargs)


def test_a_set_is_built_once_then_found(tmp_path, data, encodings):
    first = _build(tmp_path, data)
    assert encodings == [("clip-vit-b32", "openai")] * 3
    again = _build(tmp_path, data)
    assert len(encodings) == 3, "the second call reads the cache"
    assert all(torch.equal(first[s].img, again[s].img) for s in first)
    (found,) = V.cached_feature_sets(tmp_path)
    assert (found.dataset_id, found.revision, found.pretrained, found.dtype) == (HUB.dataset_id, COMMIT, "openai",
                                                                                  "float32")
    assert V.flickr_feature_dirs(tmp_path) == found.dirs


def test_a_cache_of_another_dtype_is_named_not_reused_nor_rebuilt(tmp_path, data, encodings):
    _build(tmp_path, data, dtype="float16")
    with pytest.raises(V.FeatureSetChoiceError, match=r"dtype=float32.*dtype=float16.*--dtype float16") as err:
        _build(tmp_path, data)  # the default asks for float32
    assert "--dtype float32" in str(err.value) and len(encodings) == 3, "nothing was encoded"
    assert _build(tmp_path, data, dtype="float16")["train"].img.dtype == torch.float16  # the flag selects it
    _build(tmp_path, data, dtype="float32")  # given explicitly: built beside it
    assert sorted(s.dtype for s in V.cached_feature_sets(tmp_path)) == ["float16", "float32"]
    assert len(encodings) == 6


def test_a_cache_of_another_commit_of_the_branch_is_named(tmp_path, data, encodings):
    """The Hub's branch moved on: the cache of the commit it pointed to before is offered by its --revision."""
    _build(tmp_path, data, source=Source(HUB.dataset_id, OLD_COMMIT, None, HUB.requested))
    with pytest.raises(V.FeatureSetChoiceError, match=f"--revision {OLD_COMMIT[:12]}"):
        _build(tmp_path, data)
    pinned = Source(HUB.dataset_id, COMMIT, None, COMMIT)  # --revision <commit>: that commit is wanted, build it
    _build(tmp_path, data, source=pinned)
    assert sorted(s.revision for s in V.cached_feature_sets(tmp_path)) == [COMMIT, OLD_COMMIT]
    with pytest.raises(V.FeatureSetChoiceError, match="several Flickr30K feature sets.*--revision"):
        V.flickr_feature_dirs(tmp_path)  # a reader with no revision cannot tell which one
    assert V.flickr_feature_dirs(tmp_path, revision=OLD_COMMIT[:7]) == V.flickr_feature_dirs(tmp_path,
                                                                                             revision=OLD_COMMIT)


def test_random_weights_are_used_only_when_asked_for(tmp_path, data, encodings):
    _build(tmp_path, data, weights="none")
    with pytest.raises(FileNotFoundError, match=r"--weights none") as err:
        V.flickr_feature_dirs(tmp_path)
    assert "extract_features.py" in str(err.value) and "check --data flickr30k" in str(err.value)
    assert set(V.flickr_feature_dirs(tmp_path, weights="none")) == {"train", "validation", "test"}
    with pytest.raises(V.FeatureSetChoiceError, match="--weights none"):
        _build(tmp_path, data)


def test_a_local_copy_with_its_own_commit_is_not_offered_other_commits(tmp_path, data, encodings):
    """A saved copy holds one commit: caches of another commit are other data, so its own are built."""
    _build(tmp_path, data, source=Source(HUB.dataset_id, OLD_COMMIT, None, HUB.requested))
    _build(tmp_path, data, source=Source(HUB.dataset_id, COMMIT, tmp_path / "copy"))
    assert len(encodings) == 6


def test_an_incomplete_set_does_not_count(tmp_path, data, encodings):
    V.flickr30k_features(HUB, tmp_path, splits=("train",), dataset=data, progress=False)
    with pytest.raises(FileNotFoundError, match="found none"):
        V.flickr_feature_dirs(tmp_path)
    assert set(V.flickr_feature_dirs(tmp_path, splits=("train",))) == {"train"}
