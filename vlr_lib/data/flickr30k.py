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
``TEST/test/`` directory. NOT verified (no network here): an actual download.
A Parquet-native alternative with the same columns and the splits already
separated is "umaru97/flickr30k_train_val_test" (splits "train"/"val"/"test";
VLR_FLICKR_REPO=umaru97/flickr30k_train_val_test VLR_FLICKR_REVISION=main);
`normalize_flickr30k` accepts both layouts.

Pinning: "refs/convert/parquet" is a branch the Hub's bot may rewrite, so a
revision is always *resolved to a commit hash* (:func:`resolve_revision`: the
Hub's ``HfApi().dataset_info(repo, revision=...).sha``, or, offline, the ref
recorded in the Hugging Face cache), the data are loaded at that commit, and
feature caches are keyed by it. Pin one with ``--revision <40-hex commit>`` /
VLR_FLICKR_REVISION (a full commit hash needs no network to resolve).

Which copy is read (:func:`resolve_source`, the one rule of every command line,
data script and notebook): an explicit `path`; else $VLR_DATA_PATH; else the
copy that data_scripts/prepare_flickr30k.py saves by default
(``vlr_lib.paths.flickr30k_dir()``) when it exists; else the Hub. A copy saved
by prepare_flickr30k records the Hub repo and commit it came from
(:data:`SOURCE_FILE`), and a folder inside the Hugging Face cache
(``datasets--<owner>--<name>/snapshots/<commit>``) names them in its path: such
copies have the Hub's identity, so a download and a saved copy of the same
commit share their feature caches. Any other local copy is
``"flickr30k:<folder name>"``.

Offline use: a Hub download is cached under HF_HOME; afterwards
HF_DATASETS_OFFLINE=1 (and HF_HUB_OFFLINE=1) reads the cache. Or pass `path=`
(``--data-path``, VLR_DATA_PATH) a local copy: a folder of Parquet files in the
Hub layout, a folder written by `DatasetDict.save_to_disk` (e.g. by
data_scripts/prepare_flickr30k.py), or Parquet file(s).
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow.compute as pc
from datasets.exceptions import DatasetGenerationError  # a truncated or damaged Parquet file of a local copy

from .. import env

DEFAULT_REPO_ID = "nlphuji/flickr30k"
DEFAULT_REVISION = "refs/convert/parquet"
ENV_REPO = "VLR_FLICKR_REPO"
ENV_REVISION = "VLR_FLICKR_REVISION"
#: Written by data_scripts/prepare_flickr30k.py into the saved folder: the Hub repo and commit of its rows.
SOURCE_FILE = "vlr_source.json"
_COMMIT = re.compile(r"[0-9a-f]{40}")

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


#: How to work without the Hub, said by every "unreachable" error.
OFFLINE_HELP = (
    "To work offline: (1) on a machine with network, run `python data_scripts/prepare_flickr30k.py` "
    "(it saves a copy under ~/.cache/vlr-workbook/data/flickr30k, or --out) and copy that folder, or the "
    "Hugging Face cache (HF_HOME), here; (2) then pass the copy with --data-path (VLR_DATA_PATH in "
    "notebooks, path= in Python), or set HF_HOME to the copied cache with HF_DATASETS_OFFLINE=1 and "
    "HF_HUB_OFFLINE=1 (a full --revision <commit hash> needs no network to resolve). "
    "The shapes dataset (--data shapes) needs no network."
)


@dataclass(frozen=True)
class Source:
    """Where Flickr30K is read from, and the identity its feature caches are keyed by.

    dataset_id: the Hub repo id, also for a local copy that records its Hub commit; else
        "flickr30k:<folder name>". revision: the commit hash when known (always for the Hub),
        else the label given for a local copy ("" when none). path: the local copy, None for
        the Hub. requested: the revision asked for (a branch, tag or commit), Hub only.
    """

    dataset_id: str
    revision: str
    path: Path | None = None
    requested: str | None = None

    def describe(self) -> str:
        at = f"@{self.revision[:12]}" if self.revision else ""
        if self.path is None:
            asked = f" ({self.requested})" if self.requested and self.requested != self.revision else ""
            return f"the Hub's {self.dataset_id}{at}{asked}"
        kind = "copy of " + self.dataset_id + at if not self.dataset_id.startswith("flickr30k:") else "local copy"
        return f"{kind} at {self.path}"


