"""Every bad value of issue 9 (and the ones found since), for every command line, in-process.

Each case: exit code 2, ONE line on stderr that starts with the program's name and names the
flag, no traceback, and no file created or changed (the working folder is snapshotted
before and after). Real processes prove the same end to end in test_processes.py.
"""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from tests.cli.helpers import ROOT, TINY, call, snapshot
from vlr_lib.cli import grid, showdown, train


def load_script(name: str):
    """A data_scripts/ file as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "data_scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A working folder holding a file where a folder is expected and a folder that is not a dataset."""
    monkeypatch.chdir(tmp_path)
    for name in ("VLR_DATA", "VLR_FAST", "VLR_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    (tmp_path / "mine").mkdir()  # a folder of the user's that looks like a grid's, but has no marker
    (tmp_path / "mine" / "runs.csv").write_text("my,own\n1,2\n")
    return tmp_path


def check(main, argv, flag: str, work, capsys, prog: str | None = None) -> str:
    before, runs_before = snapshot(work), (ROOT / "runs").exists()
    code, out, err = call(main, argv, capsys)
    assert code == 2, (argv, code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and flag in lines[0], (flag, err)
    if prog is not None:
        assert lines[0].startswith(f"{prog}: error: "), err
    assert snapshot(work) == before, "a user error must not create or change files"
    assert (ROOT / "runs").exists() == runs_before
    return lines[0]


LONG = "n" * 256  # one name of 256 bytes: over the 255 every common file system takes
WIDE = "é" * 128  # 128 characters, 256 bytes in UTF-8
DEEP = "/".join(["d" * 200] * 21)  # short names, a path over 4096 bytes
NO_CUDA = [] if torch.cuda.is_available() else [(["--device", "cuda"], "--device")]

TRAIN_CASES = [
    (["--epochs", "0"], "--epochs"),  # was: silently 10 epochs
    (["--lr", "0"], "--lr"),  # was: silently 2e-4
    (["--lr", "nan"], "--lr"),
    (["--lr", "-1e-3"], "--lr"),
    (["--dim", "0"], "--dim"),  # was: silently 512
    (["--batch-size", "0"], "--batch-size"),  # was: "got 128"
    (["--batch-size", "1"], "--batch-size"),
    (["--batch-size", "2.5"], "--batch-size"),
    (["--n-val", "1"], "--n-val"),  # was: ZeroDivisionError after training
    (["--n-train", "1"], "--n-train"),  # was: "img_feats contains NaN or inf"
    (["--n-train", "0"], "--n-train"),
    (["--difficulty", "1.5"], "--difficulty"),
    (["--seed", "-1"], "--seed"),
    (["--data-seed", "x"], "--data-seed"),
    (["--lr-decay-epoch", "-1"], "--lr-decay-epoch"),
    (["--device", "bogus"], "--device"),  # was: a RuntimeError traceback
    (["--device", "cuda:7x"], "--device"),
    *NO_CUDA,
    (["--reduction", "none"], "--reduction"),  # was: RuntimeError deep in the engine
    (["--history", "afile/h.csv"], "--history"),  # was: results lost after training
    (["--history", "h.txt"], "--history"),
    (["--history", "notes"], "--history"),
    (["--checkpoint-dir", "afile"], "--checkpoint-dir"),
    (["--loss", "nope"], "--loss"),
    (["--loss", "goal:cir,nope"], "--loss"),
    (["--loss", "info_nce", "--gamma", "60"], "--gamma"),
    (["--loss", "info_nce", "--temperature", "0"], "--temperature"),
    (["--loss", "unified", "--margin", "-0.1"], "--margin"),
    (["--loss", "cross_example_softmax", "--topk", "0"], "--topk"),
    (["--loss", "cross_example_softmax", "--topk", "1.5"], "--topk"),
    (["--loss", "cross_example_softmax", "--topk", "-0.5"], "--topk"),
    (["--data", "flickr30k", "--data-path", "missing"], "--data-path"),  # was: a traceback
    (["--data", "flickr30k", "--mode", "e2e"], "--mode"),
    (["--data", "flickr30k", "--n-train", "10"], "--n-train"),
    (["--data", "shapes", "--backbone", "vsepp-resnet50"], "--backbone"),
    (["--data", "flickr30k", "--setting", "e2e"], "--setting"),
    (["--setting", "clip"], "--setting"),
    (["--setting", "vsepp", "--mode", "features"], "--mode"),  # the old name and the new disagree
    (["--setting", "e2e", "--image-encoder", "random"], "--image-encoder"),
    (["--setting", "features", "--text-encoder", "gru"], "--text-encoder"),
    (["--setting", "e2e", "--word-dim", "8"], "--word-dim"),
    (["--setting", "vsepp", "--hidden", "0"], "--hidden"),
    (["--setting", "vsepp", "--min-count", "0"], "--min-count"),
    (["--data", "flickr30k", "--image-encoder", "random"], "--image-encoder"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--cache-root", "afile"], "--cache-root"),  # issue 23: flags of another mode were silently ignored
    (["--data", "shapes", "--cache-root", "."], "--cache-root"),
    (["--setting", "e2e", "--head", "mlp"], "--head"),
    (["--head", "mlp"], "--head"),  # shapes' default setting is e2e
    (["--loss", "warmup:triplet_all:2:triplet_hardest", "--epochs", "2"], "--loss"),  # Triplet-SH never trains
    (["--loss", "warmup:triplet_all:3:triplet_hardest", "--epochs", "2"], "--loss"),
    (["--checkpoint-dir", ""], "--checkpoint-dir"),  # issue 23: was last.pt in the current folder
    (["--checkpoint-dir", "/proc"], "--checkpoint-dir"),
    (["--history", ""], "--history"),
    # issue 23: numbers range-checked in the parser, before anything is allocated
    (["--seed", str(2**64)], "--seed"),  # was: "Overflow when unpacking long long"
    (["--seed", str(2**63)], "--seed"),
    (["--data-seed", str(2**63)], "--data-seed"),
    (["--batch-size", str(10**12)], "--batch-size"),  # was: --loss named, a C++ stack frame
    (["--n-train", str(10**14)], "--n-train"),  # was: MemoryError, exit 1
    (["--n-train", "1e14"], "--n-train"),
    (["--n-val", str(10**14)], "--n-val"),
    (["--dim", str(10**12)], "--dim"),  # was: MemoryError, exit 1
    (["--lr", "1e308"], "--lr"),  # was: "cannot be converted to type float without overflow", exit 1
    (["--loss", "unified", "--gamma", "1e308"], "--gamma"),  # was: --loss named
    (["--loss", "info_nce", "--temperature", "1e-320"], "--temperature"),  # was: --loss, "temperature=0"
    (["--loss", "sampled_softmax", "--scale", "3e38"], "--scale"),  # float32-finite, the loss overflows: was --loss
    (["--dist-timeout", "1e308"], "--dist-timeout"),  # was: OverflowError
    # issue 22: clipping at 0 would stop training; a negative norm means nothing
    (["--grad-clip", "0"], "--grad-clip"),
    (["--grad-clip", "-2"], "--grad-clip"),
    (["--grad-clip", "nan"], "--grad-clip"),
    (["--grad-clip", "two"], "--grad-clip"),
    (["--optimizer-at-switch", "reset"], "--optimizer-at-switch"),
    # issue 33: AdamW for VSE∞'s recipe; a weight decay below 0 or not a number means nothing
    (["--optimizer", "sgd"], "--optimizer"),
    (["--weight-decay", "-1"], "--weight-decay"),
    (["--weight-decay", "nan"], "--weight-decay"),
    (["--weight-decay", "inf"], "--weight-decay"),
    # issue 35: was a tqdm OverflowError after the data had loaded (14 s), exit 1
    (["--epochs", str(10**21)], "--epochs"),
    (["--epochs", "100001"], "--epochs"),
    (["--lr-decay-epoch", str(10**21)], "--lr-decay-epoch"),
    # issue 35: a name over 255 bytes was a 48-line OSError traceback
    *[([flag, path], flag) for flag, path in (("--history", LONG + ".csv"), ("--checkpoint-dir", LONG),
                                              ("--checkpoint-dir", "ck/" + WIDE), ("--history", DEEP + "/h.csv"))],
]


@pytest.mark.parametrize("argv, flag", TRAIN_CASES)
def test_train_rejects(argv, flag, work, capsys):
    check(train.main, argv, flag, work, capsys, prog="vlr-train")


def test_a_dataset_smaller_than_the_batch_is_an_error_before_training(work, capsys):
    """--mode features with 10 training images and the default batch of 128: found when the data are loaded."""
    line = check(train.main, ["--mode", "features", "--n-train", "10", "--n-val", "5"], "--batch-size", work, capsys)
    assert "(10)" in line and "128" in line


GRID_CASES = [
    (["--losses", ""], "--losses"),  # was: runs.csv truncated to one byte, exit 0
    (["--losses", " , "], "--losses"),
    (["--losses", "nope"], "--losses"),
    (["--losses", "info_nce", "--param", "gamma=1,2"], "--param"),  # a param no selected loss takes
    (["--param", "reduction=none"], "--param"),
    (["--param", "margin"], "--param"),
    (["--param", "margin="], "--param"),
    (["--param", "margin=-1"], "--param"),
    (["--param", "margin=0.1", "--param", "margin=0.2"], "--param"),
    (["--losses", "cross_example_softmax", "--param", "topk=0"], "--param"),
    (["--seeds", "0,0"], "--seeds"),  # was: "2 seeds, std 0"
    (["--seeds", ""], "--seeds"),
    (["--seeds", "0,x"], "--seeds"),
    (["--out", "afile"], "--out"),
    (["--epochs", "0"], "--epochs"),
    (["--device", "bogus"], "--device"),
    (["--n-val", "1"], "--n-val"),
    (["--losses", "info_nce,info_nce"], "--losses"),  # issue 23: was "± 0.0 over 2 seeds" for one run
    (["--losses", "goal,goal:cir,sig-ms"], "--losses"),  # a GOAL combination twice
    (["--losses", "unified", "--param", "margin=0.1,0.10"], "--param"),
    (["--losses", "info_nce,warmup:triplet_all:2:triplet_hardest"], "--losses"),  # TINY has --epochs 2
    (["--out", ""], "--out"),  # issue 23: was cells/ and runs.csv in the current folder
    (["--out", "notes"], "--out"),  # a folder of other files
    (["--out", "mine"], "--out"),  # was: the user's runs.csv overwritten, exit 0
    (["--out", "/proc"], "--out"),  # was: trained, then "[Errno 2] ... '/proc/cells'"
    (["--seeds", f"0,{2**64}"], "--seeds"),  # was: "Overflow when unpacking long long"
    (["--batch-size", str(10**12)], "--batch-size"),
    (["--param", "gamma=1e308"], "--param"),
    (["--dist-timeout", "1e308"], "--dist-timeout"),
    (["--grad-clip", "0"], "--grad-clip"),
    (["--grad-clip", "-1"], "--grad-clip"),
    (["--optimizer", "sgd"], "--optimizer"),
    (["--weight-decay", "-1e-4"], "--weight-decay"),
    (["--epochs", str(10**21)], "--epochs"),  # issue 35
    (["--out", LONG], "--out"),
    (["--out", f"runs/{WIDE}/g"], "--out"),
    (["--losses", "unified", "--param", "margin=0.2,0.2000000001"], "--param"),  # one run in float32
]


@pytest.mark.parametrize("argv, flag", GRID_CASES)
def test_grid_rejects(argv, flag, work, capsys):
    check(grid.main, [*TINY, "--out", "g", *argv], flag, work, capsys, prog="vlr-grid")


SHOWDOWN_CASES = [
    (["--epochs", "0"], "--epochs"),
    (["--seeds", "1,1"], "--seeds"),
    (["--device", "bogus"], "--device"),
    (["--markdown", "afile/r.md"], "--markdown"),
    (["--out", "afile"], "--out"),
    (["--data", "flickr30k", "--cache-root", "missing"], "--cache-root"),
    (["--data", "coco"], "--data"),
    (["--data", "flickr30k", "--setting", "e2e"], "--setting"),
    (["--data", "flickr30k", "--image-encoder", "random"], "--image-encoder"),
    (["--setting", "e2e", "--image-encoder", "random"], "--image-encoder"),
    (["--data-path", "afile"], "--data-path"),
    (["--setting", "vit"], "--setting"),
    (["--seeds", str(2**63)], "--seeds"),
    (["--out", "notes"], "--out"),  # issue 23: was written into
    (["--cache-root", "notes"], "--cache-root"),  # shapes data: was silently ignored
    (["--out", ""], "--out"),
    (["--out", "/proc"], "--out"),
    (["--dist-timeout", "1e308"], "--dist-timeout"),
    (["--epochs", str(10**21)], "--epochs"),  # issue 35
    (["--out", LONG], "--out"),
    (["--markdown", LONG + ".md"], "--markdown"),
    (["--data", "flickr30k", "--cache-root", LONG], "--cache-root"),
    (["--data", "flickr30k", "--data-path", DEEP], "--data-path"),
]


@pytest.mark.parametrize("argv, flag", SHOWDOWN_CASES)
def test_showdown_rejects(argv, flag, work, capsys):
    check(showdown.main, [*argv, "--out", "sd"] if "--out" not in argv else argv, flag, work, capsys)


LESSONS_CASES = [
    (["--seeds", "1,1"], "--seeds"),
    (["--device", "bogus"], "--device"),
    (["--markdown", "afile/r.md"], "--markdown"),
    (["--out", "afile"], "--out"),
    (["--epochs", "3"], "--epochs"),  # the chapter fixes its schedules
    (["--seeds", str(2**64)], "--seeds"),
    (["--out", "mine"], "--out"),
    (["--out", ""], "--out"),
    (["--markdown", f"md/{WIDE}.md"], "--markdown"),  # issue 35
    (["--dist-timeout", "0"], "--dist-timeout"),  # issue 35: lessons runs under torchrun as showdown does
]


@pytest.mark.parametrize("argv, flag", LESSONS_CASES)
def test_lessons_rejects(argv, flag, work, capsys):
    from vlr_lib.cli import lessons

    check(lessons.main, [*argv, "--out", "l"] if "--out" not in argv else argv, flag, work, capsys,
          prog="python -m vlr_lib lessons")


ENCODER_CASES = [
    (["--progress"], "--progress"),  # issue 35: was silently ignored
    (["--to", "new"], "--to"),
    (["--retrain", "--to", "mine"], "--to"),  # a folder of the user's files
    (["--retrain", "--to", "notes"], "--to"),
    (["--retrain", "--to", "own"], "--to"),  # the user's own manifest.json (issue 35: was overwritten)
    (["--retrain", "--to", "afile"], "--to"),
    (["--retrain", "--to", ""], "--to"),
    (["--retrain", "--epochs", "3"], "--epochs"),
]


@pytest.mark.parametrize("argv, flag", ENCODER_CASES)
def test_encoder_rejects_before_training(argv, flag, work, capsys, monkeypatch):
    from vlr_lib import shapes_encoder
    from vlr_lib.cli import encoder

    (work / "own").mkdir()
    (work / "own" / "manifest.json").write_text('{"mine": true}')
    monkeypatch.setattr(shapes_encoder, "pretrain", lambda *a, **k: pytest.fail("trained before the check"))
    check(encoder.main, argv, flag, work, capsys, prog="python -m vlr_lib encoder")


@pytest.mark.parametrize("command", ["showdown", "lessons", "tuned"])
@pytest.mark.parametrize("value", ["relative/records", "afile", "/proc/records"])
def test_vlr_record_is_checked_before_anything_trains(command, value, work, capsys, monkeypatch):
    """Issue 35: a relative VLR_RECORD failed only after all the cells had trained."""
    from vlr_lib.cli import lessons, tuned
    from vlr_lib.experiments import lessons as L, showdown as S, tuned as T

    for module in (L, S, T):
        monkeypatch.setattr(module, "run", lambda *a, **k: pytest.fail("VLR_RECORD must be checked first"))
    monkeypatch.setenv("VLR_RECORD", value)
    main = {"showdown": showdown.main, "lessons": lessons.main, "tuned": tuned.main}[command]
    line = check(main, ["--fast", "--out", "o"], "environment variable VLR_RECORD", work, capsys)
    assert value in line


@pytest.mark.parametrize("var, value", [("VLR_DATA", "coco"), ("VLR_FAST", "maybe")])
def test_showdown_rejects_bad_environment(var, value, work, capsys, monkeypatch):
    monkeypatch.setenv(var, value)
    check(showdown.main, ["--out", "sd"], var, work, capsys)


def test_grid_checks_its_default_folder_before_loading_data(work, capsys, monkeypatch):
    """$VLR_RUNS pointing into a file: the default --out named, before anything is loaded."""
    monkeypatch.setenv("VLR_RUNS", str(work / "afile"))
    before = snapshot(work)
    code, _, err = call(grid.main, TINY, capsys)
    assert code == 2 and err.startswith("vlr-grid: error: argument --out: the default ") and "afile" in err
    assert len(err.strip().splitlines()) == 1 and snapshot(work) == before


def test_showdown_without_flickr_features_says_what_to_run(work, capsys):
    (work / "empty").mkdir()
    line = check(showdown.main, ["--data", "flickr30k", "--cache-root", "empty", "--out", "sd"], "extract_features.py",
                 work, capsys)
    assert "prepare_flickr30k.py" in line


SCRIPT_CASES = [
    ("make_shapes", ["--out", "afile"], "--out"),
    ("make_shapes", ["--out", "notes"], "--out"),  # an existing folder that is not a dataset is never replaced
    ("make_shapes", ["--out", "s", "--n-train", "0"], "--n-train"),
    ("make_shapes", ["--out", "s", "--difficulty", "2"], "--difficulty"),
    ("make_shapes", ["--out", "s", "--image-size", "8"], "--image-size"),
    ("make_shapes", [], "--out"),
    ("make_shapes", ["--out", "s", "--n-train", str(10**14)], "--n-train"),
    ("make_shapes", ["--out", "s", "--seed", str(2**64)], "--seed"),
    ("extract_features", ["--seed", str(2**64)], "--seed"),
    ("prepare_flickr30k", ["--out", "afile"], "--out"),
    ("prepare_flickr30k", ["--out", "f", "--path", "missing"], "--path"),
    ("prepare_flickr30k", ["--out", "f", "--path", "afile", "--revision", "main"], "--path"),
    ("extract_features", ["--data-path", "missing"], "--data-path"),
    ("extract_features", ["--device", "bogus"], "--device"),
    ("extract_features", ["--batch-size", "0"], "--batch-size"),
    ("extract_features", ["--num-workers", "-1"], "--num-workers"),
    ("extract_features", ["--cache-root", "afile"], "--cache-root"),
    ("extract_features", ["--difficulty", "-1"], "--difficulty"),
]


@pytest.mark.parametrize("script, argv, flag", SCRIPT_CASES)
def test_data_scripts_reject(script, argv, flag, work, capsys):
    check(load_script(script).main, argv, flag, work, capsys, prog=f"{script}.py")


# --------------------------------------------------------------------------- files that cannot be read back


def test_a_damaged_checkpoint_names_the_file_and_the_fix(work, capsys):
    ck = work / "ck"
    ck.mkdir()
    (ck / "last.pt").write_bytes(b"PK\x03\x04 truncated")
    line = check(train.main, [*TINY, "--checkpoint-dir", "ck"], "--no-resume", work, capsys)
    assert "last.pt" in line and "truncated or damaged" in line
    code, out, _ = call(train.main, [*TINY, "--checkpoint-dir", "ck", "--no-resume"], capsys)
    assert code == 0 and "rsum" in out  # the fix works: the checkpoint is replaced by a good one
    assert torch.load(ck / "last.pt", weights_only=True)["epoch"] == 2


class _Payload:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('PWNED').touch()",))


def test_a_pickle_payload_checkpoint_is_one_line_without_torchs_hint(work, capsys):
    """Issue 23: torch's advice to retry with weights_only=False (which would run the payload) is never shown."""
    (work / "ck").mkdir()
    torch.save({"epoch": _Payload()}, work / "ck" / "last.pt")
    line = check(train.main, [*TINY, "--checkpoint-dir", "ck"], "last.pt", work, capsys)
    assert "holds pickled Python objects (exec)" in line and "--no-resume" in line
    assert "weights_only" not in line and not (work / "PWNED").exists()


def test_a_damaged_grid_cell_names_the_file_and_the_fix(work, capsys):
    assert call(grid.main, [*TINY, "--losses", "info_nce", "--out", "g"], capsys)[0] == 0
    cell = next((work / "g" / "cells").glob("*.json"))
    cell.write_text(cell.read_text()[:40])  # truncated
    line = check(grid.main, [*TINY, "--losses", "info_nce", "--out", "g"], cell.name, work, capsys)
    assert "delete it" in line


def test_a_damaged_cell_of_other_seeds_is_named_before_any_training(work, capsys):
    """Issue 23: was found only after the new cells had trained."""
    assert call(grid.main, [*TINY, "--losses", "info_nce", "--out", "g"], capsys)[0] == 0
    cell = next((work / "g" / "cells").glob("*.json"))
    cell.write_text(json.dumps({**json.loads(cell.read_text()), "seed": None}))
    line = check(grid.main, [*TINY, "--losses", "info_nce", "--seeds", "1", "--out", "g"], cell.name, work, capsys)
    assert "no integer seed" in line and "delete it" in line


def test_a_manifest_that_is_a_json_list_names_the_file(work, capsys):
    folder = work / "cache" / "x"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("[1, 2]")
    (folder / "features.pt").write_bytes(b"")
    line = check(showdown.main, ["--data", "flickr30k", "--cache-root", "cache", "--out", "sd"], "manifest.json",
                 work, capsys)
    assert "list" in line and "--rebuild" in line


def test_a_damaged_showdown_json_names_the_file_and_force(work, capsys):
    argv = ["--fast", "--epochs", "1", "--seeds", "0", "--out", "sd"]
    assert call(showdown.main, argv, capsys)[0] == 0
    meta = work / "sd" / "showdown.json"
    meta.write_text(meta.read_text()[:100])
    line = check(showdown.main, argv, "--force", work, capsys)
    assert "showdown.json" in line
    code, _, _ = call(showdown.main, [*argv, "--force"], capsys)
    assert code == 0 and json.loads(meta.read_text())["n_runs"] == 24


def test_debug_shows_the_traceback(work):
    with pytest.raises(ValueError, match="batch_size"):
        train.main(["--mode", "features", "--n-train", "10", "--n-val", "5", "--debug"])


@pytest.mark.parametrize("make", ["empty folder", "not parquet"])
def test_a_local_copy_that_is_not_flickr30k_is_one_line_naming_the_path(make, work, capsys):
    target = work / "copy"
    if make == "empty folder":
        target.mkdir()
    else:
        target.write_bytes(b"x")
    line = check(train.main, ["--data", "flickr30k", "--data-path", "copy"], "--data-path", work, capsys)
    assert "'copy' cannot be read as a Flickr30K copy" in line
    check(load_script("prepare_flickr30k").main, ["--out", "f", "--path", "copy"], "--path", work, capsys)
    check(load_script("extract_features").main, ["--data", "flickr30k", "--data-path", "copy"], "--data-path",
          work, capsys)


def test_a_full_disk_is_one_line_naming_the_folder(work, capsys, monkeypatch):
    """Issue 23: ENOSPC while saving a checkpoint (torch.save) was a C++ enforce failure naming nothing."""
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    code, _, err = call(train.main, [*TINY, "--checkpoint-dir", "ck"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("vlr-train: error: no space left on ck; free some space")
    assert list((work / "ck").iterdir()) == []  # no temp file left behind


def test_a_learned_parameter_outside_its_clamp_is_a_usage_error(tmp_path):
    """--logit_scale is the learned log-scale's initial value; outside open_clip's clamp it is refused by name."""
    from tests.cli.helpers import run as run_cli

    done = run_cli(["train", "--loss", "siglip", "--logit_scale", "9", "--epochs", "1"], cwd=tmp_path)
    assert done.returncode == 2 and "--logit_scale" in done.stderr and "clamp" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
