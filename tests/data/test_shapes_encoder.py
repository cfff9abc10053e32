"""The pretrained shapes encoder: task, determinism, cache (reuse, stale, corrupt, permissions), the default's quality."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from vlr_lib import feature_quality as Q
from vlr_lib import shapes_encoder as E
from vlr_lib.data import make_shapes
from vlr_lib.models import TinyCNN

from ..cli.helpers import within

ROOT = Path(__file__).resolve().parents[2]
# Small enough to build in about a second: the cache's behaviour does not depend on the size.
TINY = E.EncoderSettings(pool_size=64, held_out=32, image_size=32, width=4, epochs=1, batch_size=32)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tiny encoder built once into a cache; tests that modify a cache work on copies."""
    cache = tmp_path_factory.mktemp("encoder") / "tiny"
    return cache, E.load_or_train_encoder(cache, TINY, progress=False)


@pytest.fixture
def copy(built, tmp_path):
    cache = tmp_path / "copy"
    cache.mkdir()
    for name in (E.WEIGHTS_FILE, E.MANIFEST_FILE):
        (cache / name).write_bytes((built[0] / name).read_bytes())
    return cache


@pytest.fixture(scope="module")
def tiny_images():
    _, scenes = make_shapes(4, 3, 2, image_size=32, seed=1, return_scenes=True)
    return make_shapes(4, 3, 2, image_size=32, seed=1)["validation"], scenes


