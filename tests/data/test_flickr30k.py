"""Flickr30K loader, offline: fixtures in the Hub's column layout, written by the test from shapes data."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vlr_lib.data import (
    COLUMNS,
    FEATURES,
    DatasetUnavailableError,
    check_schema,
    load_flickr30k,
    make_shapes,
    normalize_flickr30k,
)
from vlr_lib.data import flickr30k as F

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"train": 9, "validation": 4, "test": 3}
# The columns of nlphuji/flickr30k (its script's features; its Parquet export keeps them).
HUB_FEATURES = datasets.Features(
    {
        "image": datasets.Image(),
        "caption": datasets.List(datasets.Value("string")),
        "sentids": datasets.List(datasets.Value("string")),
        "split": datasets.Value("string"),
        "img_id": datasets.Value("string"),
        "filename": datasets.Value("string"),
    }
)


@pytest.fixture(scope="module")
def source():
    return make_shapes(SIZES["train"], SIZES["validation"], SIZES["test"], seed=11)


def _hub_rows(source) -> datasets.Dataset:
    """All images in one table, rows shuffled, with sentids: the nlphuji export's single "test" split."""
    rows = datasets.concatenate_datasets([source[k] for k in source])
    rows = rows.add_column("sentids", [[str(5 * i + k) for k in range(5)] for i in range(len(rows))])
    rows = rows.select(np.random.default_rng(0).permutation(len(rows)))
    return rows.select_columns(list(HUB_FEATURES)).cast(HUB_FEATURES)


def _write_hub_layout(root: Path, rows: datasets.Dataset) -> Path:
    """TEST/test/0000.parquet, 0001.parquet: the file layout of nlphuji/flickr30k@refs/convert/parquet."""
    (root / "TEST" / "test").mkdir(parents=True)
    half = len(rows) // 2
    rows.select(range(half)).to_parquet(root / "TEST" / "test" / "0000.parquet")
    rows.select(range(half, len(rows))).to_parquet(root / "TEST" / "test" / "0001.parquet")
    return root


def _by_id(ds: datasets.Dataset) -> dict[str, tuple]:
    return {r["img_id"]: (r["caption"], np.asarray(r["image"]).tobytes(), r["filename"]) for r in ds}


def _assert_same_content(loaded: datasets.DatasetDict, source: datasets.DatasetDict) -> None:
    for split in ("train", "validation", "test"):
        assert _by_id(loaded[split]) == _by_id(source[split])
        assert set(loaded[split]["split"]) == {F.SPLITS[split]}


# ---------------------------------------------------------------- the Hub layout, offline
def test_hub_layout_is_normalised_into_karpathy_splits(tmp_path, source):
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    dd = load_flickr30k(path=root, expected_sizes=SIZES, cache_dir=tmp_path / "cache")
    assert list(dd) == ["train", "validation", "test"]
    assert {k: len(v) for k, v in dd.items()} == SIZES
    check_schema(dd)
    _assert_same_content(dd, source)


def test_schema_equals_the_shapes_schema(tmp_path, source):
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    dd = load_flickr30k(path=root, expected_sizes=None, cache_dir=tmp_path / "cache")
    for split in source:
        assert dd[split].features == source[split].features == FEATURES
        assert dd[split].column_names == source[split].column_names == list(COLUMNS)


def test_parquet_without_hf_metadata_and_integer_ids(tmp_path, source):
    """Plain Parquet (no `huggingface` schema metadata), img_id as int64: cast into our schema."""
    rows = _hub_rows(source).cast_column("image", datasets.Image(decode=False))
    table = pa.table(
        {
            "image": pa.array([{"bytes": r["bytes"], "path": None} for r in rows["image"]],
                              type=pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            "caption": pa.array(rows["caption"][:], type=pa.list_(pa.string())),
            "sentids": pa.array(rows["sentids"][:], type=pa.list_(pa.string())),
            "split": pa.array(rows["split"][:]),
            "img_id": pa.array([int(i) for i in rows["img_id"]], type=pa.int64()),
            "filename": pa.array(rows["filename"][:]),
        }
    )
    (tmp_path / "plain" / "TEST" / "test").mkdir(parents=True)
    pq.write_table(table, tmp_path / "plain" / "TEST" / "test" / "0000.parquet")
    dd = load_flickr30k(path=tmp_path / "plain", expected_sizes=SIZES, cache_dir=tmp_path / "cache")
    check_schema(dd)
    _assert_same_content(dd, source)


def test_list_of_parquet_files(tmp_path, source):
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    files = sorted((root / "TEST" / "test").glob("*.parquet"))
    dd = load_flickr30k(path=files, expected_sizes=SIZES, cache_dir=tmp_path / "cache")
    _assert_same_content(dd, source)


def test_separated_splits_without_split_column(source):
    """Copies with splits train/val/test and no split column (other Hub layouts) get the column added."""
    raw = datasets.DatasetDict(
        {name: source[key].remove_columns("split").rename_column("caption", "alt_text")
         for name, key in (("train", "train"), ("val", "validation"), ("test", "test"))}
    )
    dd = normalize_flickr30k(raw)
    check_schema(dd)
    _assert_same_content(dd, source)


def test_saved_folder_round_trip(tmp_path, source):
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    dd = load_flickr30k(path=root, expected_sizes=SIZES, cache_dir=tmp_path / "cache")
    dd.save_to_disk(str(tmp_path / "saved"))
    again = load_flickr30k(path=tmp_path / "saved", expected_sizes=SIZES)
    _assert_same_content(again, source)


# ---------------------------------------------------------------- bad data
def test_wrong_caption_count_is_an_error(source):
    rows = _hub_rows(source)
    caps = rows["caption"][:]
    caps[3] = caps[3][:4]
    bad = rows.remove_columns("caption").add_column("caption", caps)
    with pytest.raises(ValueError, match="^caption must hold 5 captions per image; row 3 has 4"):
        normalize_flickr30k(bad)


def test_missing_column_is_an_error(source):
    with pytest.raises(ValueError, match="^raw is missing columns \\['filename'\\]"):
        normalize_flickr30k(_hub_rows(source).remove_columns("filename"))


def test_sizes_are_checked(tmp_path, source):
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    with pytest.raises(ValueError, match="^expected_sizes .*train: 9 \\(expected 29000\\)"):
        load_flickr30k(path=root, cache_dir=tmp_path / "cache")  # default: the Karpathy sizes
    assert F.KARPATHY_SIZES == {"train": 29_000, "validation": 1_014, "test": 1_000}


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="^path"):
        load_flickr30k(path=tmp_path / "absent")


