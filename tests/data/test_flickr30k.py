"""Flickr30K loader, offline: fixtures in the Hub's column layout, written by the test from shapes data."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import datasets
import httpx
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
from vlr_lib.data.fixture import HUB_FEATURES  # the columns of nlphuji/flickr30k's Parquet export

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"train": 9, "validation": 4, "test": 3}


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


# ---------------------------------------------------------------- Hub access (mocked: no test touches the network)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


class RevisionNotFoundError(Exception):
    """Named like huggingface_hub's: the loader sorts Hub errors by name."""


class FakeHub:
    """Stands in for HfApi: dataset_info(repo, revision).sha from a table, or the given error."""

    def __init__(self, commits: dict | None = None, error: BaseException | None = None):
        self.commits, self.error, self.calls = commits or {}, error, []

    def dataset_info(self, repo_id, revision=None):
        self.calls.append((repo_id, revision))
        if self.error is not None:
            raise self.error
        if (repo_id, revision) not in self.commits:
            raise RevisionNotFoundError(f"{repo_id}@{revision}")
        return SimpleNamespace(sha=self.commits[(repo_id, revision)])


def outage() -> BaseException:
    """What huggingface_hub raises when huggingface.co cannot be resolved (httpx's ConnectError)."""
    return httpx.ConnectError("[Errno -2] Name or service not known")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """Every test here: the Hub unreachable, an empty HF cache, no VLR_DATA_PATH, an empty workbook cache."""
    hub = FakeHub(error=outage())
    monkeypatch.setattr(F, "_hub_api", lambda: hub)
    monkeypatch.setattr(F, "_hub_cache", lambda: tmp_path / "hf-hub-cache")
    for name in (F.ENV_REPO, F.ENV_REVISION, "VLR_DATA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLR_CACHE", str(tmp_path / "vlr-cache"))
    return hub


def _raise(exc):
    def load_dataset(*args, **kwargs):
        raise exc

    return load_dataset


def _hf_cache_layout(hub_cache: Path, rows: datasets.Dataset, commit: str = COMMIT,
                     ref: str = F.DEFAULT_REVISION) -> Path:
    """huggingface_hub's cache: datasets--<owner>--<name>/{refs/<ref>, blobs/<hash>, snapshots/<commit>/<file> -> blob}."""
    repo = hub_cache / f"datasets--{F.DEFAULT_REPO_ID.replace('/', '--')}"
    (repo / "refs" / ref).parent.mkdir(parents=True)
    (repo / "refs" / ref).write_text(commit)
    snapshot = _write_hub_layout(repo / "snapshots" / commit, rows)
    (repo / "blobs").mkdir()
    for file in sorted(snapshot.rglob("*.parquet")):
        blob = repo / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        file.rename(blob)
        file.symlink_to(os.path.relpath(blob, file.parent))
    return snapshot


def test_hub_outage_gives_a_clear_error(offline):
    """The revision cannot be resolved: nothing reachable, nothing cached -- the message says how to work offline."""
    with pytest.raises(DatasetUnavailableError) as info:
        load_flickr30k()
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError) and info.value.__cause__ is offline.error
    assert repr(F.DEFAULT_REVISION) in msg and F.DEFAULT_REPO_ID in msg and "unreachable" in msg
    for hint in ("HF_HOME", "HF_DATASETS_OFFLINE=1", "--data-path", "VLR_DATA_PATH", "prepare_flickr30k.py",
                 "--revision"):
        assert hint in msg


def test_hub_outage_while_loading_a_pinned_commit(monkeypatch):
    """A full commit hash needs no resolution; then the download itself fails: the same advice, naming the commit."""
    error = ConnectionError("Couldn't reach 'nlphuji/flickr30k' on the Hub (LocalEntryNotFoundError)")
    monkeypatch.setattr(datasets, "load_dataset", _raise(error))
    with pytest.raises(DatasetUnavailableError) as info:
        load_flickr30k(revision=COMMIT)
    assert info.value.__cause__ is error and f"{F.DEFAULT_REPO_ID}@{COMMIT}" in str(info.value)
    assert "HF_DATASETS_OFFLINE=1" in str(info.value) and "--data-path" in str(info.value)


