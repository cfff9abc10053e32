"""Losses x hyperparameters x seeds: one training run per cell, cached, tidied into pandas.

Every cell (one configuration, one seed, one dataset, one schedule) is stored as its own
JSON file ``<out>/cells/<key>.json``, written atomically, with ``key`` a hash of the
configuration, the seed, the training settings and the data's id. A grid that is re-run
(or extended, or interrupted and restarted) trains only the cells that have no file yet;
a cell interrupted mid-way resumes from its last finished epoch (``<out>/cells/<key>.partial``).

The folder is the union of its cells: after every call, ``runs.csv``, ``runs.parquet`` (one
row per cell: configuration, seed, data id, settings, final metrics) and ``summary.csv``
(``vlr_lib.report.summary.summarize``: mean and std over seeds, never mixing data or schedules) are
rebuilt from *every* cell under ``<out>/cells``, not only this call's. The returned
:class:`GridResult` holds this call's cells.

A selection that cannot be trained (no loss, an unknown loss, a parameter no selected loss
takes, a bad parameter value, repeated seeds, a bad setting) is rejected before anything is
trained or written. Under torchrun every rank trains every cell; rank 0 alone writes.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from .. import registry
from ..report.labels import SETTING_COLUMNS, config_label, flatten_record, settings_json
from ..report.summary import summarize, summary_table
from .._io import UnreadableFileError, atomic_write, atomic_write_json, claim_run_folder, locked, read_json
from ..train import (Objective, TrainSettings, broadcast_object, build_objective, check_setting, fit_end_to_end,
                     fit_many, make_objective, rank_and_world, settings_for, trainer)

#: Model arguments of fit / fit_vsepp / fit_end_to_end a config or the grid may set.
MODEL_KEYS = ("head", "dim", "text_encoder", "width", "word_dim", "hidden", "min_count")
#: Config keys that are training settings (TrainSettings' experiment fields but the seed, and MODEL_KEYS),
#: not loss parameters; they are the settings columns of a runs table.
FIT_KEYS = SETTING_COLUMNS
CELL_FIX = "delete it and run the grid again to retrain that cell"


@dataclass
class GridResult:
    """This call's cells: ``runs`` (one row per configuration x seed) and ``summary`` (mean ± std over seeds)."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    out: str | None = None

    def table(self, metrics: Sequence[str] = ("rsum", "i2t_r1", "t2i_r1")) -> str:
        """The summary as text, "mean ± std" per metric (what vlr-grid prints)."""
        return summary_table(self.summary, metrics)


def goal_grid(**loss_kwargs) -> list[dict]:
    """The 3 x 5 GOAL grid of Xuan & Chen (Tables 3-5): every (triplet weight, pair weight) combination."""
    return [{"loss": name, **loss_kwargs} for name in registry.goal_names()]


# --------------------------------------------------------------------------- the selection


def _product(params: Mapping) -> list[dict]:
    keys = sorted(params)
    values = [v if isinstance(v, (list, tuple)) else [v] for v in (params[k] for k in keys)]
    for k, v in zip(keys, values):
        if not v:
            raise ValueError(f"param_grid {k!r} has no values")
        typed = [(type(x).__name__, x) for x in v]  # topk 1 (a count) and 1.0 (a fraction) differ
        twice = next((x for i, (t, x) in enumerate(typed) if (t, x) in typed[:i]), None)
        if twice is not None:
            raise ValueError(f"param_grid {k!r} lists {twice!r} twice ({list(v)}): one run would count as two, "
                             "a fake spread over seeds")
        twins = float32_twins(x for x in v if isinstance(x, float))
        if twins is not None:
            raise ValueError(f"param_grid {k!r} lists {twins[0]!r} and {twins[1]!r}, one number in float32 (the "
                             "trainer computes in float32): one run would count as two, a fake spread over seeds")
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def float32_twins(values) -> tuple[float, float] | None:
    """Two different numbers of `values` that float32 rounds to the same value (0.2 and 0.2000000001), else None."""
    seen: dict[float, float] = {}
    for v in values:
        as32 = float(torch.tensor(float(v), dtype=torch.float32))
        if as32 in seen and seen[as32] != v:
            return seen[as32], v
        seen.setdefault(as32, v)
    return None


