"""The notebooks' settings cell and demo batches."""
from __future__ import annotations

import pytest
import torch

from vlr_lib import demo, notebook


def test_setup_reads_environment(monkeypatch):
    monkeypatch.setenv("VLR_FAST", "1")
    monkeypatch.setenv("VLR_DATA", "shapes")
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    threads = torch.get_num_threads()
    try:
        cfg = notebook.setup(seed=3, renderer=None)
        assert torch.get_num_threads() == 1  # fast mode on CPU runs single-threaded
    finally:
        torch.set_num_threads(threads)
    assert cfg.fast and cfg.data == "shapes" and cfg.device == torch.device("cpu")
    assert cfg.pick(1, 2) == 1
    monkeypatch.setenv("VLR_FAST", "0")
    assert notebook.setup(renderer=None).pick(1, 2) == 2


def test_setup_seeds_every_generator(monkeypatch):
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    notebook.setup(seed=7, renderer=None)
    a = torch.rand(3)
    notebook.setup(seed=7, renderer=None)
    torch.testing.assert_close(torch.rand(3), a)


@pytest.mark.parametrize("var, value", [("VLR_DATA", "coco"), ("VLR_FAST", "maybe")])
def test_setup_rejects_bad_environment(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=var):
        notebook.setup(renderer=None)


def test_a_longer_exercise_trains_in_fast_mode_or_when_asked(capsys):
    fast, full = (notebook.Settings(fast=f, data="shapes", device=torch.device("cpu"), seed=0) for f in (True, False))
    assert notebook.longer_exercise(fast, False, "6 runs") and capsys.readouterr().out == ""
    assert notebook.longer_exercise(full, True, "6 runs") and capsys.readouterr().out == ""
    assert not notebook.longer_exercise(full, False, "6 runs of 20 epochs")
    assert "6 runs of 20 epochs" in capsys.readouterr().out
    with pytest.raises(TypeError, match="run"):
        notebook.longer_exercise(full, "yes", "6 runs")


def test_demo_embeddings_unit_norm_deterministic_and_noise_controls_difficulty():
    img, txt = demo.demo_embeddings(n=16, dim=8, noise=0.5, seed=1)
    torch.testing.assert_close(img.norm(dim=1), torch.ones(16, dtype=torch.float64))
    img2, _ = demo.demo_embeddings(n=16, dim=8, noise=0.5, seed=1)
    torch.testing.assert_close(img, img2)
    easy = (img * txt).sum(1).mean()
    i3, t3 = demo.demo_embeddings(n=16, dim=8, noise=3.0, seed=1)
    assert float((i3 * t3).sum(1).mean()) < float(easy)
    with pytest.raises(ValueError, match="noise"):
        demo.demo_embeddings(noise=-1.0)


@pytest.mark.parametrize("n_images, per, dim", [(2, 1, 2), (4, 5, 8), (10, 3, 16)])
def test_demo_retrieval_batch_shapes_unit_norm_and_grouping(n_images, per, dim):
    img, txt, c2i = demo.demo_retrieval_batch(n_images, per, dim, noise=0.7, seed=3)
    assert img.shape == (n_images, dim) and txt.shape == (n_images * per, dim)
    torch.testing.assert_close(img.norm(dim=1), torch.ones(n_images, dtype=torch.float64))
    torch.testing.assert_close(txt.norm(dim=1), torch.ones(n_images * per, dtype=torch.float64))
    assert c2i.tolist() == [i for i in range(n_images) for _ in range(per)]
    again = demo.demo_retrieval_batch(n_images, per, dim, noise=0.7, seed=3)
    assert all(torch.equal(a, b) for a, b in zip((img, txt, c2i), again))


def test_demo_retrieval_batch_one_caption_is_demo_embeddings_and_noise_zero_is_perfect():
    img, txt, _ = demo.demo_retrieval_batch(7, 1, 5, noise=0.9, seed=11)
    ref_img, ref_txt = demo.demo_embeddings(7, 5, 0.9, 11)
    torch.testing.assert_close(img, ref_img)
    torch.testing.assert_close(txt, ref_txt)
    img, txt, c2i = demo.demo_retrieval_batch(4, 5, 8, noise=0.0)
    torch.testing.assert_close(txt, img[c2i])


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(n_images=1), "n_images"), (dict(captions_per_image=0), "captions_per_image"), (dict(dim=1), "dim"),
     (dict(noise=-0.1), "noise"), (dict(noise=float("nan")), "noise")],
)
def test_demo_retrieval_batch_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        demo.demo_retrieval_batch(**kwargs)
    with pytest.raises(TypeError, match="n_images"):
        demo.demo_retrieval_batch(n_images=2.0)
    with pytest.raises(ValueError, match="^n "):
        demo.demo_embeddings(n=1)


def test_training_features_shapes_mode(monkeypatch):
    monkeypatch.setenv("VLR_FAST", "1")
    monkeypatch.setenv("VLR_DATA", "shapes")
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    threads = torch.get_num_threads()
    try:
        cfg = notebook.setup(renderer=None)
        train, val = notebook.training_features(cfg, n_train=(12, 99), n_val=(6, 99))
    finally:
        torch.set_num_threads(threads)
    assert train[0].shape[0] == 12 and val[0].shape[0] == 6
    assert torch.equal(torch.bincount(train[2]), torch.full((12,), 5))  # five captions per image
    assert train[0].shape[1] == val[0].shape[1] and train[1].shape[1] == val[1].shape[1]


def test_training_features_flickr30k_without_cache_says_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setenv("VLR_DATA", "flickr30k")
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    monkeypatch.setenv("VLR_CACHE", str(tmp_path))  # an empty cache
    cfg = notebook.setup(renderer=None)
    with pytest.raises(FileNotFoundError, match="extract_features.py"):
        notebook.training_features(cfg)


def test_paths_never_follow_the_working_directory(monkeypatch, tmp_path):
    from vlr_lib import paths

    monkeypatch.delenv("VLR_RUNS", raising=False)
    monkeypatch.setenv("VLR_CACHE", str(tmp_path / "c"))
    assert paths.cache_root() == tmp_path / "c"
    assert paths.feature_cache_root() == tmp_path / "c" / "features"
    assert paths.runs_dir() == tmp_path / "c" / "runs"
    monkeypatch.setenv("VLR_RUNS", str(tmp_path / "r"))
    assert paths.runs_dir() == tmp_path / "r"
    for name, read in (("VLR_RUNS", paths.runs_dir), ("VLR_CACHE", paths.cache_root)):
        monkeypatch.setenv(name, "relative/dir")
        with pytest.raises(ValueError, match=f"{name} must be an absolute path"):
            read()
        monkeypatch.setenv(name, str(tmp_path))
    monkeypatch.delenv("VLR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as the XDG specification says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_root() == tmp_path / "home" / ".cache" / "vlr-workbook"
    package = paths.repo_root() / "vlr_lib"
    assert package not in paths.runs_dir().parents and package not in paths.cache_root().parents
