"""``python -m vlr_lib check --data flickr30k`` (and ``prepare_flickr30k.py --check``): the dry run.

On a fixture in the Hub's Parquet layout at the Karpathy sizes (tiny images: the check reads text
columns and file metadata only), and on broken copies of it: a missing split, wrong sizes, a
truncated file, an unwritable cache, the Hub unreachable, a cache of another dtype. Each problem
is one line on stderr and exit code 2; a copy that is ready gives exit code 0, the plan and a
time estimate measured on this machine.
"""
from __future__ import annotations

import shutil
from types import SimpleNamespace

import httpx
import pyarrow.parquet as pq
import pytest
import torch

from tests.cli.helpers import call
from tests.cli.test_errors import load_script
from vlr_lib.cli import check
from vlr_lib.data import flickr30k as F
from vlr_lib.data.fixture import write_flickr30k_fixture
from vlr_lib.features import FeatureSet, default_cache_dir, save_features

COMMIT = "3" * 40


@pytest.fixture(scope="module")
def karpathy(tmp_path_factory):
    """31,014 rows at the Karpathy split sizes, 8 px images: the real layout in 10 MB."""
    return write_flickr30k_fixture(tmp_path_factory.mktemp("f30k") / "flickr30k", image_size=8, images="noise")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No network (the Hub unreachable), empty caches, no VLR_* switches."""
    monkeypatch.setattr(F, "_hub_api", lambda: SimpleNamespace(dataset_info=_unreachable))
    monkeypatch.setattr(F, "_hub_cache", lambda: tmp_path / "hf-hub")
    for name in ("VLR_DATA_PATH", F.ENV_REPO, F.ENV_REVISION):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLR_CACHE", str(tmp_path / "vlr"))


def _unreachable(*args, **kwargs):
    raise httpx.ConnectError("[Errno -2] Name or service not known")


def _problems(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert lines and all(line.startswith("check: problem: ") for line in lines), err
    return lines


def test_a_ready_copy_passes_with_a_plan_and_a_measured_estimate(karpathy, tmp_path, capsys):
    code, out, err = call(check.main, ["--data-path", str(karpathy), "--backbone", "vsepp-resnet50", "--device",
                                       "cpu", "--cache-root", str(tmp_path / "features")], capsys)
    assert code == 0 and err == "", err
    assert "train 29,000, validation 1,014, test 1,000 images x 5 captions, schema ok" in out
    assert f"{tmp_path / 'features'}: writable" in out
    assert "to encode train, validation, test" in out and "GB free" in out and "host: about" in out
    assert "encode train, validation, test (31,014 images, 155,070 captions) with vsepp-resnet50" in out
    assert "measured here:" in out and "images/s" in out and "ms per training step" in out
    assert "72 runs x 15 epochs, epochs selected on validation, test reported: about" in out


@pytest.mark.parametrize("damage, message", [
    ("missing_split", "split 'validation' is missing"),
    ("sizes", "split sizes differ from the Karpathy split: train: 28,999 images (expected 29,000)"),
    ("truncated", "cannot be read (a truncated or damaged download?"),
])
def test_a_broken_copy_is_one_problem_line_and_exit_2(karpathy, tmp_path, capsys, damage, message):
    copy = shutil.copytree(karpathy, tmp_path / "copy")
    first = copy / "TEST" / "test" / "0000.parquet"
    if damage == "truncated":
        first.write_bytes(first.read_bytes()[:1000])
    else:
        table = pq.read_table(first)
        keep = [i for i, s in enumerate(table.column("split").to_pylist())
                if (s != "val" if damage == "missing_split" else i != table.column("split").to_pylist().index("train"))]
        pq.write_table(table.take(keep), first)
        if damage == "missing_split":
            for other in sorted(first.parent.glob("*.parquet"))[1:]:
                t = pq.read_table(other)
                pq.write_table(t.take([i for i, s in enumerate(t.column("split").to_pylist()) if s != "val"]), other)
    code, out, err = call(check.main, ["--data-path", str(copy), "--device", "cpu"], capsys)
    assert code == 2
    (line,) = _problems(err)
    assert line.startswith("check: problem: data: ") and message in line
    assert "no time estimate until the problems above are fixed" in out


def test_an_unwritable_cache_is_a_problem(karpathy, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    code, out, err = call(check.main, ["--data-path", str(karpathy), "--cache-root", str(tmp_path / "afile" / "c"),
                                       "--device", "cpu"], capsys)
    assert code == 2
    (line,) = _problems(err)
    assert line.startswith("check: problem: cache: ") and "is a file" in line and "--cache-root" in line


def test_the_hub_unreachable_without_a_copy_names_the_ways_out(capsys):
    code, out, err = call(check.main, ["--device", "cpu"], capsys)
    assert code == 2
    (line,) = _problems(err)
    for hint in ("unreachable", "HF_HOME", "HF_DATASETS_OFFLINE=1", "--data-path", "prepare_flickr30k.py"):
        assert hint in line


def test_a_hub_download_in_the_hf_cache_is_checked_offline(karpathy, tmp_path, capsys):
    """The Hub unreachable, but the commit is in the HF cache: its ref resolves, its snapshot is inspected."""
    repo = tmp_path / "hf-hub" / "datasets--nlphuji--flickr30k"
    (repo / "refs" / "refs" / "convert").mkdir(parents=True)
    (repo / "refs" / "refs" / "convert" / "parquet").write_text(COMMIT)
    shutil.copytree(karpathy, repo / "snapshots" / COMMIT)
    code, out, err = call(check.main, ["--device", "cpu", "--backbone", "vsepp-resnet50"], capsys)
    assert code == 0, err
    assert f"the Hub's nlphuji/flickr30k@{COMMIT[:12]} (refs/convert/parquet) (in the Hugging Face cache" in out
    assert f"commit {COMMIT} (--revision / VLR_FLICKR_REVISION pins it)" in out


def _cache_set(root, dataset_id, revision, dtype):
    for split, n in F.KARPATHY_SIZES.items():
        c2i = torch.arange(2).repeat_interleave(5)
        manifest = {"backbone": "clip-vit-b32", "pretrained": "openai", "dataset_id": dataset_id,
                    "revision": revision, "split": split, "dtype": dtype}
        save_features(default_cache_dir(root, dataset_id, revision, split, "clip-vit-b32", dtype=dtype),
                      FeatureSet(torch.zeros(2, 4), torch.zeros(10, 4), c2i, manifest))


def test_a_cache_of_another_dtype_is_named_with_its_flag(karpathy, tmp_path, capsys):
    _cache_set(tmp_path / "features", "flickr30k:flickr30k", "", "float16")  # (clip-vit-b32: the default backbone)
    argv = ["--data-path", str(karpathy), "--cache-root", str(tmp_path / "features"), "--device", "cpu"]
    code, out, err = call(check.main, argv, capsys)
    assert code == 2
    (line,) = _problems(err)
    assert line.startswith("check: problem: features: ") and "--dtype float16" in line
    code, out, err = call(check.main, [*argv, "--dtype", "float16", "--backbone", "clip-vit-b32"], capsys)
    assert "dtype=float16: complete, nothing to encode" in out
    assert "encode" not in out.split("plan:")[1].splitlines()[1]  # the plan starts with training


def test_shapes_needs_no_check(capsys):
    assert call(check.main, ["--data", "shapes"], capsys)[:2] == (0, "shapes: generated in memory, no download, "
                                                                     "no cache, no GPU needed: nothing to check\n")


def test_prepare_check(karpathy, tmp_path, capsys):
    script = load_script("prepare_flickr30k")
    code, out, err = call(script.main, ["--check", "--path", str(karpathy), "--out", str(tmp_path / "saved")], capsys)
    assert code == 0, err
    assert "train 29,000, validation 1,014, test 1,000" in out and f"{tmp_path / 'saved'}: writable" in out
    assert not (tmp_path / "saved").exists(), "a dry run writes nothing"
    code, out, err = call(script.main, ["--check"], capsys)  # the Hub, unreachable here
    assert code == 2 and "unreachable" in _problems(err)[0]
