"""Recorded runs: the full-size results that ship with the workbook, so notebooks 03 and 09-12 open in seconds.

A record is one folder under ``vlr_lib/recorded/`` (package data, read-only once installed):
``manifest.json`` and one gzip'd CSV per table. The manifest holds the command that made it,
the experiment's canonical settings and their sha256, the library and torch versions, the
hardware (CPU model, cores, torch threads), the date, the wall time of the generation and the
training time of the runs (the sum of their epochs' seconds, measured when they were trained),
and the sha256 and row count of every table file.

Tables are lists of JSON objects, one per row: nested keys are joined with "/" into columns
(``probe_cocos/triplet_i2t/C_q``), every cell holds a JSON value (so ints stay ints, NaN stays
NaN, floats round-trip bit for bit) and an empty cell is a key the row did not have. A grid's
cells (configuration, seed, per-epoch history; ``vlr_lib.experiments.grid``) become two tables:
``runs`` (one row per cell) and ``epochs`` (one row per cell and epoch).

Reading (:func:`read`) is checked, never trusted: a record is used only when the sha256 of the
caller's settings equals the manifest's, and every table's bytes hash to the manifest's sha256;
a damaged, truncated or hand-edited record is skipped with a :class:`RecordWarning` (the caller
re-trains), never drawn. The manifest is validated as a whole (its keys and types; table files are
plain names of regular files in the record's own folder) and hashes to its own ``manifest_sha256``,
which it must hold, so an edited date, hardware or meta shows too (a deleted hash too). A file that cannot be
parsed, whatever the reason (nesting deeper than Python's stack included), is damage like any other. The notebooks also re-train one recorded run from
scratch in every mode and compare it with the record within the record's measured tolerance
(``protocol.EXPERIMENTS``, :func:`check_reproduced`).

Writing (:func:`write`) happens only where ``$VLR_RECORD`` names a folder (``make record``,
``data_scripts/record_runs.py``, sets it to ``vlr_lib/recorded``): each record is built in a
new folder that then takes the old one's place (``_io.atomic_dir``), one writer at a time; a write killed
between the two renames leaves the previous record aside, which reading and the next write put back.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import platform
import shutil
import stat
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import torch

from .. import __version__, env
from ..env import flag
from .._io import atomic_dir, atomic_write_json, locked

if TYPE_CHECKING:
    from .grid_search import GridResult

RECORDED = Path(__file__).resolve().parents[1] / "recorded"
MANIFEST = "manifest.json"
FORMAT = "vlr-record-1"
RECORD_ENV = "VLR_RECORD"
REGENERATE = "make record (python data_scripts/record_runs.py)"
SEP = "/"
#: The tolerance of a re-trained run against a record no experiment lists (one made elsewhere, e.g. with
#: VLR_RECORD), in validation rsum points: what the records of heads on frozen features measured
#: (``vlr_lib.experiments.protocol`` holds each record's, and how it was measured).
RSUM_TOLERANCE = 2.5


class RecordWarning(UserWarning):
    """A record exists but cannot be used (damaged or hand-edited): the notebook re-trains instead."""


class RecordDriftWarning(UserWarning):
    """A re-trained run landed farther from its record than the tolerance: shown in full mode, an error in tests."""


# --------------------------------------------------------------------------- settings and hashes


def canonical(settings: Mapping) -> str:
    """The settings as canonical JSON (sorted keys, no spaces; tuples become lists)."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":"))


def settings_hash(settings: Mapping) -> str:
    """sha256 of :func:`canonical`: the key a record is found by."""
    return hashlib.sha256(canonical(settings).encode()).hexdigest()


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def encoder_sha256() -> str:
    """The sha256 of the shapes encoder that ships with the package: the features every shapes record was made from."""
    from ..shapes_encoder import shipped_sha256

    return shipped_sha256()