def _no_training(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the encoder was trained instead of loaded from its cache")

    monkeypatch.setattr(E, "pretrain", fail)


def _same_state(a: E.ShapesEncoder, b: E.ShapesEncoder) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# ---------------------------------------------------------------- the backbone and the task
def test_tinycnn_pooled_is_the_pooled_feature_map():
    cnn = TinyCNN(8, width=8)
    x = torch.randint(0, 256, (3, 3, 64, 64), dtype=torch.uint8)
    assert sum(cnn.pooled_blocks) == cnn.fc.in_features == 12 * 8
    h = cnn.feature_map(x)
    assert h.shape == (3, 16, 4, 4)
    torch.testing.assert_close(cnn.pooled(x), cnn.pool(h))
    torch.testing.assert_close(cnn.pooled(x)[:, :16], h.mean(dim=(2, 3)))


def test_scene_labels_match_a_loop_reference():
    _, scenes = make_shapes(4, 3, 2, seed=2, return_scenes=True)
    sc = scenes["train"]
    labels = E.scene_labels(sc)
    for i in range(len(sc)):
        assert labels["count"][i] == sc.n_objects[i] - 1
        for cell in range(9):
            slot = [k for k in range(sc.n_objects[i]) if sc.attrs[i, k, 3] == cell]
            assert labels["occupied"][i, cell] == len(slot)
            for a, name in enumerate(("color", "shape", "size")):
                assert labels[name][i, cell] == (sc.attrs[i, slot[0], a] if slot else -1)


def test_pool_is_its_own_seed_branch():
    pool, held_out = E.pool_scenes(TINY)
    assert len(pool) == TINY.pool_size and len(held_out) == TINY.held_out
    _, scenes = make_shapes(64, 32, 32, seed=TINY.seed, return_scenes=True)
    pool_jitter = {row.tobytes() for row in np.concatenate([pool.jitter, held_out.jitter])}
    assert not any(row.tobytes() in pool_jitter for s in scenes.values() for row in s.jitter)
    assert (pool.group == np.arange(len(pool))).all()  # group_size 1: independent scenes


def test_encoder_exports_standardised_weighted_pooled_features(built, tiny_images):
    enc = built[1]
    x = torch.from_numpy(np.stack([np.asarray(im) for im in tiny_images[0]["image"]])).permute(0, 3, 1, 2).contiguous()
    feats = E.pretrained_image_features(tiny_images[0], encoder=enc, progress=False)
    blocks = enc.cnn.pooled_blocks
    assert feats.shape == (3, sum(blocks)) == (3, 12 * TINY.width) and feats.dtype == torch.float32
    weight = torch.tensor(E.block_weights(blocks)).repeat_interleave(torch.tensor(blocks))
    with torch.no_grad():
        torch.testing.assert_close(feats, (enc.cnn.pooled(x) - enc.mean) / enc.std * weight)
    assert E.block_weights((8, 8, 32)) == (1.0, 1.0, 0.5)  # each block the same expected squared norm
    assert not any(p.requires_grad for p in enc.parameters()) and not enc.training


def test_accepts_arrays_and_tensors_in_both_layouts(built, tiny_images):
    enc = built[1]
    nhwc = np.stack([np.asarray(im) for im in tiny_images[0]["image"]])
    ref = E.pretrained_image_features(tiny_images[0], encoder=enc)
    for images in (nhwc, torch.from_numpy(nhwc), torch.from_numpy(nhwc).permute(0, 3, 1, 2)):
        assert torch.equal(E.pretrained_image_features(images, encoder=enc), ref)


def test_manifest_records_the_request_and_accuracy(built):
    cache, enc = built
    manifest = json.loads((cache / E.MANIFEST_FILE).read_text())
    assert manifest == enc.manifest
    assert {k: manifest[k] for k in TINY.request()} == TINY.request()
    assert manifest["torch_version"] == torch.__version__ and manifest["format_version"] == E.FORMAT_VERSION
    assert manifest["feature_dim"] == 12 * TINY.width and manifest["threads"] == 1
    assert set(manifest["pretrain_accuracy"]) == {*E.ATTRIBUTES, "scene"}
    assert all(0.0 <= v <= 1.0 for v in manifest["pretrain_accuracy"].values())
    state = torch.load(cache / E.WEIGHTS_FILE, weights_only=True)  # plain tensors only
    assert manifest["content_hash"] == E.content_hash(state)


# ---------------------------------------------------------------- determinism
def test_same_settings_give_the_same_bytes(built, tmp_path, tiny_images):
    rng_before, threads_before = torch.get_rng_state(), torch.get_num_threads()
    torch.set_num_threads(2)  # the caller's thread count does not change the bytes
    try:
        again = E.load_or_train_encoder(tmp_path / "again", TINY, progress=False)
    finally:
        torch.set_num_threads(threads_before)
    assert torch.equal(rng_before, torch.get_rng_state())  # the global RNG is left alone
    for name in (E.WEIGHTS_FILE, E.MANIFEST_FILE):
        assert (tmp_path / "again" / name).read_bytes() == (built[0] / name).read_bytes()
    a = E.pretrained_image_features(tiny_images[0], encoder=built[1])
    b = E.pretrained_image_features(tiny_images[0], encoder=again)
    assert a.numpy().tobytes() == b.numpy().tobytes() and bool(torch.isfinite(a).all())


def test_other_seed_gives_another_encoder(built):
    other = E.pretrain(_tiny(seed=1))
    assert not _same_state(other, built[1])


def _tiny(**changes) -> E.EncoderSettings:
    fields = {k: v for k, v in TINY.request().items() if k not in ("format_version", "torch_version")}
    return E.EncoderSettings(**{**fields, **changes})


def test_first_use_builds_the_encoder_even_under_no_grad(built, tiny_images, tmp_path):
    with torch.no_grad():
        feats = E.pretrained_image_features(tiny_images[0], settings=TINY, cache_dir=tmp_path / "fresh", progress=False)
    assert torch.equal(feats, E.pretrained_image_features(tiny_images[0], encoder=built[1]))
    assert (tmp_path / "fresh" / E.WEIGHTS_FILE).read_bytes() == (built[0] / E.WEIGHTS_FILE).read_bytes()


# ---------------------------------------------------------------- the cache
def test_cache_is_reused_without_training(built, monkeypatch):
    _no_training(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = E.load_or_train_encoder(built[0], TINY)
    assert _same_state(again, built[1]) and again.manifest == built[1].manifest


def test_default_location_is_keyed_by_the_request(tmp_path, monkeypatch):
    monkeypatch.setenv("VLR_CACHE", str(tmp_path))
    path = E.encoder_dir(TINY)
    assert path.parent == tmp_path and path.name.startswith("shapes-encoder-32px-")
    assert E.encoder_dir(_tiny(epochs=2)) != path and E.encoder_dir(TINY) == path
    enc = E.load_or_train_encoder(settings=TINY, progress=False)
    assert (path / E.MANIFEST_FILE).exists()
    _no_training(monkeypatch)
    assert _same_state(E.load_or_train_encoder(settings=TINY), enc)


@pytest.mark.parametrize("field, value", [("epochs", 2), ("seed", 3), ("pool_size", 32), ("width", 2)])
def test_cache_for_other_settings_is_rebuilt_with_a_warning(copy, field, value):
    settings = _tiny(**{field: value})
    with pytest.warns(RuntimeWarning, match=f"other settings.*{field}: cached"):
        enc = E.load_or_train_encoder(copy, settings, progress=False)
    assert enc.manifest[field] == value
    assert json.loads((copy / E.MANIFEST_FILE).read_text())[field] == value


def test_cache_from_another_torch_version_is_stale(copy):
    manifest = json.loads((copy / E.MANIFEST_FILE).read_text())
    (copy / E.MANIFEST_FILE).write_text(json.dumps({**manifest, "torch_version": "1.0.0"}))
    with pytest.warns(RuntimeWarning, match="torch_version: cached '1.0.0'"):
        E.load_or_train_encoder(copy, TINY, progress=False)


def _truncate(cache: Path) -> None:
    blob = (cache / E.WEIGHTS_FILE).read_bytes()
    (cache / E.WEIGHTS_FILE).write_bytes(blob[: len(blob) // 2])


def _change_a_weight(cache: Path) -> None:
    state = torch.load(cache / E.WEIGHTS_FILE, weights_only=True)
    state["cnn.features.0.weight"][0, 0, 0, 0] += 1.0
    torch.save(state, cache / E.WEIGHTS_FILE)


def _wrong_tensors(cache: Path) -> None:
    torch.save({"not": torch.zeros(1)}, cache / E.WEIGHTS_FILE)


@pytest.mark.parametrize("damage, message", [
    (_truncate, "cannot load"),
    (_change_a_weight, "content hash"),
    (_wrong_tensors, "cannot load"),
    (lambda c: (c / E.WEIGHTS_FILE).unlink(), "cannot read"),
    (lambda c: (c / E.MANIFEST_FILE).write_text('{"format_version": 1,'), "not valid JSON"),
    (lambda c: (c / E.MANIFEST_FILE).write_bytes(b"\xff\xfe\x00"), "not valid JSON"),
    (lambda c: (c / E.MANIFEST_FILE).write_text("[1, 2]"), "JSON object"),
], ids=["truncated", "hash", "wrong-tensors", "no-weights", "truncated-json", "binary-json", "not-an-object"])
def test_corrupt_cache_is_rebuilt_with_a_warning(copy, built, damage, message):
    damage(copy)
    with pytest.warns(RuntimeWarning, match=message):
        enc = E.load_or_train_encoder(copy, TINY, progress=False)
    assert _same_state(enc, built[1])  # rebuilt: the same bytes as before the damage
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        E.load_or_train_encoder(copy, TINY)


def test_unreadable_cache_is_a_permission_error_not_corruption(copy, monkeypatch):
    real = E.read_regular

    def denied(path, *args, **kwargs):
        if Path(path).parent == copy:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(E, "read_regular", denied)
    _no_training(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "rebuilding" warning: nothing is rebuilt
        with pytest.raises(PermissionError, match=r"cannot read the shapes encoder cache manifest .*permission"):
            E.load_or_train_encoder(copy, TINY)


def test_unwritable_cache_fails_before_training(tmp_path, monkeypatch):
    target = tmp_path / "locked" / "enc"
    real = Path.mkdir

    def denied(self, *args, **kwargs):
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", denied)
    _no_training(monkeypatch)  # the error comes before the long work
    with pytest.raises(PermissionError, match="cannot write the shapes encoder cache .*VLR_CACHE"):
        E.load_or_train_encoder(target, TINY)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_unreadable_cache_folder_by_file_mode(copy):
    os.chmod(copy / E.MANIFEST_FILE, 0)
    try:
        with pytest.raises(PermissionError, match="permission denied"):
            E.load_or_train_encoder(copy, TINY)
    finally:
        os.chmod(copy / E.MANIFEST_FILE, 0o644)


_BUILD = """
import hashlib, sys, torch
from vlr_lib import shapes_encoder as E
s = E.EncoderSettings(pool_size=64, held_out=32, image_size=32, width=4, epochs=1, batch_size=32)
enc = E.load_or_train_encoder(sys.argv[1], s, progress=False)
x = torch.randint(0, 256, (5, 32, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
print(hashlib.sha256(E.pretrained_image_features(x, encoder=enc).numpy().tobytes()).hexdigest())
"""


def test_concurrent_first_use_is_safe(tmp_path, built):
    """Two processes building the same cache at once: both succeed, same features, a cache that loads cleanly."""
    cache = tmp_path / "shared"
    env = {**os.environ, "PYTHONWARNINGS": "error::RuntimeWarning"}
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, str(cache)], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert outs[0][0] == outs[1][0] and len(outs[0][0].strip()) == 64
    assert sorted(p.name for p in cache.iterdir()) == [E.WEIGHTS_FILE, E.MANIFEST_FILE]  # no temp files left
    assert (cache / E.WEIGHTS_FILE).read_bytes() == (built[0] / E.WEIGHTS_FILE).read_bytes()


# ---------------------------------------------------------------- arguments
def test_default_cache_dir_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("VLR_CACHE", str(tmp_path / "mine"))
    assert E.default_cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("VLR_CACHE", "relative/dir")
    with pytest.raises(ValueError, match="VLR_CACHE must be an absolute path"):
        E.default_cache_dir()
    monkeypatch.delenv("VLR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert E.default_cache_dir() == tmp_path / "xdg" / "vlr-workbook"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for xdg in ("", "relative/xdg"):  # unset or relative: ignored, as the XDG specification says
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
        assert E.default_cache_dir() == tmp_path / "home" / ".cache" / "vlr-workbook"
    monkeypatch.chdir(tmp_path)
    assert E.default_cache_dir().is_absolute()


@pytest.mark.parametrize("field, value, exc", [
    ("pool_size", 0, ValueError), ("held_out", 0, ValueError), ("epochs", 0, ValueError),
    ("batch_size", -1, ValueError), ("seed", -1, ValueError), ("image_size", 8, ValueError), ("width", 1, ValueError),
    ("lr", 0.0, ValueError), ("lr", -1e-3, ValueError), ("lr", float("nan"), ValueError),
    ("pool_size", 10.5, TypeError), ("epochs", "3", TypeError), ("lr", "fast", TypeError), ("seed", True, TypeError),
])
def test_bad_settings_name_the_argument(field, value, exc):
    with pytest.raises(exc, match=field):
        E.EncoderSettings(**{field: value})


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"images": [1, 2, 3]}, TypeError, "images must be"),
    ({"images": np.zeros((2, 32, 32, 3), np.float32)}, ValueError, "images must be uint8"),
    ({"images": np.zeros((2, 32, 32), np.uint8)}, ValueError, "images must be uint8"),
    ({"images": np.zeros((0, 32, 32, 3), np.uint8)}, ValueError, "images is empty"),
    ({"images": np.zeros((2, 32, 16, 3), np.uint8)}, ValueError, "images must be square"),
    ({"images": np.zeros((2, 64, 64, 3), np.uint8)}, ValueError, "image_size=64"),
    ({"encoder": "tiny"}, TypeError, "encoder must be"),
    ({"settings": TINY}, ValueError, "either encoder or settings"),
])
def test_bad_feature_arguments_name_the_argument(built, kwargs, exc, match):
    call = {"images": np.zeros((2, 32, 32, 3), np.uint8), "encoder": built[1], **kwargs}
    with pytest.raises(exc, match=match):
        E.pretrained_image_features(**call)


def test_bad_inputs_other_entry_points(tmp_path):
    with pytest.raises(TypeError, match="settings must be an EncoderSettings"):
        E.load_or_train_encoder(tmp_path, {"epochs": 1})
    with pytest.raises(TypeError, match="one split"):
        E.pretrained_image_features(make_shapes(1, 1, 1, image_size=32), settings=TINY)
    with pytest.raises(ValueError, match="no 'image' column"):
        E.pretrained_image_features(make_shapes(1, 1, 1, image_size=32)["train"].remove_columns("image"))


# ---------------------------------------------------------------- the default encoder
def test_random_encoder_is_the_untrained_baseline(tiny_images, built):
    rand = E.random_encoder(TINY)
    assert rand.manifest["epochs"] == 0 and not _same_state(rand, built[1])
    feats = E.pretrained_image_features(tiny_images[0], encoder=rand)
    assert feats.shape == (3, 48) and bool(torch.isfinite(feats).all())


@pytest.mark.slow
def test_default_encoder_tracks_what_captions_share():
    """The issue's check, on the real default: the shipped encoder (vlr_lib/assets/shapes_encoder).

    Measured on this machine: Spearman 0.40-0.46 over data seeds 0, 1 and difficulty 0, 0.5, 1
    (the random TinyCNN of train.shapes_features 0.16-0.23); held-out pretraining accuracy colour 0.99,
    shape 0.79 (0.74-0.82 over pretraining seeds 0-3), size 1.00 (docs/shapes_encoder.md).
    """
    enc = E.load_or_train_encoder(progress=False)
    acc = enc.manifest["pretrain_accuracy"]
    assert acc["count"] > 0.95 and acc["occupied"] > 0.95 and acc["color"] > 0.95 and acc["size"] > 0.95
    assert acc["shape"] > 0.6, acc  # the hardest attribute for a 4-layer CNN at 64 px
    for seed in (0, 1):
        for difficulty in (0.0, 0.5, 1.0):
            val = make_shapes(1, 200, 1, difficulty=difficulty, seed=seed)["validation"]
            feats = E.pretrained_image_features(val, progress=False)
            assert feats.shape == (200, 384) and bool(torch.isfinite(feats).all())
            rho = Q.overlap_spearman(feats, val["caption"])
            assert rho >= 0.35, (seed, difficulty, rho)



# ---------------------------------------------------------------- the shipped encoder


@pytest.fixture
def shipped(tmp_path):
    """A copy of the shipped encoder's folder, to damage."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    for name in (E.WEIGHTS_FILE, E.MANIFEST_FILE):
        (folder / name).write_bytes((E.SHIPPED_DIR / name).read_bytes())
    return folder


@pytest.fixture
def no_training(monkeypatch):
    """Nothing may train the encoder in place of the shipped one."""
    monkeypatch.setattr(E, "pretrain", lambda *a, **k: pytest.fail("the shipped encoder must never be re-trained"))
    monkeypatch.setattr(E, "_fit", lambda *a, **k: pytest.fail("the shipped encoder must never be re-trained"))


def test_the_default_recipe_is_the_shipped_encoder_checked_by_sha256(no_training):
    import hashlib

    manifest = json.loads((E.SHIPPED_DIR / E.MANIFEST_FILE).read_text())
    blob = (E.SHIPPED_DIR / E.WEIGHTS_FILE).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == manifest["sha256"] == E.shipped_sha256()
    assert len(blob) < 200_000  # about 150 KB ships with the package
    enc = E.load_or_train_encoder(progress=False)
    assert enc is E.shipped_encoder()  # loaded once
    assert E.content_hash(enc.state_dict()) == manifest["content_hash"]
    settings = E.EncoderSettings()
    assert {k: manifest[k] for k in settings.request() if k != "torch_version"} == \
        {k: v for k, v in settings.request().items() if k != "torch_version"}  # the recipe it was trained with
    assert manifest["trained_with"]["kernels"] and manifest["pretrain_accuracy"]["shape"] > 0.6
    img = make_shapes(4, 1, 1, seed=0)["train"]
    assert torch.equal(E.pretrained_image_features(img, progress=False),
                       E.pretrained_image_features(img, encoder=E.shipped_encoder(), progress=False))


def _flip(path: Path, at: int = 2000) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _other_encoder(folder: Path) -> None:
    """A valid weights file of another encoder (the manifest unchanged)."""
    state = E.ShapesEncoder(32).state_dict()
    torch.save(state, folder / E.WEIGHTS_FILE)


@pytest.mark.parametrize("damage, says", [
    (lambda f: (f / E.WEIGHTS_FILE).unlink(), "encoder.pt is missing"),
    (lambda f: (f / E.MANIFEST_FILE).unlink(), "manifest.json is missing"),
    (lambda f: _flip(f / E.WEIGHTS_FILE), "has sha256"),
    (lambda f: (f / E.WEIGHTS_FILE).write_bytes((f / E.WEIGHTS_FILE).read_bytes()[:1000]), "has sha256"),
    (_other_encoder, "another encoder"),
    (lambda f: (f / E.MANIFEST_FILE).write_text("{not json"), "manifest.json cannot be read"),
    (lambda f: (f / E.MANIFEST_FILE).write_text("[1, 2]"), "not an encoder manifest"),
], ids=["weights missing", "manifest missing", "byte flipped", "truncated", "other sha256", "manifest not JSON",
        "manifest not an object"])
def test_a_missing_damaged_or_other_shipped_encoder_is_one_line_naming_the_file_and_the_fix(shipped, damage, says,
                                                                                               no_training):
    damage(shipped)
    with pytest.raises(E.EncoderFileError) as err:
        E.shipped_encoder(shipped)
    message = str(err.value)
    assert "\n" not in message and says in message and str(shipped) in message
    assert "git checkout -- vlr_lib/assets/shapes_encoder" in message and "python -m vlr_lib encoder --retrain" in message


def test_a_damaged_shipped_encoder_stops_the_default_recipe_instead_of_training(shipped, monkeypatch, no_training):
    _flip(shipped / E.WEIGHTS_FILE)
    monkeypatch.setattr(E, "SHIPPED_DIR", shipped)
    with pytest.raises(E.EncoderFileError, match="has sha256"):
        E.load_or_train_encoder(progress=False)


def test_the_encoder_command_checks_and_retrains_on_purpose_only(shipped, monkeypatch, capsys, tmp_path):
    from vlr_lib.cli import encoder as cli

    from ..cli.helpers import call

    code, out, err = call(cli.main, [], capsys)
    assert code == 0 and E.shipped_sha256() in out and err == ""
    code, _, err = call(cli.main, ["--to", str(tmp_path / "x")], capsys)
    assert code == 2 and err.count("\n") == 1 and "argument --to" in err and "--retrain" in err
    _flip(shipped / E.WEIGHTS_FILE)
    monkeypatch.setattr(E, "SHIPPED_DIR", shipped)
    code, _, err = call(cli.main, [], capsys)
    assert code == 2 and err.count("\n") == 1 and str(shipped / E.WEIGHTS_FILE) in err and "--retrain" in err
    # --retrain writes a checked encoder where --to says (the recipe shrunk to seconds for the test)
    tiny = E._build(TINY, train=True)
    monkeypatch.setattr(E, "pretrain", lambda settings=None, progress=False: tiny)
    code, out, err = call(cli.main, ["--retrain", "--to", str(tmp_path / "new")], capsys)
    assert code == 0, err
    assert f"wrote {tmp_path / 'new' / E.WEIGHTS_FILE}" in out
    written = json.loads((tmp_path / "new" / E.MANIFEST_FILE).read_text())
    assert written["sha256"] == E.shipped_sha256(tmp_path / "new") and written["trained_with"]["threads"] == 1
    code, out, _ = call(cli.main, ["--retrain", "--to", str(tmp_path / "new")], capsys)
    assert code == 0 and "identical to the encoder that was there" in out


def test_an_unknown_image_encoder_is_one_line_naming_the_flag(capsys):
    from vlr_lib.cli import showdown, train

    from ..cli.helpers import call

    for main in (train.main, showdown.main):
        code, _, err = call(main, ["--image-encoder", "imagenet"], capsys)
        assert code == 2 and err.count("\n") == 1 and "--image-encoder" in err and "imagenet" in err


# ---------------------------------------------------------------- the shipped manifest, hostile (issue 35)
def _edit(folder: Path, change, rehash: bool = False) -> None:
    """Apply `change` to the manifest's JSON; `rehash`: seal it again, as someone who knows the hash would."""
    path = folder / E.MANIFEST_FILE
    manifest = json.loads(path.read_text())
    change(manifest)
    if rehash:
        manifest[E.MANIFEST_HASH] = E.manifest_hash(manifest)
    path.write_text(json.dumps(manifest, indent=2))


def _fifo(name: str):
    def make(folder: Path) -> None:
        (folder / name).unlink()
        os.mkfifo(folder / name)
    return make


M, W = E.MANIFEST_FILE, E.WEIGHTS_FILE
#: (id, damage, the file the message names, what it says)
MANIFEST_EDITS = [
    ("accuracy", lambda f: _edit(f, lambda m: m["pretrain_accuracy"].update(shape=0.99)), M, "does not hash to its"),
    ("date", lambda f: _edit(f, lambda m: m["trained_with"].update(date="2030-01-01T00:00:00+00:00")), M,
     "does not hash to its"),
    ("no hash", lambda f: _edit(f, lambda m: m.pop(E.MANIFEST_HASH)), M, "has no manifest_sha256"),
    ("hash not a string", lambda f: _edit(f, lambda m: m.update({E.MANIFEST_HASH: 1})), M, "for manifest_sha256"),
    ("width abc", lambda f: _edit(f, lambda m: m.update(width="abc")), M,
     "has a bad width ('abc': width must be an int"),
    ("width abc, resealed", lambda f: _edit(f, lambda m: m.update(width="abc"), rehash=True), M, "has a bad width"),
    ("width 0, resealed", lambda f: _edit(f, lambda m: m.update(width=0), rehash=True), M, "has a bad width (0:"),
    ("accuracy a string, resealed", lambda f: _edit(f, lambda m: m["pretrain_accuracy"].update(shape="high"),
                                                    rehash=True), M, "pretrain_accuracy.shape"),
    ("no trained_with, resealed", lambda f: _edit(f, lambda m: m.pop("trained_with"), rehash=True), M,
     "has no trained_with"),
    ("date a number, resealed", lambda f: _edit(f, lambda m: m["trained_with"].update(date=2026), rehash=True), M,
     "trained_with.date"),
    ("sha256 a list, resealed", lambda f: _edit(f, lambda m: m.update(sha256=[1]), rehash=True), M, "for sha256"),
    ("width 16, resealed", lambda f: _edit(f, lambda m: m.update(width=16), rehash=True), W,
     "the encoder its manifest describes (width 16"),
    ("manifest a FIFO", _fifo(M), M, "is a FIFO (named pipe), not a regular file"),
    ("weights a FIFO", _fifo(W), W, "is a FIFO (named pipe), not a regular file"),
    ("manifest a folder", lambda f: ((f / M).unlink(), (f / M).mkdir()), M, "is a folder, not a regular file"),
]


@pytest.mark.parametrize("damage, named, says", [c[1:] for c in MANIFEST_EDITS], ids=[c[0] for c in MANIFEST_EDITS])
def test_an_edited_or_special_shipped_manifest_is_refused_naming_the_field(shipped, damage, named, says,
                                                                          monkeypatch, capsys, no_training):
    """Was: an edited accuracy and date printed as fact by `python -m vlr_lib encoder`, a FIFO that hung it, and
    "width": "abc" blamed on encoder.pt."""
    from vlr_lib.cli import encoder as cli

    from ..cli.helpers import call

    damage(shipped)
    with within(30), pytest.raises(E.EncoderFileError) as err:
        E.shipped_encoder(shipped)
    message = str(err.value)
    assert "\n" not in message and says in message, message
    other = W if named == M else M
    assert f"{shipped / named} " in message and str(shipped / other) not in message, message
    monkeypatch.setattr(E, "SHIPPED_DIR", shipped)
    with within(30):
        code, out, err = call(cli.main, [], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and says in err, err
    assert "0.99" not in err and "2030" not in err


def test_the_shipped_manifest_is_sealed_and_its_weights_unchanged():
    """The hash was added with write_manifest; encoder.pt -- whose sha256 the records hold -- is the one shipped."""
    manifest = json.loads((E.SHIPPED_DIR / E.MANIFEST_FILE).read_text())
    assert manifest[E.MANIFEST_HASH] == E.manifest_hash(manifest) and E.manifest_problem(manifest) is None
    assert manifest["sha256"] == "ebde7dc456798a4e157307f9397b9bf88b84a055fbebe41ae4ae49513c2a233c"


def test_write_manifest_seals_and_refuses_a_bad_manifest(shipped):
    manifest = json.loads((shipped / E.MANIFEST_FILE).read_text())
    manifest.pop(E.MANIFEST_HASH)
    written = E.write_manifest(shipped, manifest)
    assert json.loads((shipped / E.MANIFEST_FILE).read_text()) == written
    assert written[E.MANIFEST_HASH] == E.manifest_hash(manifest) and E.shipped_sha256(shipped) == manifest["sha256"]
    before = (shipped / E.MANIFEST_FILE).read_bytes()
    with pytest.raises(ValueError, match="^manifest has a bad width"):
        E.write_manifest(shipped, {**manifest, "width": "abc"})
    assert (shipped / E.MANIFEST_FILE).read_bytes() == before


@pytest.mark.parametrize("which", [E.MANIFEST_FILE, E.WEIGHTS_FILE])
def test_a_fifo_in_the_cache_is_rebuilt_not_read(copy, built, which):
    _fifo(which)(copy)
    with within(60), pytest.warns(RuntimeWarning, match="FIFO"):
        enc = E.load_or_train_encoder(copy, TINY, progress=False)
    assert _same_state(enc, built[1]) and (copy / which).is_file()


# ---------------------------------------------------------------- --retrain's destination, before training
def _users_folder(folder: Path) -> None:
    """A folder of the user's: their own manifest.json (not an encoder's)."""
    folder.mkdir()
    (folder / E.MANIFEST_FILE).write_text('{"project": "mine", "version": 3}')


def _users_encoder_files(folder: Path) -> None:
    """encoder.pt and manifest.json of the user's own: the names match, the manifest is not a sealed encoder's."""
    folder.mkdir()
    (folder / E.WEIGHTS_FILE).write_bytes(b"my weights")
    (folder / E.MANIFEST_FILE).write_text('{"sha256": "mine"}')


def _fifo_manifest(folder: Path) -> None:
    folder.mkdir()
    os.mkfifo(folder / E.MANIFEST_FILE)


def _encoder_and_notes(folder: Path) -> None:
    """A sound encoder folder with one of the user's files beside it."""
    folder.mkdir()
    for name in (E.WEIGHTS_FILE, E.MANIFEST_FILE):
        (folder / name).write_bytes((E.SHIPPED_DIR / name).read_bytes())
    (folder / "notes.txt").write_text("mine")


@pytest.mark.parametrize("make", [_users_folder, _users_encoder_files, _fifo_manifest, _encoder_and_notes],
                         ids=lambda f: f.__name__.strip("_"))
def test_retrain_refuses_a_folder_of_the_users_files_before_training(make, tmp_path, capsys, no_training):
    """Was: --retrain --to D overwrote the user's own manifest.json (after two minutes of training)."""
    from vlr_lib.cli import encoder as cli

    from ..cli.helpers import call, snapshot

    make(tmp_path / "d")
    before = snapshot(tmp_path)
    with within(30):
        code, out, err = call(cli.main, ["--retrain", "--to", str(tmp_path / "d")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "argument --to: " in err and "not an encoder written by --retrain" in err
    assert snapshot(tmp_path) == before


def test_retrain_checks_the_shipped_folder_can_be_written_before_training(shipped, monkeypatch, capsys, no_training):
    """Was: with a read-only destination, a raw OSError about a .tmp file after the two minutes of training."""
    import errno
    import tempfile

    from vlr_lib.cli import encoder as cli

    from ..cli.helpers import call, snapshot

    real = tempfile.TemporaryFile

    def read_only(*args, **kwargs):
        if Path(kwargs.get("dir", "")).resolve() == shipped.resolve():
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    monkeypatch.setattr(E, "SHIPPED_DIR", shipped)
    before = snapshot(shipped)
    code, out, err = call(cli.main, ["--retrain"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "argument --to: " in err and "Read-only file system" in err and "the shipped encoder's folder" in err
    code, _, err = call(cli.main, ["--retrain", "--to", str(shipped)], capsys)
    assert code == 2 and "Read-only file system" in err
    assert snapshot(shipped) == before


@pytest.mark.parametrize("argv, flag", [(["--progress"], "--progress"), (["--to", "x"], "--to"),
                                        (["--progress", "--to", "x"], "--to")])
def test_flags_of_retrain_alone_are_rejected_without_it(argv, flag, capsys, tmp_path, monkeypatch, no_training):
    """Was: `encoder --progress` silently ignored."""
    from vlr_lib.cli import encoder as cli

    from ..cli.helpers import call

    monkeypatch.chdir(tmp_path)
    code, out, err = call(cli.main, argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and f"argument {flag}: is for --retrain" in err, err
    assert list(tmp_path.iterdir()) == []


def test_retrain_rewrites_an_encoder_it_wrote_even_a_damaged_one(tmp_path, monkeypatch, capsys):
    """A folder holding only an encoder --retrain wrote (sealed manifest) is replaced, also when its weights were
    cut short (a write killed between the weights and the manifest); the result loads."""
    from vlr_lib.cli import encoder as cli

    from ..cli.helpers import call

    folder = tmp_path / "enc"
    folder.mkdir()
    for name in (E.WEIGHTS_FILE, E.MANIFEST_FILE):
        (folder / name).write_bytes((E.SHIPPED_DIR / name).read_bytes())
    (folder / E.WEIGHTS_FILE).write_bytes(b"cut")
    tiny = E._build(TINY, train=True)
    monkeypatch.setattr(E, "pretrain", lambda settings=None, progress=False: tiny)
    code, out, err = call(cli.main, ["--retrain", "--to", str(folder)], capsys)
    assert code == 0, err
    written = json.loads((folder / E.MANIFEST_FILE).read_text())
    assert E.manifest_problem(written) is None and E.shipped_encoder(folder).manifest == written


def test_write_encoder_checks_the_manifest_before_replacing_the_weights(shipped, built):
    before = {n: (shipped / n).read_bytes() for n in (E.WEIGHTS_FILE, E.MANIFEST_FILE)}
    with pytest.raises(ValueError, match="trained_with.kernels"):
        E.write_encoder(shipped, built[1], trained_with={"threads": 1})
    assert {n: (shipped / n).read_bytes() for n in before} == before
    written = E.write_encoder(shipped, built[1], trained_with={"kernels": "default", "threads": 1, "cpu": "x",
                                                               "date": "2026-11-27T00:00:00+00:00"})
    assert E.shipped_encoder(shipped).manifest == written and _same_state(E.shipped_encoder(shipped), built[1])
