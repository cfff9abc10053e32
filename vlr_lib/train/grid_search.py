"""Losses x hyperparameters x seeds: one training run per cell, cached, tidied into pandas.

Every cell (one configuration, one seed, one dataset) is stored as its own JSON
file ``<out>/cells/<key>.json``, written atomically, with ``key`` a hash of the
configuration, the seed, the shared training settings and the data's id. A grid
that is re-run (or extended, or interrupted and restarted) trains only the
cells that have no file yet. ``runs`` is the tidy table (one row per run:
configuration columns, seed, final metrics); ``summary`` has mean and std per
configuration over seeds.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from .checkpoint import atomic_write_json
from .end_to_end import fit_end_to_end
from .engine import flatten_record
from .fit_features import fit
from .objective import make_objective

#: Config keys that are training settings (passed to fit), not loss parameters.
FIT_KEYS = ("epochs", "batch_size", "lr", "lr_decay_epoch", "head", "dim", "sampling", "text_encoder", "width")
#: Metrics summarised per configuration (recalls and rsum in percent, map5 and pr_auc fractions; evaluate.py).
SUMMARY_METRICS = ("rsum", "i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "map5", "pr_auc", "pos_sim",
                   "hardneg_sim")
_NOT_HASHED = ("callbacks", "progress", "device", "checkpoint_dir", "resume")


@dataclass
class GridResult:
    runs: pd.DataFrame
    summary: pd.DataFrame
    out: str | None = None

    def table(self, metrics: Sequence[str] = ("rsum", "i2t_r1", "t2i_r1")) -> str:
        """The summary as text, "mean ± std" per metric (what vlr-grid prints)."""
        return summary_table(self.summary, metrics)


def goal_grid(**loss_kwargs) -> list[dict]:
    """The 3 x 5 GOAL grid of Xuan & Chen (Tables 3-5): every (triplet weight, pair weight) combination."""
    from ..goal import GOAL_PAIRS, GOAL_TRIPLETS

    return [{"loss": f"goal:{t},{p}", **loss_kwargs} for t in GOAL_TRIPLETS for p in GOAL_PAIRS]


def _product(params: Mapping) -> list[dict]:
    keys = sorted(params)
    values = [v if isinstance(v, (list, tuple)) else [v] for v in (params[k] for k in keys)]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def _accepts(loss: str, key: str) -> bool:
    try:
        make_objective(loss, {key: 1.0} if key not in FIT_KEYS else None)
    except (ValueError, TypeError) as err:
        return "loss_kwargs" not in str(err)  # only "not a parameter of this loss" rejects
    return True


def expand_configs(losses: Sequence[str | Mapping], param_grid: Mapping | None = None) -> list[dict]:
    """Configs (dicts with "loss" and parameters) from loss names, dicts, and a parameter grid.

    `param_grid` either maps loss names to grids (``{"unified": {"gamma": [30, 60]}}``)
    or is one grid shared by all losses (``{"margin": [0.1, 0.2]}``), each
    parameter applied to the losses that take it. A list is a set of values
    (cartesian product); a dict in `losses` is one config, used as it is.
    """
    param_grid = dict(param_grid or {})
    per_loss = any(isinstance(v, Mapping) for v in param_grid.values())
    configs: list[dict] = []
    for item in losses:
        if isinstance(item, Mapping):
            if "loss" not in item:
                raise ValueError(f"losses: a config dict needs a 'loss' key, got {dict(item)}")
            configs.append(dict(item))
            continue
        if not isinstance(item, str):
            raise TypeError(f"losses must hold loss names or config dicts, got {type(item).__name__}")
        make_objective(item)  # unknown names fail here, before any training
        grid = param_grid.get(item, {}) if per_loss else {k: v for k, v in param_grid.items() if _accepts(item, k)}
        configs.extend({"loss": item, **combo} for combo in _product(grid))
    return configs


def _split_config(config: Mapping) -> tuple[str, dict, dict]:
    """(loss name, loss kwargs, fit kwargs) of one config."""
    fit_kw = {k: v for k, v in config.items() if k in FIT_KEYS}
    loss_kw = {k: v for k, v in config.items() if k != "loss" and k not in FIT_KEYS}
    return config["loss"], loss_kw, fit_kw


def label(config: Mapping) -> str:
    """"unified(gamma=60, margin=0.2)": the configuration without its seed."""
    rest = ", ".join(f"{k}={config[k]}" for k in sorted(config) if k != "loss")
    return f"{config['loss']}({rest})" if rest else str(config["loss"])


def tensor_id(*tensors: Tensor) -> str:
    """A content hash of tensors (the default data id of a features grid)."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(str((tuple(t.shape), str(t.dtype))).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def cell_key(config: Mapping, seed: int, data_id: str, settings: Mapping) -> str:
    blob = json.dumps({"config": config, "seed": seed, "data": data_id, "settings": settings}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _row(config: Mapping, seed: int, key: str, history: list[dict]) -> dict:
    final = flatten_record(history[-1])
    final["train_loss"] = final.pop("loss")
    rsums = [r.get("rsum") for r in history if r.get("rsum") is not None]
    best = {"best_rsum": max(rsums), "best_epoch": 1 + rsums.index(max(rsums))} if rsums else {}
    return {"config": label(config), **config, "seed": seed, **final, **best, "key": key}


def _run_cell(config: Mapping, seed: int, data: Mapping, settings: dict):
    name, loss_kw, fit_kw = _split_config(config)
    kwargs = {**settings, **fit_kw, "seed": seed, "loss": name, "loss_kwargs": loss_kw}
    if "dataset" in data:
        return fit_end_to_end(data["dataset"], **kwargs)
    return fit(*data["train"], val=data.get("val"), **kwargs)


def grid(
    losses: Sequence[str | Mapping],
    param_grid: Mapping | None = None,
    seeds: Sequence[int] = (0,),
    *,
    train: tuple[Tensor, Tensor, Tensor] | None = None,
    val: tuple[Tensor, Tensor, Tensor] | None = None,
    dataset=None,
    out: str | os.PathLike | None = None,
    data_id: str | None = None,
    progress: bool = True,
    **settings,
) -> GridResult:
    """Train every configuration (``expand_configs(losses, param_grid)``) with every seed.

    Data: ``train`` / ``val`` feature triples for :func:`fit`, or ``dataset`` (a
    shapes DatasetDict) for :func:`fit_end_to_end`. ``settings`` are shared
    training arguments (epochs, batch_size, lr, ...); a config may override
    them. With ``out``, cells are cached in ``out/cells`` (see module docstring)
    and the tables saved as ``out/runs.csv``, ``out/runs.parquet`` and
    ``out/summary.csv``. ``data_id`` names the data in the cache key (default: a
    content hash). Example, the GOAL table: ``grid(goal_grid(), seeds=[0, 1, 2], ...)``.
    """
    if (train is None) == (dataset is None):
        raise ValueError("train or dataset must be given (exactly one): features for fit, or a DatasetDict")
    data = {"dataset": dataset} if dataset is not None else {"train": train, "val": val}
    data_id = data_id or _data_id(data)
    configs = expand_configs(losses, param_grid)
    seeds = [int(s) for s in seeds]
    hashed = {k: v for k, v in settings.items() if k not in _NOT_HASHED}
    cells = Path(out) / "cells" if out is not None else None
    rows = [_cell(c, s, data, data_id, settings, hashed, cells) for c, s in _progress(configs, seeds, progress)]
    runs = pd.DataFrame(rows)
    result = GridResult(runs, summarize(runs), None if out is None else str(out))
    if out is not None:
        _save_tables(result, Path(out))
    return result


def _progress(configs, seeds, progress):
    from tqdm.auto import tqdm

    return tqdm(list(itertools.product(configs, seeds)), desc="grid", disable=not progress)


def _data_id(data: Mapping) -> str:
    if "dataset" in data:
        return "shapes:" + "|".join(getattr(ds, "_fingerprint", "?") for ds in data["dataset"].values())
    parts = [t for triple in (data["train"], data.get("val")) if triple is not None for t in triple]
    return tensor_id(*[torch.as_tensor(t) for t in parts])


def _cell(config, seed, data, data_id, settings, hashed, cells: Path | None) -> dict:
    key = cell_key(config, seed, data_id, hashed)
    path = cells / f"{key}.json" if cells is not None else None
    if path is not None and path.exists():
        stored = json.loads(path.read_text())
        return _row(stored["config"], stored["seed"], key, stored["history"])
    run_settings = {"progress": False, **settings}
    history = _run_cell(config, seed, data, run_settings).history
    if path is not None:
        atomic_write_json(path, {"config": dict(config), "seed": seed, "data_id": data_id, "history": history})
    return _row(config, seed, key, history)


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of every summary metric, one row per configuration (input order kept)."""
    metrics = [m for m in (*SUMMARY_METRICS, "best_rsum", "train_loss") if m in runs.columns]
    if runs.empty:
        return pd.DataFrame()
    g = runs.groupby("config", sort=False)
    out = g[metrics].agg(["mean", "std"])
    out.columns = [f"{m}_{stat}" for m, stat in out.columns]
    out.insert(0, "n_seeds", g.size())
    out.insert(0, "loss", g["loss"].first())
    return out.reset_index()


def summary_table(summary: pd.DataFrame, metrics: Sequence[str] = ("rsum", "i2t_r1", "t2i_r1")) -> str:
    """Text table: configuration, seeds, and "mean ± std" of each metric."""
    if summary.empty:
        return "(no runs)"
    table = pd.DataFrame({"config": summary["config"], "seeds": summary["n_seeds"]})
    for m in metrics:
        if f"{m}_mean" in summary:
            std = summary[f"{m}_std"].fillna(0.0)
            table[m] = [f"{a:.2f} ± {b:.2f}" for a, b in zip(summary[f"{m}_mean"], std)]
    return table.to_string(index=False)


def _save_tables(result: GridResult, out: Path) -> None:
    from .checkpoint import atomic_write

    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "runs.csv", lambda f: f.write(result.runs.to_csv(index=False).encode()))
    atomic_write(out / "summary.csv", lambda f: f.write(result.summary.to_csv(index=False).encode()))
    try:
        import pyarrow  # noqa: F401  (datasets depends on it; guard anyway)
    except ImportError:
        return
    frame = result.runs.copy()
    for col in frame.columns:  # mixed-type config columns (e.g. None and floats) need one dtype in Parquet
        if frame[col].dtype == object:
            frame[col] = frame[col].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v))
    atomic_write(out / "runs.parquet", lambda f: frame.to_parquet(f, index=False))