def _hub_api():
    from huggingface_hub import HfApi

    return HfApi()


def _hub_cache() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def resolve_revision(repo_id: str, revision: str, *, api: Any = None, hub_cache: str | os.PathLike | None = None) -> str:
    """The commit hash that `revision` (a branch, tag or commit) of dataset `repo_id` points to.

    A full 40-hex commit is returned as it is (no network). Otherwise the Hub is asked
    (``HfApi().dataset_info(repo_id, revision=...).sha``); when it cannot be reached, the ref
    that the Hugging Face cache recorded at the last download
    (``<HF_HUB_CACHE>/datasets--<owner>--<name>/refs/<revision>``, huggingface_hub's cache
    layout) answers. Raises DatasetUnavailableError when neither can, ValueError when the Hub
    has no such repo or revision.
    """
    if _COMMIT.fullmatch(revision):
        return revision
    api = api or _hub_api()
    try:
        return str(api.dataset_info(repo_id, revision=revision).sha)
    except Exception as err:  # noqa: BLE001 - sorted below: offline -> the cache; not found -> ValueError
        name = type(err).__name__
        if name in ("RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError"):
            raise ValueError(f"revision {revision!r} of the Hub dataset {repo_id!r} cannot be resolved "
                             f"({name}); check --revision / {ENV_REVISION} and the repo id ({ENV_REPO})") from err
        if not _is_offline_error(err):
            raise
        cached = cached_commit(repo_id, revision, hub_cache)
        if cached is not None:
            return cached
        raise DatasetUnavailableError(
            f"Flickr30K revision {revision!r} of {repo_id!r} cannot be resolved to a commit: the Hugging Face Hub "
            f"is unreachable ({name}: {err}) and the Hugging Face cache ({hub_cache or _hub_cache()}) has no "
            f"download of it. {OFFLINE_HELP}"
        ) from err


def cached_commit(repo_id: str, revision: str, hub_cache: str | os.PathLike | None = None) -> str | None:
    """The commit the Hugging Face cache recorded for `revision` of dataset `repo_id`, or None."""
    ref = Path(hub_cache or _hub_cache()) / f"datasets--{repo_id.replace('/', '--')}" / "refs" / revision
    try:
        commit = ref.read_text().strip()
    except OSError:
        return None
    return commit if _COMMIT.fullmatch(commit) else None


def _snapshot_identity(path: Path) -> tuple[str, str] | None:
    """(repo id, commit) of a folder inside the HF cache: .../datasets--<owner>--<name>/snapshots/<commit>[/...]."""
    parts = path.resolve().parts
    for i in range(len(parts) - 2):
        if parts[i].startswith("datasets--") and parts[i + 1] == "snapshots" and _COMMIT.fullmatch(parts[i + 2]):
            return parts[i][len("datasets--"):].replace("--", "/"), parts[i + 2]
    return None


def read_source_file(path: str | os.PathLike) -> dict | None:
    """The provenance that prepare_flickr30k.py saved with a copy (:data:`SOURCE_FILE`), or None."""
    file = Path(path) / SOURCE_FILE
    if not file.is_file():
        return None
    try:
        record = json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"path {str(path)!r}: {SOURCE_FILE} cannot be read ({err}); delete it or prepare the copy "
                         "again with data_scripts/prepare_flickr30k.py") from None
    return record if isinstance(record, dict) else None


def hub_source(repo_id: str | None = None, revision: str | None = None, *, api: Any = None,
               hub_cache: str | os.PathLike | None = None) -> Source:
    """The Hub as a source: `repo_id` (VLR_FLICKR_REPO, DEFAULT_REPO_ID) at `revision` (VLR_FLICKR_REVISION,
    DEFAULT_REVISION), resolved to a commit (:func:`resolve_revision`)."""
    repo = repo_id or env.text(ENV_REPO) or DEFAULT_REPO_ID
    asked = revision or env.text(ENV_REVISION) or DEFAULT_REVISION
    return Source(repo, resolve_revision(repo, asked, api=api, hub_cache=hub_cache), None, asked)


