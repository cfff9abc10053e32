"""vlr_lib.experiments.showdown (the experiment of notebook 10) and its command line (python -m vlr_lib showdown).

The showdown is run on a tiny shapes set and on a fake Flickr30K feature cache to
check the columns the figures read (sel_*, test_*, COCOS) and the stored-table
reuse (the cell runner itself: tests/experiments/test_cells.py); the Flickr30K cache that data_scripts/extract_features.py writes is
found by vlr-grid and by the showdown (one id convention,
vlr_lib.features.flickr_cache_id); data_scripts/run_showdown.py is the same command.
"""
from __future__ import annotations

import importlib.util
import math
import json
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from vlr_lib.report.markdown import markdown_block
from vlr_lib.experiments import cells, showdown as sd

from ..data.fakes import FakeClip
from .test_cells import tiny_spec

ROOT = Path(__file__).resolve().parents[2]


def load_script(name: str):
    """A data_scripts/ file as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "data_scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the showdown


def test_the_learned_temperature_losses_race_at_their_defaults():
    assert len(sd.configs()) == 24 and {"loss": "clip_learned"} in sd.configs() and {"loss": "siglip"} in sd.configs()


def test_learned_histories_refuse_a_race_without_learned_parameters():
    with pytest.raises(ValueError, match="no learned parameter"):
        sd.learned_histories({"features": pd.DataFrame(columns=["epoch", "name", "shown"])})


def test_the_goal_cir_contestants_run_at_the_showdowns_tau():
    assert all(c.get("tau") == sd.CIR_TAU for c in sd.configs() if c["loss"].startswith("goal:cir,"))


def test_run_stores_reuses_and_writes_markdown(tmp_path, monkeypatch):
    spec = tiny_spec()
    first = sd.run(spec, command="pytest", out=tmp_path)
    assert not first.reused and len(first.runs) == 24 and first.meta["n_runs"] == 24
    assert first.meta["epochs_trained_now"] == 24 * spec.epochs and first.meta["command"] == "pytest"
    # issue 36: the learned parameters of clip_learned and siglip, per epoch, in the units the chapter reads
    paths = sd.learned_paths(first)
    assert len(paths) == 3 * spec.epochs * len(spec.seeds)  # CLIP's t', SigLIP's t' and b; each epoch and seed
    assert set(zip(paths["loss"], paths["parameter"])) == set(sd.LEARNED_UNITS)
    clip = paths[paths["loss"] == "clip_learned"]
    assert (clip["shown"] - (-clip["value"]).map(math.exp)).abs().max() < 1e-12 and (clip["name"] == "CLIP τ").all()
    assert clip["value"].between(0, math.log(100)).all()  # clamped as open_clip clamps it
    curves = sd.learned_histories({"tiny": paths})["tiny"]
    assert [r["epoch"] for r in curves] == list(range(1, spec.epochs + 1))
    bias = paths[paths["name"] == "SigLIP b"].groupby("epoch")["shown"].mean()
    assert [r["SigLIP b"] for r in curves] == pytest.approx(list(bias))
    assert {"sel_rsum", "sel_map5", "sel_pr_auc", "test_rsum", "sel_cocos_smooth_ap_i2t_C_q"} <= set(first.runs.columns)
    meta = json.loads((tmp_path / sd.META_FILE).read_text())
    assert meta["spec"] == spec.key() and "CPU" in meta["hardware"] and meta["chance_rsum_test"] > 0

    monkeypatch.setattr(cells, "grid", lambda *a, **k: pytest.fail("a matching stored table must not retrain"))
    second = sd.run(spec, out=tmp_path)
    assert second.reused and second.meta == first.meta
    pd.testing.assert_frame_equal(second.runs, first.runs)  # rebuilt from the cells: the very table trained
    # issue 35: an edited runs.csv was shown ("rsum 599.0 ± 0.0" beside unchanged R@K); the cells are the truth
    edited = pd.read_csv(tmp_path / "runs.csv").assign(sel_rsum=599.0)
    edited.to_csv(tmp_path / "runs.csv", index=False)
    pd.testing.assert_frame_equal(sd.run(spec, out=tmp_path).runs, first.runs)
    (tmp_path / "runs.csv").unlink()  # a copy for the user: not needed to reuse the cells
    assert sd.stored(spec, tmp_path) is not None
    cell = tmp_path / "cells" / f"{first.meta['keys'][3]}.json"
    cell.rename(cell.with_suffix(".gone"))  # a cell deleted since: not reused, trained again
    assert sd.stored(spec, tmp_path) is None
    cell.with_suffix(".gone").rename(cell)
    meta["keys"][0] = "../../elsewhere"  # keys name cells, never paths
    (tmp_path / sd.META_FILE).write_text(json.dumps(meta))
    assert sd.stored(spec, tmp_path) is None
    assert sd.stored(tiny_spec(epochs=3), tmp_path) is None  # other settings: not reused

    block = markdown_block(second.runs, second.meta)
    assert "| loss | hyper-param | i2t R@1 |" in block and "`pytest`" in block and "|  | T^con | T^nca | T^cir |" in block


def test_flickr_mode_fails_clearly_without_features(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare_flickr30k.py") as err:
        sd.run(cells.spec_for("flickr30k", True, cache_root=str(tmp_path)), out=tmp_path / "out")
    assert "extract_features.py --data flickr30k" in str(err.value) and "clip-vit-b32" in str(err.value)


# --------------------------------------------------------------------------- one Flickr30K cache id


@pytest.mark.parametrize("where", ["local", "hub", "hub-mirror"])
def test_cli_and_showdown_find_the_cache_extract_features_writes(where, tmp_path, monkeypatch):
    """extract_features.py writes the caches (real script, real save); vlr-grid and the showdown read the same ones."""
    import vlr_lib.data
    import vlr_lib.data.flickr30k as F30
    from vlr_lib import features as feats
    from vlr_lib.cli import common
    from vlr_lib.cli import grid as grid_cli
    from vlr_lib.data import make_shapes

    dd = make_shapes(6, 3, 3, seed=2)  # the Flickr30K schema
    loads = []

    def fake_load(source, **kw):
        loads.append(source)  # the resolved source (vlr_lib.data.flickr30k.Source)
        return dd

    commit = "c0ffee" * 6 + "c0ff"
    hub = types.SimpleNamespace(dataset_info=lambda repo, revision: types.SimpleNamespace(sha=commit))
    monkeypatch.setattr(F30, "_hub_api", lambda: hub)  # no network: the branch resolves to this commit
    monkeypatch.setattr(vlr_lib.data, "load_flickr30k", fake_load)  # what the script imports
    monkeypatch.setattr(F30, "load_flickr30k", fake_load)  # what the CLI imports
    for name in (F30.ENV_REPO, F30.ENV_REVISION, "VLR_DATA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLR_CACHE", str(tmp_path / "cache"))
    if where == "hub-mirror":  # a mirror whose id does not say flickr30k
        monkeypatch.setenv(F30.ENV_REPO, "someone/f30k-mirror")
    root, local = tmp_path / "features", tmp_path / "flickr30k"
    local.mkdir()
    data_args = ["--data-path", str(local)] if where == "local" else []

    monkeypatch.setattr(feats, "build_encoder", lambda *a, **k: FakeClip())
    script = load_script("extract_features")
    assert script.main(["--data", "flickr30k", "--cache-root", str(root), *data_args]) == 0
    written = {feats.read_manifest(m.parent)["split"]: m.parent for m in root.glob("*/manifest.json")}
    assert set(written) == {"train", "validation", "test"}
    manifest = feats.read_manifest(written["train"])
    expected = {"local": ("flickr30k:flickr30k", ""),
                "hub": (F30.DEFAULT_REPO_ID, commit),
                "hub-mirror": ("someone/f30k-mirror", commit)}[where]
    assert (manifest["dataset_id"], manifest["revision"]) == expected

    # vlr-grid --data flickr30k: must load those caches, never encode again.
    monkeypatch.setattr(feats, "build_encoder", lambda *a, **k: pytest.fail("the CLI missed the script's cache"))
    args = grid_cli.parser().parse_args(["--data", "flickr30k", "--cache-root", str(root), "--no-progress",
                                         *data_args])
    got = common.flickr_features(args, "cpu")
    for split in ("train", "validation"):
        cached = feats.load_features(written[split])
        for a, b in zip(got[split], (cached.img, cached.txt, cached.caption_to_image)):
            assert torch.equal(a, b)
    assert loads[0] == loads[1], "the script and the CLI load the same data"

    # the showdown finds the same three folders
    assert cells.flickr_feature_dirs(root) == written

    # the VSE++ setting: the same image features, and the captions of the data they were extracted from as token ids
    args = grid_cli.parser().parse_args(["--data", "flickr30k", "--setting", "vsepp", "--cache-root", str(root),
                                         "--no-progress", *data_args])
    vsepp = common.load_data(args, "vsepp", "cpu")
    assert torch.equal(vsepp["train"][0], got["train"][0]) and not vsepp["train"][1].is_floating_point()
    assert vsepp["val"][1].shape[0] == got["validation"][1].shape[0]
    spec = cells.spec_for("flickr30k", True, "vsepp", cache_root=str(root), min_count=1,
                       data_path=str(local) if where == "local" else None)
    data = cells.load_data(spec)
    assert not data.train[1].is_floating_point() and data.test[1].shape[0] == 15  # 3 test images x 5 captions
    same = [(x.dataset_id, x.revision, x.path) for x in (loads[0], loads[-1])]
    assert same[0] == same[1], "the showdown reads the captions of the data the features were extracted from"


# --------------------------------------------------------------------------- the command line


def test_script_help():
    script = ROOT / "data_scripts" / "run_showdown.py"
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=True,
                         timeout=120)
    for flag in ("--data", "--fast", "--seeds", "--epochs", "--device", "--cache-root", "--out", "--markdown",
                 "--force"):
        assert flag in out.stdout
    assert "vlr_lib.experiments.showdown" in out.stdout


def test_canonical_command_writes_the_environment_out_as_flags(monkeypatch):
    from vlr_lib.cli import showdown as command

    monkeypatch.setenv("VLR_FAST", "1")
    monkeypatch.delenv("VLR_DATA", raising=False)
    args = command.resolve_env(command.parser().parse_args(["--seeds", "0,2", "--out", "runs/x y"]))
    assert command.canonical_command(args) == ("python -m vlr_lib showdown --data shapes --setting features --fast "
                                               "--seeds 0,2 --out 'runs/x y'")


# --------------------------------------------------------------------------- the settings


@pytest.mark.parametrize("setting", ["vsepp", "e2e"])
def test_run_in_the_settings_that_train_a_text_encoder(setting, tmp_path):
    spec = tiny_spec(setting=setting, epochs=1)
    if setting == "vsepp":
        spec = replace(spec, word_dim=8, hidden=8)
    done = sd.run(spec, out=tmp_path)
    assert len(done.runs) == 24 and set(done.runs["setting"]) == {setting}
    assert done.meta["spec"]["setting"] == setting and done.meta["setting"].startswith(
        {"vsepp": "VSE++", "e2e": "end to end"}[setting])
    assert (done.runs["sel_rsum"] > 0).all() and "token ids" in done.meta["data"]
    assert sd.run(spec, out=tmp_path).reused
    block = markdown_block(done.runs, done.meta)
    assert f"setting {setting}" in block and {"vsepp": "VSE++ setting", "e2e": "end to end"}[setting] in block


@pytest.fixture
def flickr_cache(tmp_path, monkeypatch):
    """Flickr30K feature caches written by the real extract_features.py (FakeClip) from a local copy."""
    import vlr_lib.data
    import vlr_lib.data.flickr30k as F30
    from vlr_lib import features as feats
    from vlr_lib.data import make_shapes

    data = {"dd": make_shapes(8, 4, 4, seed=2)}
    monkeypatch.setattr(vlr_lib.data, "load_flickr30k", lambda path=None, **kw: data["dd"])
    monkeypatch.setattr(F30, "load_flickr30k", lambda path=None, **kw: data["dd"])
    monkeypatch.setattr(feats, "build_encoder", lambda *a, **k: FakeClip())
    root, local = tmp_path / "features", tmp_path / "flickr30k"
    local.mkdir()
    assert load_script("extract_features").main(["--data", "flickr30k", "--cache-root", str(root),
                                                  "--data-path", str(local)]) == 0
    return root, local, data


def test_flickr_vsepp_reads_the_captions_the_features_were_extracted_from(flickr_cache):
    root, local, data = flickr_cache
    spec = cells.spec_for("flickr30k", True, "vsepp", cache_root=str(root), data_path=str(local), n_train=6,
                       batch_size=6, dim=8, word_dim=8, hidden=8, epochs=1, probe=4, min_count=1, seeds=(0,))
    loaded = cells.load_data(spec)
    texts = [c for five in data["dd"]["train"]["caption"][:6] for c in five]
    from vlr_lib.train import caption_ids

    ids, vocab = caption_ids({"train": texts})
    assert torch.equal(loaded.train[1], ids["train"]) and loaded.train[0].shape == (6, 12)
    assert "token ids" in loaded.description and loaded.data_id.endswith("min_count=1|probe=4")
    done = sd.run(spec, out=root.parent / "out")
    assert len(done.runs) == 24 and set(done.runs["setting"]) == {"vsepp"}
    with pytest.raises(FileNotFoundError, match="pass --data-path"):
        cells.load_data(replace(spec, data_path=None))
    data["dd"] = make_other_captions(data["dd"])
    with pytest.raises(ValueError, match="are not those its cached features were extracted from"):
        cells.load_data(spec)


def make_other_captions(dd):
    """The same images with the captions of another seed: what a different copy of the data looks like."""
    from vlr_lib.data import make_shapes

    other = make_shapes(8, 4, 4, seed=9)
    return type(dd)({s: dd[s].remove_columns("caption").add_column("caption", other[s]["caption"]) for s in dd})


def test_the_cli_trains_flickr_in_the_vsepp_setting(flickr_cache, capsys):
    from tests.cli.helpers import call
    from vlr_lib.cli import train as train_cli

    root, local, _ = flickr_cache
    argv = ["--data", "flickr30k", "--setting", "vsepp", "--cache-root", str(root), "--data-path", str(local),
            "--batch-size", "4", "--dim", "8", "--word-dim", "8", "--hidden", "8", "--epochs", "1", "--min-count", "1",
            "--no-progress", "--device", "cpu"]
    code, out, err = call(train_cli.main, argv, capsys)
    assert code == 0, err
    assert "setting: vsepp" in out


def test_a_folder_of_other_files_is_refused_before_anything_is_loaded(tmp_path, monkeypatch):
    """Issue 23: showdown.run(out=notes) wrote into any folder."""
    (tmp_path / "notes.md").write_text("mine")
    monkeypatch.setattr(cells, "load_data", lambda spec: pytest.fail("loaded data for a folder it must refuse"))
    with pytest.raises(ValueError, match=r"^out .*notes\.md.*not a run folder"):
        sd.run(tiny_spec(), out=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.md"]