def hardware() -> dict:
    """What the runs were trained on (a GPU only when torch sees one)."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "gpu": gpu,
            "machine": platform.machine()}


# --------------------------------------------------------------------------- tables of JSON objects


def flatten(row: Mapping, prefix: str = "") -> dict:
    """{"test": {"rsum": 1}} -> {"test/rsum": 1} (empty dicts are kept as {})."""
    out: dict = {}
    for key, value in row.items():
        if SEP in str(key):
            raise ValueError(f"record keys cannot contain {SEP!r}, got {key!r}")
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}{SEP}"))
        else:
            out[name] = value
    return out


def unflatten(flat: Mapping) -> dict:
    """The inverse of :func:`flatten`."""
    out: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split(SEP)
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def _json_value(value) -> str:
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        value = value.item()  # numpy scalars
    return json.dumps(value)


def encode_table(rows: Iterable[Mapping]) -> bytes:
    """Rows (nested dicts) as a gzip'd CSV of JSON cells; deterministic bytes (gzip mtime 0)."""
    flat = [flatten(r) for r in rows]
    columns = list(dict.fromkeys(c for r in flat for c in r))
    frame = pd.DataFrame([[_json_value(r[c]) if c in r else "" for c in columns] for r in flat], columns=columns)
    return gzip.compress(frame.to_csv(index=False).encode(), compresslevel=9, mtime=0)


def decode_table(data: bytes) -> list[dict]:
    """The rows of :func:`encode_table` (nested dicts, keys the row did not have left out)."""
    frame = pd.read_csv(io.BytesIO(gzip.decompress(data)), dtype=str, keep_default_na=False)
    return [unflatten({c: json.loads(v) for c, v in zip(frame.columns, values) if v != ""})
            for values in frame.itertuples(index=False)]


def frame_rows(frame: pd.DataFrame) -> list[dict]:
    """A flat DataFrame's rows as dicts, NaN kept as NaN (columns named without "/")."""
    return [{k: v for k, v in row.items()} for row in frame.to_dict("records")]


def history_rows(histories: Mapping[str, Sequence[Mapping]]) -> list[dict]:
    """Named per-epoch histories as one table: a row per run and epoch, the run's name in column "run"."""
    return [{"run": name, **r} for name, history in histories.items() for r in history]


def histories_of(rows: Iterable[Mapping]) -> dict[str, list[dict]]:
    """The inverse of :func:`history_rows`."""
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["run"], []).append({k: v for k, v in row.items() if k != "run"})
    return out


# --------------------------------------------------------------------------- grid cells


def cell_rows(cells: Sequence[Mapping]) -> dict[str, list[dict]]:
    """Grid cells ({"key", "config", "seed", "data_id", "settings", "history"}) as the tables runs and epochs."""
    runs = [{"run": i, **{k: v for k, v in c.items() if k != "history"}} for i, c in enumerate(cells)]
    epochs = [{"run": i, **record} for i, c in enumerate(cells) for record in c["history"]]
    return {"runs": runs, "epochs": epochs}


def cells_of(tables: Mapping[str, list[dict]]) -> list[dict]:
    """The inverse of :func:`cell_rows`, in the recorded order."""
    history = histories_of(tables["epochs"])
    return [{**{k: v for k, v in r.items() if k != "run"}, "history": history[r["run"]]} for r in tables["runs"]]


def grid_cells(out: Path, keys: Iterable[str]) -> list[dict]:
    """The stored cells of a grid folder, by key (what a record of a grid holds)."""
    from .grid_search import read_cell

    return [{"key": k, **read_cell(Path(out) / "cells" / f"{k}.json")} for k in keys]


def cell_table(cells: Sequence[Mapping]) -> pd.DataFrame:
    """The runs table ``grid`` returns, rebuilt from cells (one row per cell, in their order)."""
    from .grid_search import row

    return pd.DataFrame([row(c["config"], c["seed"], c["key"], c["history"], c.get("data_id"), c.get("settings"))
                         for c in cells])


def cell_history(cells: Sequence[Mapping], config: Mapping, seed: int) -> list[dict]:
    """The history of the cell with this configuration and seed (a KeyError names them when there is none)."""
    for c in cells:
        if c["config"] == dict(config) and c["seed"] == seed:
            return c["history"]
    raise KeyError(f"no recorded run of {dict(config)} with seed {seed}")


