"""Frozen-backbone features and their on-disk cache; random weights of the real classes, no download."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from vlr_lib import features as V
from vlr_lib.data import make_shapes

ROOT = Path(__file__).resolve().parents[2]
IMG = 64  # small input side keeps ResNet-50 / ViT-B-32 fast on CPU


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: on a shared 2-core machine, 2 spinning OpenMP threads run several times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def data():
    return make_shapes(5, 3, 2, seed=4)


@pytest.fixture(scope="module")
def resnet():
    return V.build_encoder("vsepp-resnet50", pretrained=False, image_size=IMG, seed=0)


def _build(ds, cache_dir, encoder, **overrides):
    kwargs = dict(dataset_id="shapes-test", revision="seed=4", split="train", backbone="vsepp-resnet50",
                  pretrained=False, image_size=IMG, encoder=encoder, progress=False, batch_size=4)
    return V.load_or_build_features(ds, cache_dir, **{**kwargs, **overrides})


@pytest.fixture(scope="module")
def built(data, resnet, tmp_path_factory):
    """A cache of the train split (5 images), built once."""
    cache = tmp_path_factory.mktemp("features") / "train"
    return cache, _build(data["train"], cache, resnet)


@pytest.fixture(scope="module")
def built_test(data, resnet, tmp_path_factory):
    """A cache of the test split (2 images): the tests that modify a cache work on copies of it."""
    cache = tmp_path_factory.mktemp("features") / "test"
    return cache, _build(data["test"], cache, resnet, split="test")


@pytest.fixture
def copy(built_test, tmp_path):
    cache = tmp_path / "c"
    shutil.copytree(built_test[0], cache)
    return cache, built_test[1]


def _build_test(data, cache, encoder, **overrides):
    return _build(data["test"], cache, encoder, **{"split": "test", **overrides})


def _same(a: V.FeatureSet, b: V.FeatureSet) -> bool:
    return all(torch.equal(getattr(a, k), getattr(b, k)) for k in ("img", "txt", "caption_to_image"))


# ---------------------------------------------------------------- encoders
def test_resnet_encoder_is_torchvision_resnet50_without_download(resnet):
    import torchvision

    assert isinstance(resnet.model, torchvision.models.ResNet)
    assert resnet.pretrained == "none" and resnet.init_seed == 0
    assert sum(p.numel() for p in resnet.model.parameters()) == 23_508_032  # ResNet-50 minus its fc layer
    assert not any(p.requires_grad for p in resnet.model.parameters())


def test_random_init_is_seeded():
    a = V.build_encoder("vsepp-resnet50", pretrained=None, image_size=IMG, seed=1)
    b = V.build_encoder("vsepp-resnet50", pretrained=None, image_size=IMG, seed=1)
    state = torch.get_rng_state()
    c = V.build_encoder("vsepp-resnet50", pretrained=None, image_size=IMG, seed=2)
    assert torch.equal(state, torch.get_rng_state())  # the global RNG is left alone
    w = lambda e: e.model.conv1.weight  # noqa: E731
    assert torch.equal(w(a), w(b)) and not torch.equal(w(a), w(c))


def test_clip_encoder_random_weights(data):
    import open_clip

    enc = V.build_encoder("clip-vit-b32", pretrained=None, image_size=IMG, seed=0)
    assert isinstance(enc.model, open_clip.model.CLIP) and enc.pretrained == "none"
    one = data["test"].select([1])
    img, txt, c2i = V.extract_features(one, enc, batch_size=8, progress=False)
    assert img.shape == (1, 512) and txt.shape == (5, 512) and torch.isfinite(img).all()
    with torch.no_grad():  # the same numbers as calling the model directly
        tokens = enc.tokenizer(one[0]["caption"])
        torch.testing.assert_close(txt, enc.model.encode_text(tokens))
        torch.testing.assert_close(img, enc.model.encode_image(enc.transform(one[0]["image"])[None]))
    torch.testing.assert_close(c2i, torch.zeros(5, dtype=torch.long))



def test_clip_text_features_are_those_of_the_full_context():
    """encode_tokens cuts each batch's token rows after its longest caption (the text transformer is causal and reads
    the end token): the same features as open_clip's full 77-token context, up to float32 rounding, and the model
    is left as it was, even when encoding fails."""
    enc = V.build_encoder("clip-vit-b32", pretrained=None, image_size=IMG, seed=0)
    long = " ".join(["a very long caption"] * 40)  # truncated by the tokenizer: no padding to cut
    for captions, cut in ((["a dog", "two men play soccer in a park near the lake"], 12), ([long, "a cat"], 77)):
        tokens = enc.tokenize(captions)
        assert V._useful_length(enc.model, tokens) == cut
        with torch.no_grad():
            torch.testing.assert_close(enc.encode_tokens(tokens), enc.model.encode_text(tokens), rtol=0, atol=2e-5)
    with pytest.raises(RuntimeError):
        with V._text_context(enc.model, 5):
            raise RuntimeError("encoding failed")
    assert enc.model.positional_embedding.shape[0] == 77 and enc.model.attn_mask.shape == (77, 77)


@pytest.mark.parametrize("pool, mask, full", [("last", True, True), ("argmax", False, True), ("eos", True, False)])
def test_the_text_context_is_cut_only_where_no_feature_can_change(pool, mask, full):
    model = types.SimpleNamespace(text_pool_type=pool, attn_mask=torch.zeros(77, 77) if mask else None)
    tokens = torch.zeros(2, 77, dtype=torch.long)
    tokens[:, :4] = 7
    assert V._useful_length(model, tokens) == (77 if full else 4)


def test_extraction_in_workers_equals_the_main_process(data):
    """On CUDA the images are decoded and the captions tokenised in the loader's workers, the features kept on the
    device until the end: the same numbers, in the same order, as one process (workers forced here on the CPU)."""
    enc = V.build_encoder("clip-vit-b32", pretrained=None, image_size=IMG, seed=0)
    two = data["test"].select([1, 0])
    alone = V.extract_features(two, enc, batch_size=2, num_workers=0, progress=False)
    workers = V.extract_features(two, enc, batch_size=2, num_workers=2, progress=False)
    assert alone[1].shape == (10, 512)  # 5 batches of 2 captions: order across workers matters
    for a, b in zip(alone, workers):
        assert torch.equal(a, b)

def _bow_reference(text: str, dim: int) -> torch.Tensor:
    """Loop version: lower-case word uni- and bigrams, blake2b hash, top bit = sign, L2-normalised."""
    words = "".join(ch if ch.isalnum() else " " for ch in text.lower()).split()
    v = torch.zeros(dim, dtype=torch.float64)
    for gram in words + [a + " " + b for a, b in zip(words, words[1:])]:
        h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
        v[h % dim] += 1.0 if h >> 63 else -1.0
    return v / v.norm()


def test_hashed_bow_matches_loop_reference():
    texts = ["A small red circle left of a blue square", "red red red", "two shapes: a big green triangle"]
    got = V.hashed_bow(texts, 64).double()
    for row, text in zip(got, texts):
        torch.testing.assert_close(row, _bow_reference(text, 64))


def test_hashed_bow_sees_word_order_through_bigrams():
    a, b = V.hashed_bow(["a red circle and a blue square", "a blue circle and a red square"])
    assert (a - b).abs().max() > 0.1
    assert torch.allclose(a.norm(), torch.tensor(1.0))


@pytest.mark.parametrize(
    "call, exc, name",
    [(lambda: V.resolve_pretrained("vit", True), ValueError, "backbone"),
     (lambda: V.resolve_pretrained("clip-vit-b32", 3), TypeError, "pretrained"),
     (lambda: V.build_encoder("vsepp-resnet50", False, image_size=8), ValueError, "image_size")],
)
def test_bad_inputs(call, exc, name):
    with pytest.raises(exc, match=f"^{name}"):
        call()


def test_pretrained_tags():
    assert V.resolve_pretrained("clip-vit-b32", True) == "openai"
    assert V.resolve_pretrained("vsepp-resnet50", True) == "IMAGENET1K_V1"
    assert V.resolve_pretrained("vsepp-resnet50", "IMAGENET1K_V2") == "IMAGENET1K_V2"
    assert V.resolve_pretrained("clip-vit-b32", False) == V.resolve_pretrained("clip-vit-b32", None) == "none"


# ---------------------------------------------------------------- extraction and cache
def test_features_equal_direct_encoding(built, data, resnet):
    _, fs = built
    ds = data["train"]
    assert fs.img.shape == (5, 2048) and fs.txt.shape == (25, 2048) and fs.img.dtype == torch.float32
    with torch.no_grad():
        direct = resnet.model(torch.stack([resnet.transform(ds[i]["image"]) for i in range(5)]))
    torch.testing.assert_close(fs.img, direct, rtol=1e-4, atol=1e-4)  # batches of 4 + 1 vs 5: float rounding
    captions = [c for caps in ds["caption"] for c in caps]
    torch.testing.assert_close(fs.txt, V.hashed_bow(captions))
    assert fs.caption_to_image.tolist() == [i for i in range(5) for _ in range(5)]


def test_round_trip_and_manifest(built, data):
    cache, fs = built
    manifest = json.loads((cache / V.MANIFEST_FILE).read_text())
    expected = {"backbone": "vsepp-resnet50", "pretrained": "none", "init_seed": 0, "dataset_id": "shapes-test",
                "revision": "seed=4", "split": "train", "n_images": 5, "n_captions": 25, "dtype": "float32",
                "dim": 2048, "image_size": IMG, "format_version": V.FORMAT_VERSION,
                "text_encoder": "hashed-bow-uni+bi-blake2b-2048"}
    assert {k: manifest[k] for k in expected} == expected
    assert manifest["vlr_lib_version"] and manifest["torch_version"] == torch.__version__
    assert manifest["data_signature"] == V.data_signature(data["train"])
    saved = torch.load(cache / V.FEATURES_FILE, weights_only=True)
    h = hashlib.sha256()  # independent recomputation of the documented content hash
    for name in sorted(saved):
        t = saved[name].contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode() + t.numpy().tobytes())
    assert manifest["content_hash"] == h.hexdigest()
    assert _same(V.load_features(cache), fs)


def test_matching_cache_is_reused_without_encoding(built, data, resnet, monkeypatch):
    cache, fs = built
    monkeypatch.setattr(resnet, "encode_images", lambda x: pytest.fail("the cache should have been reused"))
    assert _same(_build(data["train"], cache, resnet), fs)
    assert _same(_build(data["train"], cache, None, build=False), fs)  # no encoder needed at all


@pytest.mark.parametrize(
    "change",
    [{"dataset_id": "flickr30k"}, {"revision": "seed=5"}, {"split": "test"}, {"pretrained": "IMAGENET1K_V1"},
     {"dtype": "float16"}, {"backbone": "clip-vit-b32"}, {"n_images": 4}, {"data_signature": "0" * 64}],
)
def test_every_request_field_is_compared(built, data, change):
    cache, _ = built
    request = V.make_request(data["train"], backbone="vsepp-resnet50", pretrained=False, dataset_id="shapes-test",
                             revision="seed=4", split="train", image_size=IMG)
    V.load_features(cache, request)  # the unchanged request matches
    with pytest.raises(V.FeatureCacheStaleError, match=next(iter(change))):
        V.load_features(cache, {**request, **change})


def test_stale_cache_is_rebuilt(copy, data, resnet):
    cache, first = copy
    other = data["validation"].select([0, 1])  # a different request: split (same counts)
    with pytest.raises(V.FeatureCacheStaleError, match="split"):
        _build(other, cache, resnet, split="validation", build=False)
    with pytest.warns(RuntimeWarning, match="does not match"):
        rebuilt = _build(other, cache, resnet, split="validation")
    assert rebuilt.img.shape == (2, 2048) and not torch.equal(rebuilt.img, first.img)
    manifest = V.read_manifest(cache)
    assert manifest["split"] == "validation" and manifest["data_signature"] == V.data_signature(other)
    assert _same(V.load_features(cache), rebuilt)


def test_changed_captions_make_the_cache_stale(copy, data, resnet):
    cache, _ = copy
    edited = data["test"].map(lambda r: {"caption": [c + "!" for c in r["caption"]]})
    with pytest.raises(V.FeatureCacheStaleError, match="data_signature"):
        _build(edited, cache, resnet, split="test", build=False)


def test_corrupt_cache_is_detected_and_rebuilt(copy, data, resnet):
    cache, good = copy
    tampered = {"img": good.img.clone(), "txt": good.txt, "caption_to_image": good.caption_to_image}
    tampered["img"][0, 0] += 1.0
    torch.save(tampered, cache / V.FEATURES_FILE)  # manifest left as it was
    with pytest.raises(V.FeatureCacheCorruptError, match="content hash"):
        V.load_features(cache)
    with pytest.raises(V.FeatureCacheCorruptError):
        _build_test(data, cache, resnet, build=False)
    with pytest.warns(RuntimeWarning, match="corrupt"):
        again = _build_test(data, cache, resnet)
    assert _same(again, good)
    (cache / V.FEATURES_FILE).write_bytes((cache / V.FEATURES_FILE).read_bytes()[:100])  # truncated
    with pytest.raises(V.FeatureCacheCorruptError, match=r"features.pt cannot be read, it is truncated or damaged.*--rebuild"):
        V.load_features(cache)


class _Payload:
    """A pickle that would run code on load (it never may)."""

    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('PWNED').touch()",))


def test_a_pickle_payload_is_refused_in_one_line_without_torchs_weights_only_hint(copy, tmp_path, monkeypatch):
    """Issue 23: the refusal was 3 lines, one of them torch's advice to retry with weights_only=False."""
    monkeypatch.chdir(tmp_path)
    cache, good = copy
    torch.save({"img": _Payload(), "txt": good.txt, "caption_to_image": good.caption_to_image},
               cache / V.FEATURES_FILE)
    with pytest.raises(V.FeatureCacheCorruptError) as err:
        V.load_features(cache)
    text = str(err.value)
    assert "features.pt holds pickled Python objects (exec), not only tensors" in text and "--rebuild" in text
    assert "weights_only=False" not in text and "weights_only` set to `False" not in text and "\n" not in text
    assert not (tmp_path / "PWNED").exists()