def test_offline_mode_without_cache_gives_the_same_error(monkeypatch, tmp_path):
    """The real datasets code path with HF offline mode on and an empty cache: no network, same error."""
    import huggingface_hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DatasetUnavailableError, match="unreachable"):
        load_flickr30k(revision=COMMIT, cache_dir=tmp_path / "empty")


def test_other_errors_are_not_disguised(monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", _raise(ValueError("bad config")))
    with pytest.raises(ValueError, match="bad config"):
        load_flickr30k(revision=COMMIT)


def test_repo_and_revision_come_from_arguments_env_or_defaults(monkeypatch, source, offline):
    """Each (repo, revision) is resolved to a commit, and the data are loaded at that commit."""
    calls = []
    rows = _hub_rows(source)

    def fake_load_dataset(path, **kwargs):
        calls.append((path, kwargs.get("revision")))
        return datasets.DatasetDict({"test": rows})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    offline.error = None
    offline.commits = {(F.DEFAULT_REPO_ID, F.DEFAULT_REVISION): COMMIT, ("someone/flickr30k", "v1"): OTHER_COMMIT,
                       ("other/f30k", "v2"): COMMIT}
    dd = load_flickr30k(expected_sizes=SIZES)
    _assert_same_content(dd, source)
    monkeypatch.setenv(F.ENV_REPO, "someone/flickr30k")
    monkeypatch.setenv(F.ENV_REVISION, "v1")
    load_flickr30k(expected_sizes=None)
    load_flickr30k(repo_id="other/f30k", revision="v2", expected_sizes=None)
    load_flickr30k(repo_id="other/f30k", revision=OTHER_COMMIT, expected_sizes=None)  # a commit: no Hub call
    assert offline.calls == [(F.DEFAULT_REPO_ID, F.DEFAULT_REVISION), ("someone/flickr30k", "v1"), ("other/f30k", "v2")]
    assert calls == [(F.DEFAULT_REPO_ID, COMMIT), ("someone/flickr30k", OTHER_COMMIT), ("other/f30k", COMMIT),
                     ("other/f30k", OTHER_COMMIT)]


# ---------------------------------------------------------------- pinning: a revision becomes a commit
def test_a_branch_resolves_to_the_hub_commit(offline):
    offline.error, offline.commits = None, {(F.DEFAULT_REPO_ID, F.DEFAULT_REVISION): COMMIT}
    source = F.resolve_source()
    assert (source.dataset_id, source.revision, source.path, source.requested) == (
        F.DEFAULT_REPO_ID, COMMIT, None, F.DEFAULT_REVISION)
    assert COMMIT[:12] in source.describe() and F.DEFAULT_REVISION in source.describe()


def test_offline_the_commit_comes_from_the_hf_cache(tmp_path, source):
    """The Hub is unreachable; the ref that the HF cache recorded at the last download answers."""
    _hf_cache_layout(tmp_path / "hf-hub-cache", _hub_rows(source))
    assert F.resolve_revision(F.DEFAULT_REPO_ID, F.DEFAULT_REVISION) == COMMIT
    assert F.cached_commit(F.DEFAULT_REPO_ID, "main") is None


def test_a_revision_the_hub_does_not_have_names_the_flag(offline):
    offline.error = None
    with pytest.raises(ValueError, match=r"^revision 'nope' .*--revision"):
        F.resolve_revision(F.DEFAULT_REPO_ID, "nope")


def test_an_hf_cache_snapshot_folder_is_the_hub_commit(tmp_path, source):
    snapshot = _hf_cache_layout(tmp_path / "hub-copy", _hub_rows(source))
    found = F.resolve_source(snapshot)
    assert (found.dataset_id, found.revision, found.path) == (F.DEFAULT_REPO_ID, COMMIT, snapshot)
    _assert_same_content(load_flickr30k(found, expected_sizes=SIZES, cache_dir=tmp_path / "c"), source)
    with pytest.raises(ValueError, match=f"^revision 'abc' does not match .*{COMMIT}"):
        F.resolve_source(snapshot, revision="abc")


def test_a_local_copy_of_unknown_origin_is_named_by_its_folder(tmp_path, source):
    root = _write_hub_layout(tmp_path / "mine", _hub_rows(source))
    assert F.resolve_source(root) == F.Source("flickr30k:mine", "", root)
    assert F.resolve_source(root, revision="v3").revision == "v3"  # a label, recorded as given


def test_vlr_data_path_and_the_prepared_copy_are_read_by_default(tmp_path, monkeypatch, source):
    from vlr_lib import paths

    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    monkeypatch.setenv("VLR_DATA_PATH", str(root))
    assert F.resolve_source().path == root
    monkeypatch.setenv("VLR_DATA_PATH", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="^VLR_DATA_PATH"):
        F.resolve_source()
    monkeypatch.setenv("VLR_DATA_PATH", "relative/copy")
    with pytest.raises(ValueError, match="^VLR_DATA_PATH must be an absolute path"):
        F.resolve_source()
    monkeypatch.delenv("VLR_DATA_PATH")
    with pytest.raises(DatasetUnavailableError):  # nothing prepared yet: the Hub (unreachable here)
        F.resolve_source()
    load_flickr30k(root, expected_sizes=SIZES, cache_dir=tmp_path / "c").save_to_disk(str(paths.flickr30k_dir()))
    assert F.resolve_source().path == paths.flickr30k_dir()
    assert F.resolve_source(repo_id="o/r", revision=COMMIT).path is None  # an explicit repo id means the Hub


# ---------------------------------------------------------------- partial downloads
def test_a_truncated_parquet_file_is_a_clear_error(tmp_path, source):
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    part = root / "TEST" / "test" / "0001.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"^path .* cannot be read as a Flickr30K copy"):
        load_flickr30k(path=root, expected_sizes=SIZES, cache_dir=tmp_path / "cache")


def test_a_missing_split_is_a_clear_error(tmp_path, source):
    rows = _hub_rows(source)
    rows = rows.select([i for i, s in enumerate(rows["split"]) if s != "val"])
    root = _write_hub_layout(tmp_path / "hub", rows)
    with pytest.raises(ValueError, match="no rows of split 'val'"):
        load_flickr30k(path=root, expected_sizes=None, cache_dir=tmp_path / "cache")


# ---------------------------------------------------------------- script
def test_prepare_script(tmp_path, source):
    script = ROOT / "data_scripts" / "prepare_flickr30k.py"
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=True)
    assert "--revision" in out.stdout and "--path" in out.stdout and "--check" in out.stdout
    root = _write_hub_layout(tmp_path / "hub", _hub_rows(source))
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache"), "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    run = subprocess.run([sys.executable, str(script), "--path", str(root), "--out", str(tmp_path / "saved"),
                          "--no-size-check"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    _assert_same_content(load_flickr30k(path=tmp_path / "saved", expected_sizes=SIZES), source)
    assert json.loads((tmp_path / "saved" / F.SOURCE_FILE).read_text()) == {"source_path": str(root)}
    # No network and no cache: exit status 2 and the explanation, not a traceback.
    fail = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "x")],
                          capture_output=True, text=True, env=env)
    assert fail.returncode == 2 and "HF_DATASETS_OFFLINE=1" in fail.stderr and len(fail.stderr.splitlines()) == 1