def train_seconds(epochs: Iterable[Mapping]) -> float:
    """The training time of per-epoch rows (histories, a grid's epochs table): the sum of their recorded seconds."""
    return float(sum(r.get("seconds") or 0.0 for r in epochs))


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Record:
    """A checked record: its folder, manifest and tables (lists of row dicts)."""

    name: str
    path: Path
    manifest: dict
    tables: dict[str, list[dict]]

    def line(self) -> str:
        """One line for the notebook: where the numbers come from."""
        m, hw = self.manifest, self.manifest["hardware"]
        trained = m.get("train_seconds")
        spent = f"{trained / 60:.1f} min of training" if trained else f"{m['wall_seconds'] / 60:.1f} min"
        where = f"{hw['cores']}-core {hw['cpu']}" + (f" + {hw['gpu']}" if hw.get("gpu") else "")
        share = self.last_epoch_share()
        rising = "" if share is None else f"; {share:.0%} of its runs select their last epoch"
        return (f"Opened from the record {self.name} of {m['date'][:10]} ({where}, torch {m['library']['torch']}, "
                f"{hw['torch_threads']} thread(s); {spent}{rising}); VLR_RERUN=1 re-trains.")

    def last_epoch_share(self) -> float | None:
        """The share of the record's runs whose best validation rsum is at their last epoch (still rising when
        they stopped), from its per-epoch table; None when the record has none."""
        table = self.tables.get("epochs") or self.tables.get("runs")
        if not table or not {"run", "epoch", "rsum"} <= set(table[0]):
            return None
        frame = pd.DataFrame(table)[["run", "epoch", "rsum"]].reset_index(drop=True)
        by_run = frame.groupby("run")
        best = frame.loc[by_run["rsum"].idxmax(), ["run", "epoch"]].set_index("run")["epoch"]  # first best epoch
        return float((best == by_run["epoch"].max()).mean())


def record_root() -> Path:
    """$VLR_RECORD (while records are being made), else the records that ship with the package."""
    return destination() or RECORDED


def warn_damaged(path: Path, why: str) -> None:
    """A :class:`RecordWarning` that the record in `path` is not used and why (an experiment's own check failed)."""
    _damaged(path, why, stacklevel=4)


def _damaged(path: Path, why: str, stacklevel: int = 3) -> None:
    warnings.warn(RecordWarning(f"the record {path} is not used: {why}; the runs are re-trained instead "
                                f"(regenerate the record with {REGENERATE})"), stacklevel=stacklevel)


#: The manifest's keys and their JSON types (more keys may come; none of these may go), and those of a table entry.
MANIFEST_TYPES: dict[str, type | tuple[type, ...]] = {
    "format": str, "name": str, "title": str, "command": str, "settings": dict, "settings_sha256": str,
    "library": dict, "hardware": dict, "date": str, "wall_seconds": (int, float),
    "train_seconds": (int, float, type(None)), "tables": dict, "meta": dict, "manifest_sha256": str}
TABLE_TYPES: dict[str, type] = {"file": str, "rows": int, "sha256": str}
NESTED_KEYS = {"library": ("vlr_lib", "torch", "python"), "hardware": ("cpu", "cores", "torch_threads", "gpu")}
#: The manifest's hash of its own content (all of it but this key): an edited date, hardware or meta shows. It is
#: required (in MANIFEST_TYPES): a manifest without it would turn its own edit check off.
MANIFEST_HASH = "manifest_sha256"


def manifest_hash(manifest: Mapping) -> str:
    """sha256 of the manifest's canonical JSON without :data:`MANIFEST_HASH`."""
    return settings_hash({k: v for k, v in manifest.items() if k != MANIFEST_HASH})


def _field_problems(where: str, obj: dict, types: Mapping) -> list[str]:
    """The keys of `types` that `obj` lacks or holds with another type (a bool is never a number)."""
    return [f"{where}: {k} is missing" if k not in obj else f"{where}: {k} is a {type(obj[k]).__name__}"
            for k, kind in types.items()
            if k not in obj or not isinstance(obj[k], kind) or isinstance(obj[k], bool)]


def _shape_problems(manifest) -> list[str]:
    """The manifest's keys and types, as a whole (so nothing below meets a KeyError or a list for a dict)."""
    if not isinstance(manifest, dict):
        return [f"{MANIFEST} holds a {type(manifest).__name__}, not an object"]
    found = _field_problems(MANIFEST, manifest, MANIFEST_TYPES)
    for key, needed in NESTED_KEYS.items():
        if isinstance(manifest.get(key), dict):
            found += [f"{MANIFEST}: {key} has no {n}" for n in needed if n not in manifest[key]]
    tables = manifest.get("tables")
    if not isinstance(tables, dict):
        return found
    if not tables:
        found.append(f"{MANIFEST}: tables is empty")
    for name, entry in tables.items():
        found += (_field_problems(f"table {name}", entry, TABLE_TYPES) if isinstance(entry, dict)
                  else [f"table {name}: a {type(entry).__name__}, not an object"])
    return found