def test_a_manifest_that_is_not_an_object_is_a_corrupt_cache_named_with_its_fix(copy):
    cache, _ = copy
    (cache / V.MANIFEST_FILE).write_text("[1, 2, 3]")
    with pytest.raises(V.FeatureCacheCorruptError, match=r"manifest.json.*list.*delete the folder"):
        V.load_features(cache)
    with pytest.raises(V.FeatureCacheCorruptError, match="manifest.json"):
        V.flickr_feature_dirs(cache.parent)


@pytest.mark.parametrize("which", [V.FEATURES_FILE, V.MANIFEST_FILE])
def test_a_permission_error_is_not_corruption_and_triggers_no_rebuild(copy, data, resnet, monkeypatch, which):
    """Root ignores file modes, so the denial is simulated where the file is opened."""
    cache, _ = copy
    real_read = Path.read_text

    def deny(path):
        raise PermissionError(13, "Permission denied", str(path))

    if which == V.FEATURES_FILE:
        monkeypatch.setattr(torch, "load", lambda path, *a, **k: deny(path))
    else:
        monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: deny(self) if self.name == which
                            else real_read(self, *a, **k))
    monkeypatch.setattr(V, "extract_features", lambda *a, **k: pytest.fail("a permission error must not rebuild"))
    with pytest.raises(PermissionError, match=rf"{which}: permission denied.*not damaged"):
        _build_test(data, cache, resnet)