# ---------------------------------------------------------------- Hub access
def _raise(exc):
    def load_dataset(*args, **kwargs):
        raise exc

    return load_dataset


def test_hub_outage_gives_a_clear_error(monkeypatch):
    # What datasets.load_dataset raises when huggingface.co cannot be resolved.
    outage = ConnectionError("Couldn't reach 'nlphuji/flickr30k' on the Hub (LocalEntryNotFoundError)")
    monkeypatch.setattr(datasets, "load_dataset", _raise(outage))
    with pytest.raises(DatasetUnavailableError) as info:
        load_flickr30k()
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError) and info.value.__cause__ is outage
    assert f"{F.DEFAULT_REPO_ID}@{F.DEFAULT_REVISION}" in msg and "unreachable" in msg
    for hint in ("HF_HOME", "HF_DATASETS_OFFLINE=1", "path=", "prepare_flickr30k.py"):
        assert hint in msg


def test_offline_mode_without_cache_gives_the_same_error(monkeypatch, tmp_path):
    """The real datasets code path with HF offline mode on and an empty cache: no network, same error."""
    import huggingface_hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DatasetUnavailableError, match="unreachable"):
        load_flickr30k(cache_dir=tmp_path / "empty")


def test_other_errors_are_not_disguised(monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", _raise(ValueError("bad config")))
    with pytest.raises(ValueError, match="bad config"):
        load_flickr30k()


def test_repo_and_revision_come_from_arguments_env_or_defaults(monkeypatch, source):
    calls = []
    rows = _hub_rows(source)

    def fake_load_dataset(path, **kwargs):
        calls.append((path, kwargs.get("revision")))
        return datasets.DatasetDict({"test": rows})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    monkeypatch.delenv(F.ENV_REPO, raising=False)
    monkeypatch.delenv(F.ENV_REVISION, raising=False)
    dd = load_flickr30k(expected_sizes=SIZES)
    _assert_same_content(dd, source)
    monkeypatch.setenv(F.ENV_REPO, "someone/flickr30k")
    monkeypatch.setenv(F.ENV_REVISION, "0123abc")
    load_flickr30k(expected_sizes=None)
    load_flickr30k(repo_id="other/f30k", revision="v2", expected_sizes=None)
    assert calls == [(F.DEFAULT_REPO_ID, F.DEFAULT_REVISION), ("someone/flickr30k", "0123abc"), ("other/f30k", "v2")]


# ---------------------------------------------------------------- script
def test_prepare_script(tmp_path, source):
    script = ROOT / "data_scripts" / "prepare_flickr30k.py"
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=True)
    assert "--revision" in out.stdout and "--path" in out.stdout
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache"), "HF_DATASETS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, str(script), "--path", str(root), "--out", str(tmp_path / "saved"),
                          "--no-size-check"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    _assert_same_content(load_flickr30k(path=tmp_path / "saved", expected_sizes=SIZES), source)
    # No network and no cache: exit status 2 and the explanation, not a traceback.
    env["HF_HOME"] = str(tmp_path / "hf_home")
    fail = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "x")],
                          capture_output=True, text=True, env=env)
    assert fail.returncode == 2 and "HF_DATASETS_OFFLINE=1" in fail.stderr


def test_check_schema_rejects_other_columns(source):
    with pytest.raises(ValueError, match="^dd split 'train' has columns"):
        check_schema(datasets.DatasetDict({"train": source["train"].remove_columns("filename")}))