def _plain_file(folder: Path, name: str) -> str | None:
    """Why `name` is not a regular file directly inside `folder` (None when it is): never another folder's file
    ("../x"), a link, or a FIFO, which would hang the read."""
    if name in ("", ".", "..") or name != Path(name).name or "\\" in name or name.startswith("."):
        return f"{name!r} is not a plain file name inside the record's folder"
    try:
        mode = os.lstat(folder / name).st_mode
    except OSError as err:
        return f"{name!r}: {type(err).__name__}: {err.strerror}"
    return None if stat.S_ISREG(mode) else f"{name!r} is not a regular file"


#: What reading a record's JSON may raise on a damaged file: nesting deeper than Python's stack is a RecursionError.
PARSE_ERRORS = (OSError, ValueError, EOFError, RecursionError)


def _manifest(path: Path) -> dict:
    return json.loads((path / MANIFEST).read_text())


def problems(path: Path, settings: Mapping | None = None) -> list[str]:
    """What is wrong with the record in `path` (empty when it is sound and, given `settings`, matches them)."""
    unsafe = _plain_file(path, MANIFEST)
    if unsafe:
        return [f"{MANIFEST} unreadable ({unsafe})"]
    try:
        manifest = _manifest(path)
        return _manifest_problems(path, manifest, settings)
    except PARSE_ERRORS as err:  # hashing a deep (but parsed) manifest may recurse too deep as well
        return [f"{MANIFEST} unreadable ({type(err).__name__}: {_brief(err)})"]


def _brief(err: BaseException) -> str:
    """An error's message on one line, at most 200 characters (a parser's may quote the file)."""
    return " ".join(str(err).split())[:200]


def _manifest_problems(path: Path, manifest, settings: Mapping | None) -> list[str]:
    found = _shape_problems(manifest)
    if found:
        return found
    tables, declared = manifest["tables"], manifest["settings_sha256"]
    if manifest.get("format") != FORMAT:
        found.append(f"format {manifest.get('format')!r}, expected {FORMAT!r}")
    if settings_hash(manifest.get("settings", {})) != declared:
        found.append("the manifest's settings do not hash to its settings_sha256 (edited by hand?)")
    if manifest[MANIFEST_HASH] != manifest_hash(manifest):
        found.append(f"the manifest does not hash to its {MANIFEST_HASH}: its date, hardware, meta or another "
                     "field was edited by hand")
    if settings is not None and settings_hash(settings) != declared:
        found.append(f"stale: recorded for other settings (regenerate with {REGENERATE})")
    for name, entry in tables.items():
        unsafe = _plain_file(path, entry["file"])
        if unsafe:
            found.append(f"table {name}: {unsafe}")
            continue
        try:
            data = (path / entry["file"]).read_bytes()
        except OSError as err:
            found.append(f"table {name}: {type(err).__name__}: {err}")
            continue
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            found.append(f"table {name} ({entry['file']}): sha256 differs from the manifest (truncated or edited)")
    return found


def _recovered(path: Path) -> Path:
    """`path`, or -- when a write was killed between its two renames (``_io.atomic_dir``) -- the previous record
    it had moved aside, put back in place where the folder is writable (read from where it lies otherwise)."""
    if path.exists():
        return path
    olds = sorted(path.parent.glob(f".{path.name}.old-*"), key=lambda p: p.stat().st_mtime)
    if not olds:
        return path
    try:
        os.replace(olds[-1], path)
    except OSError:
        return olds[-1]
    return path


def read(name: str, settings: Mapping | None, root: Path | None = None) -> Record | None:
    """The record `name` when it exists, matches `settings` and is intact; else None.

    No record, or a record of other settings (a changed notebook): None, quietly -- the caller
    trains. A damaged or hand-edited record: None with a :class:`RecordWarning`. ``settings=None``
    skips the match (to re-train a record's run from the settings in its manifest).
    """
    path = _recovered(Path(root or record_root()) / name)
    if not (path / MANIFEST).exists() and not (path / MANIFEST).is_symlink():
        return None
    try:
        return _read(name, path, settings)
    except PARSE_ERRORS as err:  # changed since problems() read it, or a table cell nested too deep
        _damaged(path, f"it cannot be parsed ({type(err).__name__}: {_brief(err)})")
        return None