def _takes(loss: str, key: str) -> bool:
    return key in FIT_KEYS or key in registry.parameters(loss)


def expand_configs(losses: Sequence[str | Mapping], param_grid: Mapping | None = None) -> list[dict]:
    """Configs (dicts with "loss" and parameters) from loss names, dicts, and a parameter grid.

    `param_grid` either maps loss names to grids (``{"unified": {"gamma": [30, 60]}}``)
    or is one grid shared by all losses (``{"margin": [0.1, 0.2]}``), each
    parameter applied to the losses that take it. A list is a set of values
    (cartesian product); a dict in `losses` is one config, used as it is.
    An empty selection, an unknown loss, or a parameter that no selected loss takes is a ValueError.
    """
    if isinstance(losses, (str, Mapping)):
        raise TypeError("losses must be a list of loss names or config dicts, e.g. ['info_nce', 'unified']")
    losses = list(losses)
    if not losses:
        raise ValueError("losses is empty: select at least one loss")
    param_grid = dict(param_grid or {})
    per_loss = any(isinstance(v, Mapping) for v in param_grid.values())
    names = [item for item in losses if isinstance(item, str)]
    for item in losses:
        if isinstance(item, Mapping):
            if "loss" not in item:
                raise ValueError(f"losses: a config dict needs a 'loss' key, got {dict(item)}")
            _check_config(item)
        elif isinstance(item, str):
            make_objective(item)  # unknown names fail here, before any training
        else:
            raise TypeError(f"losses must hold loss names or config dicts, got {type(item).__name__}")
    if per_loss:
        stray = sorted(set(param_grid) - set(names))
        if stray:
            raise ValueError(f"param_grid has grids for {stray}, which are not among the losses {names}")
        for loss, grid_ in param_grid.items():
            _check_config({"loss": loss, **{k: None for k in grid_}})
    else:
        for key in param_grid:
            if not any(_takes(n, key) for n in names):
                raise ValueError(f"param_grid has {key!r}, which none of the losses {names} takes")
    configs: list[dict] = []
    for item in losses:
        if isinstance(item, Mapping):
            configs.append(dict(item))
            continue
        grid_ = param_grid.get(item, {}) if per_loss else {k: v for k, v in param_grid.items() if _takes(item, k)}
        configs.extend({"loss": item, **combo} for combo in _product(grid_))
    _check_distinct(configs)
    return configs


def _check_distinct(configs: Sequence[Mapping]) -> None:
    """No configuration twice (``info_nce,info_nce``, or 'goal' and one of its combinations)."""
    seen: set = set()
    for config in configs:
        blob = json.dumps(config, sort_keys=True, default=repr)
        if blob in seen:
            raise ValueError(f"losses select {config_label(config)!r} twice: list each configuration once")
        seen.add(blob)


def _check_config(config: Mapping) -> None:
    """The config's keys are parameters of its loss or training settings."""
    loss = config["loss"]
    bad = sorted(k for k in config if k != "loss" and not _takes(loss, k))
    if bad:
        raise ValueError(f"loss_kwargs has {bad} which loss {loss!r} does not take; it takes "
                         f"{list(registry.parameters(loss))} (and the settings {list(FIT_KEYS)})")


def _split_config(config: Mapping) -> tuple[str, dict, dict]:
    """(loss name, loss kwargs, fit kwargs) of one config."""
    fit_kw = {k: v for k, v in config.items() if k in FIT_KEYS}
    loss_kw = {k: v for k, v in config.items() if k != "loss" and k not in FIT_KEYS}
    return config["loss"], loss_kw, fit_kw


def check_seeds(seeds: Sequence[int]) -> list[int]:
    """A non-empty list of distinct integer seeds >= 0 (a repeated seed would fake a spread of 0)."""
    from .._checks import check_int

    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise TypeError(f"seeds must be a list of ints, got {seeds!r}")
    out = [check_int("seeds", s, 0, 2**63 - 1) for s in seeds]  # numpy and torch seed with int64
    if not out:
        raise ValueError("seeds is empty: give at least one seed")
    repeated = sorted({s for s in out if out.count(s) > 1})
    if repeated:
        raise ValueError(f"seeds must be distinct, got {out} ({repeated} repeated)")
    return out