def test_a_copy_prepared_from_the_hub_shares_the_hub_identity(tmp_path, monkeypatch, source, offline):
    """prepare_flickr30k records repo and commit: the saved copy and a Hub download key the same feature caches."""
    from vlr_lib.features import flickr_cache_id

    spec = importlib.util.spec_from_file_location("_prepare", ROOT / "data_scripts" / "prepare_flickr30k.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = _hub_rows(source)
    monkeypatch.setattr(datasets, "load_dataset", lambda path, **kw: datasets.DatasetDict({"test": rows}))
    offline.error, offline.commits = None, {(F.DEFAULT_REPO_ID, F.DEFAULT_REVISION): COMMIT}
    assert script.main(["--out", str(tmp_path / "saved"), "--no-size-check"]) == 0
    record = json.loads((tmp_path / "saved" / F.SOURCE_FILE).read_text())
    assert record == {"repo_id": F.DEFAULT_REPO_ID, "commit": COMMIT, "requested_revision": F.DEFAULT_REVISION}
    assert flickr_cache_id(tmp_path / "saved") == flickr_cache_id() == (F.DEFAULT_REPO_ID, COMMIT)
    _assert_same_content(load_flickr30k(tmp_path / "saved", expected_sizes=SIZES), source)


def test_check_schema_rejects_other_columns(source):
    with pytest.raises(ValueError, match="^dd split 'train' has columns"):
        check_schema(datasets.DatasetDict({"train": source["train"].remove_columns("filename")}))