def _read(name: str, path: Path, settings: Mapping | None) -> Record | None:
    found = problems(path)
    if found:
        _damaged(path, "; ".join(found), stacklevel=4)
        return None
    manifest = _manifest(path)
    if settings is not None and manifest["settings_sha256"] != settings_hash(settings):
        return None
    shipped = encoder_sha256()
    if manifest.get("shapes_encoder") != shipped:
        _damaged(path, f"it was made with the shapes encoder {str(manifest.get('shapes_encoder'))[:12]}..., "
                       f"this workbook ships {shipped[:12]}... (its features differ)", stacklevel=4)
        return None
    try:
        tables = {t: decode_table((path / e["file"]).read_bytes()) for t, e in manifest["tables"].items()}
    except PARSE_ERRORS as err:
        _damaged(path, f"a table cannot be decoded ({type(err).__name__}: {_brief(err)})", stacklevel=4)
        return None
    if any(len(tables[t]) != e["rows"] for t, e in manifest["tables"].items()):
        _damaged(path, "a table has another number of rows than its manifest says", stacklevel=4)
        return None
    return Record(name, path, manifest, tables)


# --------------------------------------------------------------------------- writing


def destination() -> Path | None:
    """Where records are written now: ``$VLR_RECORD`` (absolute), or None (the usual case: nothing is written)."""
    return env.path(RECORD_ENV)