def test_missing_cache_with_build_false(tmp_path, data):
    with pytest.raises(V.FeatureCacheMissingError, match="no feature cache at .*extract_features.py"):
        _build(data["train"], tmp_path / "none", None, build=False)


def test_crash_before_replace_leaves_the_old_cache_intact(copy, monkeypatch):
    cache, old = copy
    old_bytes = {f: (cache / f).read_bytes() for f in (V.FEATURES_FILE, V.MANIFEST_FILE)}

    def crash(src, dst):
        raise OSError("simulated crash between the temporary write and the rename")

    monkeypatch.setattr(V.os, "replace", crash)
    new = V.FeatureSet(old.img + 1, old.txt, old.caption_to_image, dict(old.manifest))
    with pytest.raises(OSError, match="simulated crash"):
        V.save_features(cache, new)
    monkeypatch.undo()
    assert {f: (cache / f).read_bytes() for f in old_bytes} == old_bytes
    assert sorted(p.name for p in cache.iterdir()) == [V.FEATURES_FILE, V.MANIFEST_FILE]  # temp file removed
    assert _same(V.load_features(cache), old)


def test_crash_between_features_and_manifest_is_detected(copy, data, resnet, monkeypatch):
    cache, old = copy
    real_replace, calls = V.os.replace, []

    def replace_then_crash(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the manifest, written last
            raise OSError("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(V.os, "replace", replace_then_crash)
    with pytest.raises(OSError):
        V.save_features(cache, V.FeatureSet(old.img * 2, old.txt, old.caption_to_image, dict(old.manifest)))
    monkeypatch.undo()
    with pytest.raises(V.FeatureCacheCorruptError):  # new features, old manifest: the hash disagrees
        V.load_features(cache)
    with pytest.warns(RuntimeWarning):
        assert _same(_build_test(data, cache, resnet), old)


def test_encoder_must_match_the_request(tmp_path, data, resnet):
    with pytest.raises(ValueError, match="^encoder"):
        _build(data["train"], tmp_path / "c", resnet, image_size=224)


def test_float16_cache(tmp_path, data, resnet):
    fs = _build_test(data, tmp_path / "c", resnet, dtype="float16")
    assert fs.img.dtype == torch.float16 and V.read_manifest(tmp_path / "c")["dtype"] == "float16"
    assert V.load_features(tmp_path / "c").txt.dtype == torch.float16


def test_default_cache_dir_is_safe_and_distinct(tmp_path):
    """Every field of the cache key is in the folder name: no variant is taken for a stale copy of another."""
    key = (tmp_path, "nlphuji/flickr30k", "0123abc", "train", "clip-vit-b32")
    a = V.default_cache_dir(*key)
    assert a.parent == tmp_path and "/" not in a.name and "openai" in a.name and a.name.endswith("float32")
    variants = [V.default_cache_dir(*key[:3], "test", "clip-vit-b32"), V.default_cache_dir(*key, dtype="float16"),
                V.default_cache_dir(*key, pretrained="none"), V.default_cache_dir(key[0], key[1], "4567def", *key[3:])]
    assert len({a, *variants}) == 5
    with pytest.raises(ValueError, match="^dtype"):
        V.default_cache_dir(*key, dtype="int8")


def test_data_signature_reads_the_text_columns_only(data, monkeypatch):
    """It asks the dataset for img_id and caption, never for rows (which carry the image bytes), and equals an
    independent computation over those two columns; other images with the same text give the same signature."""
    import datasets

    keys, real = [], datasets.Dataset.__getitem__
    monkeypatch.setattr(datasets.Dataset, "__getitem__", lambda self, key: keys.append(key) or real(self, key))
    ds = data["train"].select([3, 0, 4])  # scattered: an index mapping, as after the Karpathy split
    signature = V.data_signature(ds)
    assert keys == ["img_id", "caption"]
    monkeypatch.undo()
    text = ds.select_columns(["img_id", "caption"]).to_dict()
    expected = hashlib.sha256(json.dumps(text["img_id"]).encode() + json.dumps(text["caption"]).encode()).hexdigest()
    assert signature == expected
    other_images = ds.cast_column("image", datasets.Image(decode=False)).map(
        lambda r: {"image": {"bytes": b"not the same picture", "path": None}})
    assert V.data_signature(other_images) == signature
    assert V.data_signature(data["train"].select([0, 3, 4])) != signature  # order is part of the content


def test_loader_settings_follow_the_device():
    assert V.loader_settings("cpu") == {"batch_size": 64, "num_workers": 0, "pin_memory": False}
    cuda = V.loader_settings(torch.device("cuda", 0))  # a device object needs no GPU
    assert cuda == {"batch_size": 256, "num_workers": min(8, os.cpu_count() or 1), "pin_memory": True}
    assert V.loader_settings("cuda", 32, 2)["batch_size"] == 32
    with pytest.raises(ValueError, match="^num_workers"):
        V.loader_settings("cpu", num_workers=-1)


def test_extract_script_help():
    script = ROOT / "data_scripts" / "extract_features.py"
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=True)
    for flag in ("--backbone", "--device", "--batch-size", "--cache-root", "--pretrained", "--split"):
        assert flag in out.stdout
    assert all(b in out.stdout for b in V.BACKBONES)


def test_flickr_cache_id_convention(tmp_path, monkeypatch):
    """Local copy: flickr30k:<folder>; Hub: repo id and the commit its revision resolves to (args, env, defaults)."""
    from types import SimpleNamespace

    from vlr_lib.data import flickr30k as F30

    commits = {("nlphuji/flickr30k", "refs/convert/parquet"): "a" * 40, ("me/mirror", "abc"): "b" * 40,
               ("o/r", "r2"): "c" * 40}
    hub = SimpleNamespace(dataset_info=lambda repo, revision: SimpleNamespace(sha=commits[repo, revision]))
    monkeypatch.setattr(F30, "_hub_api", lambda: hub)
    for name in (F30.ENV_REPO, F30.ENV_REVISION, "VLR_DATA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLR_CACHE", str(tmp_path / "cache"))
    (tmp_path / "f30k").mkdir()
    monkeypatch.chdir(tmp_path)
    assert V.flickr_cache_id("f30k/") == ("flickr30k:f30k", "")
    assert V.flickr_cache_id(Path("f30k"), revision="v1") == ("flickr30k:f30k", "v1")
    assert V.flickr_cache_id() == ("nlphuji/flickr30k", "a" * 40)
    monkeypatch.setenv(F30.ENV_REPO, "me/mirror")
    monkeypatch.setenv(F30.ENV_REVISION, "abc")
    assert V.flickr_cache_id() == ("me/mirror", "b" * 40)
    assert V.flickr_cache_id(repo_id="o/r", revision="r2") == ("o/r", "c" * 40)
    assert V.flickr_cache_id(repo_id="o/r", revision="d" * 40) == ("o/r", "d" * 40)  # a commit is taken as it is
