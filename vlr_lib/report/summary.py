"""Mean and std over seeds per configuration (the one summary), as text, and COCOS at the selected epoch."""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .. import registry
from .labels import COCOS_RULES, COCOS_STATS, SETUP_COLUMNS, SUMMARY_METRICS, hyperparameters, mean_std

def _default_metrics(runs: pd.DataFrame, prefix: str) -> list[str]:
    found = [m for m in SUMMARY_METRICS if f"{prefix}{m}" in runs.columns]
    if not found:
        raise ValueError(f"runs has no {prefix}<metric> columns ({', '.join(SUMMARY_METRICS)}); "
                         "was it made by vlr_lib.experiments.grid or the showdown?")
    return found


def _overrides(row: pd.Series, loss: str) -> dict:
    """The loss parameters a configuration sets (its non-empty parameter columns)."""
    return {p: row[p] for p in registry.parameters(loss) if p in row.index and not _missing(row[p])}


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def summarize(runs: pd.DataFrame, prefix: str = "", metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean and std (ddof=1; 0 with one seed) over seeds of every metric, one row per configuration.

    `prefix` picks the metrics: "" the grid's last-epoch validation metrics, "sel_" the
    showdown's test metrics at the epoch of best validation rsum, "test_" its test metrics at
    the last epoch. `metrics` (default: every :data:`SUMMARY_METRICS` the table has) are
    named without the prefix. Runs of other data or schedules (the :data:`SETUP_COLUMNS`)
    are never averaged together. Rows keep the order of first appearance.

    Columns: config, loss, name (``registry.label``), hyper (:func:`hyperparameters`),
    n_seeds, the setup columns when the table has them, ``<metric>_mean`` / ``_std``, and
    ``epoch_mean`` (mean selected epoch) when there is a ``<prefix>epoch`` column.
    """
    if not isinstance(runs, pd.DataFrame) or runs.empty:
        raise ValueError("runs is empty: there are no runs to summarize")
    metrics = list(metrics) if metrics is not None else _default_metrics(runs, prefix)
    missing = [f"{prefix}{m}" for m in metrics if f"{prefix}{m}" not in runs.columns]
    if missing:
        raise ValueError(f"runs lacks the columns {missing}; was it made by vlr_lib.experiments.grid or the showdown?")
    keys = ["config", *(c for c in SETUP_COLUMNS if c in runs.columns)]
    g = runs.groupby(keys, sort=False, dropna=False)
    first = g.head(1).set_index(keys)
    out = pd.DataFrame(index=first.index)
    out["loss"] = first["loss"]
    out["name"] = out["loss"].map(registry.label)
    out["hyper"] = [hyperparameters(loss, _overrides(row, loss)) for loss, (_, row) in
                    zip(first["loss"], first.iterrows())]
    out["n_seeds"] = g.size()
    for m in metrics:
        values = g[f"{prefix}{m}"]
        out[f"{m}_mean"] = values.mean()
        out[f"{m}_std"] = values.std(ddof=1).fillna(0.0)
    if f"{prefix}epoch" in runs.columns:
        out["epoch_mean"] = g[f"{prefix}epoch"].mean()
    return out.reset_index()


#: The columns every :func:`summarize` result has (besides ``<metric>_mean`` / ``_std``).
SUMMARY_COLUMNS = ("config", "loss", "name", "n_seeds")


def check_summary(summary: object, metrics: Sequence[str] = ()) -> pd.DataFrame:
    """A :func:`summarize` result: a non-empty DataFrame with its columns (and those of `metrics`)."""
    if not isinstance(summary, pd.DataFrame):
        raise TypeError(f"summary must be a pandas DataFrame (vlr_lib.report.summary.summarize), got {type(summary).__name__}")
    if summary.empty:
        raise ValueError("summary is empty: summarize a runs table with at least one run (vlr_lib.report.summary.summarize)")
    missing = [c for c in (*SUMMARY_COLUMNS, *(f"{m}_{s}" for m in metrics for s in ("mean", "std")))
               if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks the columns {missing}; make it with vlr_lib.report.summary.summarize")
    return summary


def summary_table(summary: pd.DataFrame, metrics: Sequence[str] = ("rsum", "i2t_r1", "t2i_r1")) -> str:
    """Text table of a :func:`summarize` result: configuration, seeds, "mean ± std" per metric.

    When configurations of several data sets or schedules share the table, a "setup" column
    numbers them so that equal labels are not mistaken for one configuration.
    """
    check_summary(summary)
    table = pd.DataFrame({"config": summary["config"], "seeds": summary["n_seeds"]})
    setups = [c for c in SETUP_COLUMNS if c in summary]
    if setups and summary.duplicated("config").any():
        table.insert(1, "setup", pd.factorize(pd.Series(list(zip(*(summary[c] for c in setups)))))[0] + 1)
    for m in metrics:
        if f"{m}_mean" in summary:
            table[m] = [mean_std(a, b, m) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_std"])]
    return table.to_string(index=False)





def cocos_summary(runs: pd.DataFrame, stat: str = "C_q", prefix: str = "sel_") -> pd.DataFrame:
    """COCOS of every rule and direction at the selected epoch, mean over seeds; rows configs, columns 'rule dir'.

    `stat`: ``C_q`` (contributing candidates per query, mean over queries with a
    gradient), ``C_0`` (queries without gradient), ``W_neg`` / ``W_pos`` (NT-Xent
    weights; NaN for the other rules). Rows are named by ``registry.label``.
    """
    if stat not in COCOS_STATS:
        raise ValueError(f"stat must be one of {COCOS_STATS}, got {stat!r}")
    cols = {f"{prefix}cocos_{r}_{d}_{stat}": f"{label} {d}" for r, label in COCOS_RULES.items()
            for d in ("i2t", "t2i")}
    missing = [c for c in cols if c not in runs.columns]
    if missing:
        raise ValueError(f"runs lacks the COCOS columns {missing[:2]}...")
    g = runs.groupby("config", sort=False)
    out = g[list(cols)].mean().rename(columns=cols)
    out.index = [registry.label(loss) for loss in g["loss"].first()]
    return out


def cocos_own_rule(runs: pd.DataFrame, prefix: str = "sel_") -> pd.DataFrame:
    """COCOS of the four losses Bleeker & de Rijke count, each under its own rule (their Tables 2-4).

    Rows: Triplet (rule "triplet"), Triplet-SH ("triplet_sh"), NT-Xent
    ("nt_xent"), SmoothAP ("smooth_ap") when trained; columns C^q, C^0 and, for
    NT-Xent, W^{qv-} and W^{qv+}, per direction, mean over seeds at the selected epoch.
    """
    rows = []
    for loss, rule in registry.cocos_rules().items():
        part = runs[runs["loss"] == loss]
        if part.empty:
            continue
        row = {"loss": registry.label(loss), "rule": COCOS_RULES[rule]}
        for stat, d in itertools.product(COCOS_STATS, ("i2t", "t2i")):
            col = f"{prefix}cocos_{rule}_{d}_{stat}"
            if col in part.columns:
                row[f"{stat} {d}"] = float(part[col].mean())
        rows.append(row)
    return pd.DataFrame(rows)