def resolve_source(
    path: str | os.PathLike | None = None,
    *,
    repo_id: str | None = None,
    revision: str | None = None,
    api: Any = None,
    hub_cache: str | os.PathLike | None = None,
) -> Source:
    """Which Flickr30K copy is read and its cache identity (the rule of the module docstring).

    `path`, else (unless `repo_id` asks for the Hub) $VLR_DATA_PATH, else prepare_flickr30k's
    default folder when it holds a copy (``vlr_lib.paths.flickr30k_path``), else the Hub
    (:func:`hub_source`). A local copy whose provenance is known (prepare_flickr30k's
    :data:`SOURCE_FILE`, or a snapshot folder of the HF cache) has the Hub's (repo id, commit);
    a `revision` that contradicts it is an error. Any other local copy is
    ("flickr30k:<folder>", revision or "").
    """
    from ..paths import flickr30k_path

    if path is not None and repo_id:
        raise ValueError(f"repo_id {repo_id!r} is for the Hub, but a local copy is given ({path}); give one or the other")
    local = Path(path).expanduser() if path is not None else None if repo_id else flickr30k_path()
    if local is None:
        return hub_source(repo_id, revision, api=api, hub_cache=hub_cache)
    record = read_source_file(local) if local.is_dir() else None
    known = (record["repo_id"], record["commit"]) if record and record.get("repo_id") and record.get("commit") \
        else _snapshot_identity(local)
    if known is None:
        return Source(f"flickr30k:{local.resolve().name}", revision or "", local)
    if revision and not known[1].startswith(revision):
        raise ValueError(f"revision {revision!r} does not match the local copy at {local}, which holds "
                         f"{known[0]} at commit {known[1]}; leave --revision out, or use another copy")
    return Source(known[0], known[1], local)


def load_flickr30k(
    path: str | os.PathLike | Sequence[str | os.PathLike] | Source | None = None,
    *,
    repo_id: str | None = None,
    revision: str | None = None,
    expected_sizes: Mapping[str, int] | None = KARPATHY_SIZES,
    cache_dir: str | os.PathLike | None = None,
) -> datasets.DatasetDict:
    """Flickr30K (Karpathy split) in our schema, from the Hub or from a local copy.

    path: a local copy (see the module docstring), a :class:`Source` from
        :func:`resolve_source`, or None: $VLR_DATA_PATH, prepare_flickr30k's default copy,
        else the Hub: `repo_id` at `revision` (defaults: env VLR_FLICKR_REPO /
        VLR_FLICKR_REVISION, then DEFAULT_REPO_ID / DEFAULT_REVISION), resolved to a
        commit and loaded at that commit.
    expected_sizes: images per split that the result must have (the Karpathy
        29,000 / 1,014 / 1,000 by default); None skips the check (fixtures, subsets).
    cache_dir: where `datasets` keeps its Arrow cache (default: under HF_HOME).
    Raises DatasetUnavailableError when the Hub cannot be reached and nothing is
    cached, naming the ways to use a local copy.
    """
    if path is not None and not isinstance(path, (str, os.PathLike, Source)):  # a list of Parquet files
        raw = _load_local(path, cache_dir)
    else:
        source = path if isinstance(path, Source) else resolve_source(path, repo_id=repo_id, revision=revision)
        if source.path is not None:
            raw = _load_local(source.path, cache_dir)
        else:  # loaded at the resolved commit: what the caches are keyed by is what is read
            raw = _load_raw(source.dataset_id, revision=source.revision,
                            cache_dir=None if cache_dir is None else str(cache_dir))
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
    except (OSError, ValueError, DatasetGenerationError) as err:  # arrow and datasets errors about the files
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
            f"and no cached copy was found ({type(err).__name__}: {err}). {OFFLINE_HELP}"
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


@dataclass
class CopyReport:
    """What :func:`inspect_copy` found: images per split (our keys), problems (one sentence each), bytes on disk."""

    sizes: dict[str, int]
    problems: list[str]
    nbytes: int