def write(name: str, settings: Mapping, tables: Mapping[str, Iterable[Mapping]], *, command: str, title: str,
          wall_seconds: float, train_seconds: float | None = None, meta: Mapping | None = None,
          root: Path | None = None) -> Path:
    """Write the record `name` (a new folder that replaces the old one) and return its path."""
    path = Path(root or destination() or RECORDED) / name
    settings = json.loads(canonical(settings))
    encoded = {t: (list(rows), None) for t, rows in tables.items()}
    encoded = {t: (rows, encode_table(rows)) for t, (rows, _) in encoded.items()}
    manifest = {
        "format": FORMAT,
        "name": name,
        "title": title,
        "command": command,
        "regenerate": REGENERATE,
        "settings": settings,
        "settings_sha256": settings_hash(settings),
        "library": {"vlr_lib": __version__, "torch": torch.__version__, "python": platform.python_version()},
        "hardware": hardware(),
        "shapes_encoder": encoder_sha256(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_seconds": round(float(wall_seconds), 1),
        "train_seconds": None if train_seconds is None else round(float(train_seconds), 1),
        "tables": {t: {"file": f"{t}.csv.gz", "rows": len(rows), "sha256": hashlib.sha256(data).hexdigest()}
                   for t, (rows, data) in encoded.items()},
        "meta": dict(meta or {}),
    }
    manifest[MANIFEST_HASH] = manifest_hash(manifest)  # last: it covers every other field
    with locked(path.parent, f".{name}.lock"):  # one writer of a record at a time
        _tidy(path)
        with atomic_dir(path) as tmp:
            for t, (_, data) in encoded.items():
                (tmp / f"{t}.csv.gz").write_bytes(data)
            atomic_write_json(tmp / MANIFEST, manifest)
    return path


def _tidy(path: Path) -> None:
    """Under the writers' lock: what killed writes left -- the previous record put back when one was killed
    between its renames, then the moved-aside and half-filled folders (no writer is using them)."""
    _recovered(path)
    for left in [*path.parent.glob(f".{path.name}.old-*"), *path.parent.glob(f".{path.name}.*.tmp")]:
        shutil.rmtree(left, ignore_errors=True)


def keep(name: str, settings: Mapping, tables: Mapping[str, Iterable[Mapping]], **how) -> Path | None:
    """:func:`write` where ``$VLR_RECORD`` asks for records (``make record``); None otherwise (the usual case:
    nothing is written)."""
    return None if destination() is None else write(name, settings, tables, **how)


def keep_grid(name: str, settings: Mapping, runs: pd.DataFrame, out: str | os.PathLike | None, **how) -> Path | None:
    """:func:`keep` of the cells of a grid's runs table (``out/cells``), with their training time."""
    if destination() is None:
        return None
    if out is None:
        raise ValueError(f"the record {name} keeps a grid's cells: run the grid with out= (a folder for its cells)")
    tables = cell_rows(grid_cells(out, runs["key"]))
    return write(name, settings, tables, train_seconds=train_seconds(tables["epochs"]), **how)


def open_or_train(name: str, settings: Mapping, train: Callable[[], Mapping[str, list[dict]]], use_record: bool = True,
                  **how) -> tuple[dict[str, list[dict]], Record | None]:
    """An experiment's tables in one call: the shipped record `name` when `use_record` and it was made with
    `settings` (their sha256 is its manifest's), else ``train()`` -- the same tables, trained now, which
    :func:`keep` keeps as the record under ``make record`` (`how`: its title and command). Returns (tables, the
    record or None)."""
    rec = read(name, settings) if use_record else None
    if rec is not None:
        return rec.tables, rec
    start = time.perf_counter()
    tables = dict(train())
    epochs = next(iter(tables.values()), [])
    keep(name, settings, tables, wall_seconds=time.perf_counter() - start, **{"train_seconds": train_seconds(epochs), **how})
    return tables, None


def grid_or_train(name: str, settings: Mapping, train: Callable[[], "GridResult"], use_record: bool = True,
                  **how) -> tuple[pd.DataFrame, Record | None]:
    """A grid's runs table in one call: from the shipped record `name` when `use_record` and it was made with
    `settings` (their sha256 is its manifest's), else ``train()`` -- a grid call, whose cells :func:`keep_grid`
    keeps as the record under ``make record``. Returns (runs, the record or None)."""
    rec = read(name, settings) if use_record else None
    if rec is not None:
        return cell_table(cells_of(rec.tables)), rec
    start = time.perf_counter()
    result = train()
    keep_grid(name, settings, result.runs, result.out, wall_seconds=time.perf_counter() - start, **how)
    return result.runs, None


# --------------------------------------------------------------------------- checked, not trusted


def strict_checks() -> bool:
    """Whether a drift beyond tolerance is an error: under the tests and CI (VLR_FAST=1) and in the book build
    (VLR_BOOK=1); in full mode (``make lab``) it is a warning and the chapter goes on from the record."""
    return flag("VLR_FAST") or flag("VLR_BOOK")


def check_reproduced(recorded: Sequence[float], again: Sequence[float], what: str,
                     tolerance: float | None = None, *, strict: bool | None = None) -> float:
    """Compare a re-trained run's per-epoch rsums with the record's; return the largest gap.

    The tolerance is `tolerance` (the record's measured one, ``protocol.tolerance``), else
    :data:`RSUM_TOLERANCE`. Beyond it (or a
    different number of epochs, or a NaN): an AssertionError when `strict` (default
    :func:`strict_checks`), else a :class:`RecordDriftWarning` with the numbers and what they mean.
    """
    limit = RSUM_TOLERANCE if tolerance is None else float(tolerance)
    strict = strict_checks() if strict is None else strict
    recorded, again = [float(x) for x in recorded], [float(x) for x in again]
    if len(recorded) != len(again):
        raise AssertionError(f"{what}: the record has {len(recorded)} epochs, the re-trained run {len(again)}")
    gap = max((abs(a - b) for a, b in zip(recorded, again)), default=0.0)
    if math.isfinite(gap) and gap <= limit:
        return gap
    if strict:
        raise AssertionError(f"{what}: re-trained rsums {again} differ from the record's {recorded} by up to "
                             f"{gap:.2f} > {limit} rsum points: the code or the data changed since the record "
                             f"was made; regenerate it with {REGENERATE}")
    warnings.warn(RecordDriftWarning(
        f"{what}: the run re-trained on this machine lands {gap:.2f} rsum points from the record at some epoch, "
        f"more than the {limit} measured across CPU kernels and thread counts (docs/results.md). Your CPU or "
        f"your copy of the code computes differently from the one that made the record; this chapter goes on "
        f"with the recorded numbers. Re-trained: {[round(x, 1) for x in again]}; recorded: "
        f"{[round(x, 1) for x in recorded]}. If you changed the code or the data, regenerate the record with "
        f"{REGENERATE}."), stacklevel=2)
    return gap


__all__ = ["RECORDED", "RSUM_TOLERANCE", "RecordDriftWarning", "strict_checks",
           "encoder_sha256", "REGENERATE", "RecordWarning", "warn_damaged", "Record", "settings_hash", "read", "write",
           "problems", "destination", "keep", "keep_grid", "open_or_train", "grid_or_train", "history_rows", "histories_of", "cell_rows", "cells_of", "grid_cells", "cell_table", "cell_history", "train_seconds",
           "check_reproduced", "hardware"]