# --------------------------------------------------------------------------- cells


def tensor_id(*tensors: Tensor) -> str:
    """A content hash of tensors (the default data id of a features grid)."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(str((tuple(t.shape), str(t.dtype))).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def cell_key(config: Mapping, seed: int, data_id: str, settings: Mapping) -> str:
    """A cell's cache key: its configuration with every hyperparameter resolved (``registry.resolved_config``: a
    changed default is a new cell), the seed, the data and the training settings."""
    blob = json.dumps({"config": registry.resolved_config(config), "seed": seed, "data": data_id,
                       "settings": settings}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def row(config: Mapping, seed: int, key: str, history: list[dict], data_id: str | None = None,
        settings: Mapping | None = None) -> dict:
    """One runs-table row: configuration, seed, setting, data id, settings (columns and JSON), last epoch, best epoch.

    Cells written before the three settings record a "mode" ("features", "end_to_end"): their setting is read from it.
    """
    final = flatten_record(history[-1])
    final["train_loss"] = final.pop("loss")
    final["last_lr"] = final.pop("lr", None)  # the decayed lr of the last epoch, not the setting
    rsums = [r.get("rsum") for r in history if r.get("rsum") is not None]
    best = {"best_rsum": max(rsums), "best_epoch": 1 + rsums.index(max(rsums))} if rsums else {}
    settings = dict(settings or {})
    effective = {k: config.get(k, settings.get(k)) for k in FIT_KEYS if k in config or k in settings}
    setting = settings.get("setting") or {"end_to_end": "e2e"}.get(settings.get("mode"), settings.get("mode"))
    return {"config": config_label(config), **config, "seed": seed, "setting": setting, **effective,
            "data_id": data_id,
            "settings": settings_json(settings) if settings else None, **final, **best, "key": key}


def read_cell(path: Path) -> dict:
    """A cell file, checked; an unreadable one names itself and the fix."""
    cell = read_json(path, "grid cell", CELL_FIX)
    problem = _cell_problem(cell)
    if problem:
        raise UnreadableFileError(f"the grid cell {path} is not a cell written by vlr_lib.experiments.grid "
                                  f"({problem}); {CELL_FIX}")
    return cell


def _cell_problem(cell: dict) -> str | None:
    """What a cell lacks to make a runs-table row: a config with a loss name, an int seed, a history of epochs
    whose numbers are numbers (a text rsum would break the summary's mean)."""
    config, history = cell.get("config"), cell.get("history")
    if not isinstance(config, dict) or not isinstance(history, list) or not history:
        return "no config or history"
    if not isinstance(config.get("loss"), str):
        return "its config has no loss name"
    if not isinstance(cell.get("seed"), int) or isinstance(cell.get("seed"), bool):
        return "no integer seed"
    for i, record in enumerate(history, 1):
        if not isinstance(record, dict):
            return f"epoch record {i} is a {type(record).__name__}, not an object"
        bad = [k for k in ("epoch", "loss", "rsum") if record.get(k) is not None and not _is_number(record[k])]
        if bad:
            return f"epoch record {i}: {bad[0]} is {record[bad[0]]!r}, not a number"
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_cells(out: str | os.PathLike) -> None:
    """Read every cell under ``out/cells`` (each names itself when damaged), before anything is trained:
    the tables are rebuilt from all of them, this run's selection or not."""
    for path in sorted((Path(out) / "cells").glob("*.json")):
        read_cell(path)


def _row_of_file(path: Path) -> dict:
    return _cell_row(read_cell(path), path.stem)


def _cell_row(cell: dict, key: str) -> dict:
    return row(cell["config"], cell["seed"], key, cell["history"], cell.get("data_id"), cell.get("settings"))


def cell_settings(config: Mapping, base: TrainSettings) -> TrainSettings:
    """The settings of a config's cells: `base` with the config's setting overrides (not its model arguments)."""
    return base.replace(**{k: v for k, v in _split_config(config)[2].items() if k not in MODEL_KEYS})


def _objectives(configs: Sequence[Mapping], base: TrainSettings,
                built: Sequence[Objective] | None = None) -> list[Objective]:
    """Every config's objective, built and checked once before any training (``build_objective``); `built`:
    the caller already built them (the command line, which names its flags in the errors), one per config."""
    if built is not None:
        if len(built) != len(configs) or not all(isinstance(o, Objective) for o in built):
            raise ValueError(f"objectives must be one Objective per configuration ({len(configs)}), in order")
        return list(built)
    out = []
    for config in configs:
        name, loss_kw, _ = _split_config(config)
        cell = cell_settings(config, base)
        out.append(build_objective(name, loss_kw, batch_size=cell.batch_size, epochs=cell.epochs))
    return out


def _run_cell(config: Mapping, objective: Objective, seed: int, data: Mapping, base: TrainSettings, model: dict,
              partial: Path | None):
    model_kw = {**model, **{k: v for k, v in _split_config(config)[2].items() if k in MODEL_KEYS}}
    settings = cell_settings(config, base).replace(seed=seed, checkpoint_dir=partial)
    if "dataset" in data:
        return fit_end_to_end(data["dataset"], objective, settings=settings, **model_kw)
    return trainer(data["setting"])(*data["train"], objective, val=data.get("val"), settings=settings, **model_kw)


def resolve_setting(setting: str | None, train, dataset) -> str:
    """The setting of a grid: `setting`, checked against the data, or the one the data implies.

    A DatasetDict (`dataset`) is trained end to end; triples (`train`) with caption *features*
    (a float tensor) are "features", with caption texts or token ids "vsepp" (or "e2e" when the
    image inputs are images [N, 3, H, W]). A setting the data cannot serve is a ValueError that
    names the argument.
    """
    if setting is not None:
        check_setting(setting)
    if dataset is not None:
        if setting not in (None, "e2e"):
            raise ValueError(f"setting {setting!r} trains on triples (train=, val=); dataset= (a DatasetDict) is "
                             f"for setting 'e2e'. Build the inputs with vlr_lib.train.shapes_inputs(dd, {setting!r})")
        return "e2e"
    if not isinstance(train, (tuple, list)) or len(train) != 3:
        raise TypeError("train must be a tuple (image inputs, caption inputs, caption_to_image)")
    has_words = not (isinstance(train[1], Tensor) and train[1].is_floating_point())
    images = isinstance(train[0], Tensor) and train[0].dim() == 4
    implied = ("e2e" if images else "vsepp") if has_words else "features"
    if setting is None:
        return implied
    if setting in ("vsepp", "e2e") and not has_words:
        raise ValueError(f"setting {setting!r} trains a text encoder on the captions' words, but train holds "
                         f"caption features (a float tensor of shape {tuple(train[1].shape)}): pass the captions' "
                         f"texts or token ids (vlr_lib.train.shapes_inputs, caption_ids), or use setting 'features'")
    if setting == "features" and has_words:
        raise ValueError("setting 'features' trains heads on caption features, but train holds the captions' texts "
                         "or token ids: use setting 'vsepp' (or pass caption features)")
    return setting


# --------------------------------------------------------------------------- the grid


def grid(
    losses: Sequence[str | Mapping],
    param_grid: Mapping | None = None,
    seeds: Sequence[int] = (0,),
    *,
    train: tuple[Tensor, Tensor, Tensor] | None = None,
    val: tuple[Tensor, Tensor, Tensor] | None = None,
    dataset=None,
    setting: str | None = None,
    out: str | os.PathLike | None = None,
    data_id: str | None = None,
    progress: bool = True,
    settings: TrainSettings | None = None,
    objectives: Sequence[Objective] | None = None,
    batched: bool = False,
    **kwargs,
) -> GridResult:
    """Train every configuration (``expand_configs(losses, param_grid)``) with every seed.

    Data and setting (:data:`~vlr_lib.train.inputs.SETTINGS`, :func:`resolve_setting`):
    ``train`` / ``val`` triples -- caption features for :func:`fit` ("features"), caption texts
    or token ids with image features for :func:`fit_vsepp` ("vsepp") or with images for
    :func:`fit_encoders` ("e2e"); ``vlr_lib.train.shapes_inputs`` builds all three -- or
    ``dataset`` (a shapes DatasetDict) for :func:`fit_end_to_end`. ``setting`` (default: the
    one the data implies) is recorded in every cell and row. Shared training arguments:
    ``settings`` (a ``TrainSettings``; default the setting's) and keyword arguments, which are
    TrainSettings fields (epochs, batch_size, lr, callbacks, device, ...) or model arguments
    (:data:`MODEL_KEYS`); a config may override the settings and model arguments.
    ``progress`` is the bar over cells (the runs themselves are quiet). ``objectives``: the configurations'
    objectives when the caller built them already (``train.build_objective``, one per configuration, in
    order); by default each is built and checked here, before any cell trains.

    With ``out``, cells are cached in ``out/cells`` and the folder's tables rebuilt from all
    of them (module docstring). ``data_id`` names the data in the cache key (default: a
    content hash). Example, the GOAL table: ``grid(goal_grid(), seeds=[0, 1, 2], ...)``.

    ``batched=True`` (features setting, for a GPU): the untrained cells that share their settings train together,
    their heads stacked (``vlr_lib.train.fit_many``), each cell's history the one it gets alone; they keep no
    ``.partial`` checkpoint (an interrupted group is retrained). Off by default: on the CPU one by one is as fast.
    """
    if (train is None) == (dataset is None):
        raise ValueError("train or dataset must be given (exactly one): triples for fit / fit_vsepp / fit_encoders, "
                         "or a DatasetDict for fit_end_to_end")
    setting = resolve_setting(setting, train, dataset)
    data = {"dataset": dataset} if dataset is not None else {"train": train, "val": val, "setting": setting}
    configs = expand_configs(losses, param_grid)
    seeds = check_seeds(seeds)
    model = {k: kwargs.pop(k) for k in MODEL_KEYS if k in kwargs}
    if "seed" in kwargs or "checkpoint_dir" in kwargs:
        raise TypeError("grid takes seeds=[...] and keeps one checkpoint per cell under out; "
                        "do not pass seed or checkpoint_dir")
    base = settings_for(settings, {"progress": False, **kwargs}, end_to_end=setting == "e2e")
    objectives = _objectives(configs, base, objectives)  # every setting and parameter, before any training
    data_id = data_id or _data_id(data)
    hashed = {"setting": setting, **{k: v for k, v in base.experiment().items() if k != "seed"}, **model}
    cells = Path(out) / "cells" if out is not None else None
    todo = [(c, o, s) for (c, o), s in itertools.product(zip(configs, objectives), seeds)]
    with writing(out):  # the tables are rebuilt under the lock: another run's cells are never left out
        if out is not None:
            check_cells(out)
        trained = _batched(todo, data, data_id, base, model, hashed, cells) if batched else {}
        rows = [_cell(c, o, s, data, data_id, base, model, hashed, cells, trained)
                for c, o, s in _progress(todo, progress)]
        runs = pd.DataFrame(rows)
        if out is not None and rank_and_world()[0] == 0:
            save_tables(Path(out))
    return GridResult(runs, summarize(runs), None if out is None else str(out))


@contextlib.contextmanager
def writing(out: str | os.PathLike | None) -> Iterator[None]:
    """Inside the block, `out` is a run folder (never a folder of other files) whose lock this process holds.

    Under torchrun rank 0 alone writes, so it alone marks and locks; every rank checks the folder.
    """
    if out is None:
        yield
        return
    rank0 = rank_and_world()[0] == 0
    claim_run_folder(out, mark=rank0)
    with locked(out) if rank0 else contextlib.nullcontext():
        yield


def _progress(todo, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(todo, desc="grid", disable=not progress or rank_and_world()[0] != 0)


def _data_id(data: Mapping) -> str:
    if "dataset" in data:
        return "shapes:" + "|".join(getattr(ds, "_fingerprint", "?") for ds in data["dataset"].values())
    parts = [t for triple in (data["train"], data.get("val")) if triple is not None for t in triple]
    return tensor_id(*[t if isinstance(t, Tensor) else _text_tensor(t) for t in parts])


def _text_tensor(texts) -> Tensor:
    """Caption texts as bytes (for the data id), one string after the other, each ended by a NUL."""
    if isinstance(texts, (list, tuple)) and all(isinstance(t, str) for t in texts):
        return torch.frombuffer(bytearray("".join(f"{t}\0" for t in texts).encode()), dtype=torch.uint8)
    return torch.as_tensor(texts)


def _cell_settings(config: Mapping, hashed: dict) -> dict:
    """The settings that key a cell: optimizer_at_switch acts only at a loss schedule's switch, so one-loss runs
    leave it out and share their cells whatever it is."""
    if registry.is_schedule(config.get("loss")):
        return hashed
    return {k: v for k, v in hashed.items() if k != "optimizer_at_switch"}


def _batched(todo, data, data_id, base, model, hashed, cells: Path | None) -> dict[str, list[dict]]:
    """``batched=True``: {cell key: history} of the cells of `todo` without a file, trained together in groups that
    share their settings and model arguments (``train.fit_many``: each history is the one the cell gets alone)."""
    if data.get("setting") != "features":
        raise ValueError(f"batched=True trains the features setting only (heads on frozen features), not "
                         f"{data.get('setting', 'e2e')!r}; leave batched off for it")
    groups: dict[str, list[tuple[str, dict]]] = {}
    for config, objective, seed in todo:
        key = cell_key(config, seed, data_id, _cell_settings(config, hashed))
        if cells is None or not (cells / f"{key}.json").exists():
            model_kw = {**model, **{k: v for k, v in _split_config(config)[2].items() if k in MODEL_KEYS}}
            settings = cell_settings(config, base)
            # a fresh Adam at a loss schedule's switch restarts the whole group: group by the switches too
            shared = json.dumps([settings.experiment(), model_kw, objective.switches()], sort_keys=True, default=repr)
            groups.setdefault(shared, []).append((key, {"loss": objective, "seed": seed, "settings": settings,
                                                        **model_kw}))
    trained = {}
    for members in groups.values():
        results = fit_many([run for _, run in members], train=data["train"], val=data.get("val"))
        trained.update({key: result.history for (key, _), result in zip(members, results)})
    return trained


def _cell(config, objective, seed, data, data_id, base, model, hashed, cells: Path | None,
          trained: Mapping[str, list[dict]] | None = None) -> dict:
    hashed = _cell_settings(config, hashed)
    key = cell_key(config, seed, data_id, hashed)
    path = cells / f"{key}.json" if cells is not None else None
    if broadcast_object(path is not None and path.exists()):  # rank 0 decides: every rank trains the same cells
        return _cell_row(read_cell(path), key)
    partial = cells / f"{key}.partial" if cells is not None else None
    if trained and key in trained:  # trained together with other cells (batched=True)
        history = trained[key]
    else:
        history = _run_cell(config, objective, seed, data, base, model, partial).history
    if path is not None and rank_and_world()[0] == 0:
        atomic_write_json(path, {"config": dict(config), "seed": seed, "data_id": data_id, "settings": hashed,
                                 "history": history})
        shutil.rmtree(partial, ignore_errors=True)
    return row(config, seed, key, history, data_id, hashed)


def union_runs(out: str | os.PathLike) -> pd.DataFrame:
    """The runs table of every cell under ``out/cells`` (sorted by data, settings, configuration, seed)."""
    paths = sorted((Path(out) / "cells").glob("*.json"))
    frame = pd.DataFrame([_row_of_file(p) for p in paths])
    if frame.empty:
        return frame
    order = [c for c in ("data_id", "settings", "config", "seed") if c in frame]
    return frame.sort_values(order, kind="stable", na_position="first", ignore_index=True)


def save_tables(out: Path) -> None:
    """Rebuild runs.csv, runs.parquet and summary.csv of `out` from every cell under ``out/cells``."""
    runs = union_runs(out)
    if runs.empty:
        return
    atomic_write(out / "runs.csv", lambda f: f.write(runs.to_csv(index=False).encode()))
    summary = summarize(runs)
    atomic_write(out / "summary.csv", lambda f: f.write(summary.to_csv(index=False).encode()))
    frame = runs.copy()
    for col in frame.columns:  # mixed-type config columns (e.g. None and floats) need one dtype in Parquet
        if frame[col].dtype == object:
            frame[col] = frame[col].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v))
    atomic_write(out / "runs.parquet", lambda f: frame.to_parquet(f, index=False))