def inspect_copy(path: str | os.PathLike, expected: Mapping[str, int] | None = KARPATHY_SIZES) -> CopyReport:
    """Schema, split sizes and caption counts of a local copy, read from its text columns and file metadata only.

    No image is decoded and no Arrow cache is built, so it takes seconds on the 4.4 GB copy: a
    folder written by save_to_disk is memory-mapped; Parquet files (the Hub layout, an HF cache
    snapshot) are opened with pyarrow, reading the `split` and caption columns alone. A
    truncated or damaged file, a missing column or split, a wrong caption count or (with
    `expected`) a wrong split size is a problem; the copy is usable when there is none.
    """
    p = Path(path)
    files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    nbytes = sum(f.stat().st_size for f in files)
    if p.is_dir() and ((p / "dataset_dict.json").exists() or (p / "dataset_info.json").exists()):
        sizes, problems = _inspect_saved(p)
    else:
        sizes, problems = _inspect_parquet(p, sorted(f for f in files if f.suffix == ".parquet"))
    sizes = {key: sizes[key] for key in SPLITS if key in sizes}
    for key in SPLITS:
        if key not in sizes:
            problems.append(f"split {key!r} is missing (no rows with split {SPLITS[key]!r})")
    if expected is not None and not problems:
        wrong = [f"{k}: {sizes.get(k, 0):,} images (expected {n:,})" for k, n in expected.items() if sizes.get(k) != n]
        if wrong:
            problems.append("split sizes differ from the Karpathy split: " + ", ".join(wrong))
    return CopyReport(sizes, problems, nbytes)


def _inspect_saved(path: Path) -> tuple[dict[str, int], list[str]]:
    try:
        dd = datasets.load_from_disk(str(path))
    except (OSError, ValueError) as err:
        return {}, [f"{path} cannot be read as a saved dataset ({type(err).__name__}: {err})"]
    if not isinstance(dd, datasets.DatasetDict):
        return {}, [f"{path} holds one table, not the splits train / validation / test"]
    sizes, problems = {}, []
    for key in (k for k in SPLITS if k in dd):
        try:
            check_schema(dd[key])
            _check_captions(dd[key])
        except ValueError as err:
            problems.append(str(err))
        sizes[key] = len(dd[key])
    return sizes, problems


def _inspect_parquet(path: Path, files: list[Path]) -> tuple[dict[str, int], list[str]]:
    import pyarrow.parquet as pq

    if not files:
        return {}, [f"{path} holds no Parquet files and no saved dataset"]
    sizes: dict[str, int] = {}
    problems: list[str] = []
    for file in files:
        try:
            table = pq.ParquetFile(file)
            names = [_ALIASES.get(n, n) for n in table.schema_arrow.names]
            missing = [c for c in COLUMNS if c not in names and c != "split"]
            if missing:
                problems.append(f"{file} is missing columns {missing}")
                continue
            caption = table.schema_arrow.names[names.index("caption")]
            columns = [caption] + (["split"] if "split" in names else [])
            text = table.read(columns=columns)
        except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
            problems.append(f"{file} cannot be read (a truncated or damaged download? {type(err).__name__}: {err})")
            continue
        counts = pc.list_value_length(text.column(caption)).fill_null(0).to_numpy()
        if (counts != N_CAPTIONS).any():
            problems.append(f"{file}: {(counts != N_CAPTIONS).sum()} rows do not hold {N_CAPTIONS} captions")
        if "split" in columns:
            values, n = np.unique(text.column("split").to_numpy(zero_copy_only=False), return_counts=True)
            keys = {v: k for k, v in SPLITS.items()}
            for value, count in zip(values, n):
                if value in keys:
                    sizes[keys[value]] = sizes.get(keys[value], 0) + int(count)
        else:  # splits separated by file: the split name is a part of the path
            key = next((_SPLIT_KEYS[t] for t in re.split(r"[/_.-]", str(file.relative_to(path))) if t in _SPLIT_KEYS),
                       None)
            if key is None:
                problems.append(f"{file} has no split column and no split name in its path")
            else:
                sizes[key] = sizes.get(key, 0) + len(text)
    return sizes, problems
