"""Flickr30K with the Karpathy split, through Hugging Face `datasets` (>= 4).

The schema defined here (`FEATURES`, `COLUMNS`, `SPLITS`) is the schema of every
data mode of the workbook; the synthetic `shapes` generator writes the same
columns, so notebooks and `vlr_lib.features` have one code path.

Our schema, one row per image::

    image     datasets.Image()                the picture
    caption   List(Value("string"))           exactly 5 captions
    split     Value("string")                 Karpathy split name: "train" | "val" | "test"
    img_id    Value("string")                 image id, as Flickr30K Hub copies store it
    filename  Value("string")                 e.g. "1000092795.jpg"

Returned as a `DatasetDict` with keys "train", "validation", "test". The `split`
column keeps the Karpathy spelling ("val") so rows stay byte-identical to the Hub
copy (renaming would rewrite 4 GB of images); the dict key is the `datasets`
convention.

Where the data come from (what is verified, what is not)
--------------------------------------------------------
`datasets` >= 4 runs no loading scripts, so the script-based repo
"nlphuji/flickr30k" fails on its `main` branch ("Dataset scripts are no longer
supported"). Its Parquet export lives on the branch "refs/convert/parquet" as
``TEST/test/0000.parquet ... 0008.parquet`` (31,014 rows = 29,000 + 1,014 +
1,000), with the columns of its script: image, caption (list of 5), sentids,
split ("train"/"val"/"test", the Karpathy split), img_id, filename. The default
is therefore ``DEFAULT_REPO_ID = "nlphuji/flickr30k"`` at
``DEFAULT_REVISION = "refs/convert/parquet"``.

Verified (from the Hub pages and the script's source, read through a search
index, and from the installed `datasets` source): the export's file layout and
row count, the script's feature list, that `datasets` 4+ loads a branch without
a script through its Parquet builder and infers the split "test" from the
``TEST/test/`` directory. NOT verified (no network here): an actual download,
and a pinned commit hash — "refs/convert/parquet" is a branch the Hub's bot may
rewrite. Pin a commit hash through `revision=` / VLR_FLICKR_REVISION once you
have one. A Parquet-native alternative with the same columns and the splits
already separated is "umaru97/flickr30k_train_val_test" (splits
"train"/"val"/"test"; VLR_FLICKR_REPO=umaru97/flickr30k_train_val_test
VLR_FLICKR_REVISION=main); `normalize_flickr30k` accepts both layouts.

Offline use: a Hub download is cached under HF_HOME; afterwards
HF_DATASETS_OFFLINE=1 reads the cache. Or pass `path=` a local copy: a folder of
Parquet files in the Hub layout, a folder written by `DatasetDict.save_to_disk`
(e.g. by data_scripts/prepare_flickr30k.py), or Parquet file(s).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import datasets
import numpy as np
import pyarrow.compute as pc

DEFAULT_REPO_ID = "nlphuji/flickr30k"
DEFAULT_REVISION = "refs/convert/parquet"
ENV_REPO = "VLR_FLICKR_REPO"
ENV_REVISION = "VLR_FLICKR_REVISION"

N_CAPTIONS = 5
COLUMNS = ("image", "caption", "split", "img_id", "filename")
FEATURES = datasets.Features(
    {
        "image": datasets.Image(),
        "caption": datasets.List(datasets.Value("string")),
        "split": datasets.Value("string"),
        "img_id": datasets.Value("string"),
        "filename": datasets.Value("string"),
    }
)
# DatasetDict key -> value of the Karpathy `split` column.
SPLITS = {"train": "train", "validation": "val", "test": "test"}
KARPATHY_SIZES = {"train": 29_000, "validation": 1_014, "test": 1_000}

# Hub column names that mean one of ours (AnyModal-style copies call captions "alt_text").
_ALIASES = {"captions": "caption", "alt_text": "caption", "sentences": "caption", "image_id": "img_id"}
# Hub split names -> our keys, for copies whose splits are already separated.
_SPLIT_KEYS = {"train": "train", "val": "validation", "valid": "validation", "validation": "validation",
               "dev": "validation", "test": "test"}


class DatasetUnavailableError(RuntimeError):
    """The dataset could not be read: the Hub is unreachable and nothing is cached locally."""


def load_flickr30k(
    path: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    *,
    repo_id: str | None = None,
    revision: str | None = None,
    expected_sizes: Mapping[str, int] | None = KARPATHY_SIZES,
    cache_dir: str | os.PathLike | None = None,
) -> datasets.DatasetDict:
    """Flickr30K (Karpathy split) in our schema, from the Hub or from a local copy.

    path: a local copy (see the module docstring); None downloads `repo_id` at
        `revision` (defaults: env VLR_FLICKR_REPO / VLR_FLICKR_REVISION, then
        DEFAULT_REPO_ID / DEFAULT_REVISION).
    expected_sizes: images per split that the result must have (the Karpathy
        29,000 / 1,014 / 1,000 by default); None skips the check (fixtures, subsets).
    cache_dir: where `datasets` keeps its Arrow cache (default: under HF_HOME).
    Raises DatasetUnavailableError when the Hub cannot be reached and nothing is
    cached, naming the ways to use a local copy.
    """
    if path is None:
        repo_id = repo_id or os.environ.get(ENV_REPO) or DEFAULT_REPO_ID
        revision = revision or os.environ.get(ENV_REVISION) or DEFAULT_REVISION
        raw = _load_raw(repo_id, revision=revision, cache_dir=None if cache_dir is None else str(cache_dir))
    else:
        raw = _load_local(path, cache_dir)
    dd = normalize_flickr30k(raw)
    if expected_sizes is not None:
        check_split_sizes(dd, expected_sizes)
    return dd


def _load_local(
    path: str | os.PathLike | Sequence[str | os.PathLike], cache_dir: str | os.PathLike | None
) -> datasets.DatasetDict | datasets.Dataset:
    cache = None if cache_dir is None else str(cache_dir)
    if not isinstance(path, (str, os.PathLike)):
        files = [str(p) for p in path]
        return _load_raw("parquet", data_files={"rows": files}, cache_dir=cache)
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"path {str(p)!r} does not exist")
    try:
        if p.is_file():
            return _load_raw("parquet", data_files={"rows": [str(p)]}, cache_dir=cache)
        if (p / "dataset_dict.json").exists() or (p / "dataset_info.json").exists():
            return datasets.load_from_disk(str(p))  # written by save_to_disk
        return _load_raw(str(p), cache_dir=cache)  # Parquet files in the Hub layout: the Hub's own code path
    except (OSError, ValueError) as err:  # arrow and datasets errors about the files themselves
        if isinstance(err, PermissionError):
            raise
        raise ValueError(
            f"path {str(p)!r} cannot be read as a Flickr30K copy ({type(err).__name__}: {err}); expected a folder "
            "written by save_to_disk (data_scripts/prepare_flickr30k.py), a folder of Parquet files in the Hub "
            "layout, or Parquet files"
        ) from err


def _load_raw(path: str, **kwargs: object) -> datasets.DatasetDict:
    """`datasets.load_dataset`, turning every "cannot reach the Hub" failure into one clear error."""
    try:
        return datasets.load_dataset(path, **kwargs)
    except Exception as err:  # noqa: BLE001 - filtered by _is_offline_error, re-raised otherwise
        if not _is_offline_error(err):
            raise
        where = path + (f"@{kwargs['revision']}" if kwargs.get("revision") else "")
        raise DatasetUnavailableError(
            f"Flickr30K could not be loaded from the Hugging Face Hub ({where}): the Hub is unreachable "
            "and no cached copy was found "
            f"({type(err).__name__}: {err}). To work offline: (1) on a machine with network, run "
            "`python data_scripts/prepare_flickr30k.py --out data/flickr30k` (or any load_flickr30k() "
            "call) and copy the output folder, or the HF cache (HF_HOME), here; (2) then either set "
            "HF_HOME to that cache and HF_DATASETS_OFFLINE=1, or call load_flickr30k(path=...) with the "
            "saved folder, a folder of Parquet files in the Hub layout, or a list of Parquet files. "
            "The shapes dataset (vlr_lib.data.make_shapes) needs no network."
        ) from err


def _is_offline_error(err: BaseException) -> bool:
    """True for the errors `datasets`/`huggingface_hub` raise when the Hub cannot be reached."""
    names = {"OfflineModeIsEnabled", "LocalEntryNotFoundError", "ConnectError", "ConnectTimeout",
             "ReadTimeout", "TimeoutException", "NetworkError"}
    while err is not None:
        if isinstance(err, (ConnectionError, TimeoutError)) or type(err).__name__ in names:
            return True
        err = err.__cause__ or err.__context__
    return False


def normalize_flickr30k(raw: datasets.DatasetDict | datasets.Dataset) -> datasets.DatasetDict:
    """Any Flickr30K Hub layout -> our schema, split into train / validation / test.

    Accepts (a) one table whose `split` column holds the Karpathy split (the
    nlphuji export: a single "test" split of 31,014 rows) and (b) copies whose
    splits are already separated (keys "train"/"val"/"test"). Extra columns
    (sentids, ...) are dropped; aliases (alt_text -> caption) are renamed. Rows
    are never rewritten (images stay as stored): the split is applied with
    `filter` on the text column only. Every image must have 5 captions; more
    than 5 is an error (silent truncation would change the benchmark).
    """
    parts = raw.items() if isinstance(raw, datasets.DatasetDict) else [("all", raw)]
    parts = [(name, _to_schema(ds)) for name, ds in parts]
    out: dict[str, datasets.Dataset] = {}
    for key, karpathy in SPLITS.items():
        pieces = [_rows_of_split(name, ds, key, karpathy) for name, ds in parts]
        pieces = [ds for ds in pieces if ds is not None]
        if not pieces:
            raise ValueError(f"raw has no rows of split {karpathy!r} (looked in splits {[n for n, _ in parts]})")
        out[key] = pieces[0] if len(pieces) == 1 else datasets.concatenate_datasets(pieces)
    return datasets.DatasetDict(out)


def _to_schema(ds: datasets.Dataset) -> datasets.Dataset:
    renames = {a: b for a, b in _ALIASES.items() if a in ds.column_names and b not in ds.column_names}
    if renames:
        ds = ds.rename_columns(renames)
    missing = [c for c in COLUMNS if c not in ds.column_names and c != "split"]
    if missing:
        raise ValueError(f"raw is missing columns {missing}; it has {ds.column_names}")
    keep = [c for c in COLUMNS if c in ds.column_names]
    ds = ds.select_columns(keep)
    wanted = {c: FEATURES[c] for c in keep}
    if any(ds.features[c] != wanted[c] for c in keep):  # e.g. int img_id, Sequence captions
        ds = ds.cast(datasets.Features(wanted))
    _check_captions(ds)
    return ds


def _text_column(ds: datasets.Dataset, name: str) -> np.ndarray:
    """One column as numpy, read through Arrow so that no image is decoded."""
    return ds.with_format("arrow")[name].to_numpy()


def _check_captions(ds: datasets.Dataset) -> None:
    col = ds.with_format("arrow")["caption"]
    counts = pc.list_value_length(col).fill_null(0).to_numpy()
    bad = np.flatnonzero(counts != N_CAPTIONS)
    if bad.size:
        raise ValueError(
            f"caption must hold {N_CAPTIONS} captions per image; row {bad[0]} has {counts[bad[0]]} "
            f"({bad.size} rows differ)"
        )


def _rows_of_split(name: str, ds: datasets.Dataset, key: str, karpathy: str) -> datasets.Dataset | None:
    if "split" in ds.column_names:
        idx = np.flatnonzero(_text_column(ds, "split") == karpathy)
        return ds.select(idx) if idx.size else None
    if _SPLIT_KEYS.get(name) != key:
        return None
    # No split column (a copy with separated splits): add it so the schema is whole.
    return ds.add_column("split", [karpathy] * len(ds)).select_columns(list(COLUMNS))


def check_split_sizes(dd: datasets.DatasetDict, expected: Mapping[str, int]) -> None:
    """Raise ValueError unless every split of `dd` has the expected number of images."""
    got = {k: len(dd[k]) for k in dd}
    wrong = {k: (got.get(k), n) for k, n in expected.items() if got.get(k) != n}
    if wrong:
        detail = ", ".join(f"{k}: {g} (expected {n})" for k, (g, n) in wrong.items())
        raise ValueError(f"expected_sizes do not match the loaded splits: {detail}")


def check_schema(dd: datasets.DatasetDict | datasets.Dataset) -> None:
    """Raise ValueError unless `dd` (or every split of it) has exactly our columns and features."""
    items = dd.items() if isinstance(dd, datasets.DatasetDict) else [("dataset", dd)]
    for name, ds in items:
        if tuple(ds.column_names) != COLUMNS:
            raise ValueError(f"dd split {name!r} has columns {ds.column_names}, expected {list(COLUMNS)}")
        if ds.features != FEATURES:
            raise ValueError(f"dd split {name!r} has features {ds.features}, expected {FEATURES}")
