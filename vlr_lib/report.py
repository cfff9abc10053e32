"""Results: tidy tables, mean ± std over seeds, the papers' table layouts, the written reading, Markdown.

Everything here is a pure function of a runs table -- one row per (configuration, seed), as
``vlr_lib.train.grid`` writes it (``GridResult.runs``, ``runs.csv``) and the showdown extends it
(``sel_*`` / ``test_*`` columns, ``vlr_lib.train.showdown``) -- or of per-epoch histories
(``FitResult.history``). The grid, the showdown, the command lines, notebooks 09-11 and the
figures of ``vlr_lib.viz.showdown`` / ``vlr_lib.viz.training`` all read their numbers here.

- :func:`summarize` -- mean and std over seeds per configuration (the one summary);
  :func:`summary_table` -- it as text, "mean ± std";
- :func:`table1` -- Bleeker & de Rijke's Table 1 layout (R@1/5/10 i2t, mAP@5, R@1/5/10 t2i,
  rsum) plus PR-AUC (Veit & Wilber, Table 1); :func:`goal_matrix`, :func:`goal_table` -- the
  3 x 5 GOAL grid in Xuan & Chen's Tables 3-5 layout (pair weights down, triplet weights across);
- :func:`separations`, :func:`ranking`, :func:`compare`, :func:`reading` -- which differences
  exceed the seed noise, and the prose built from them;
- :func:`cocos_summary`, :func:`cocos_own_rule` -- COCOS at the selected epoch;
- :func:`lesson_table`, :func:`lesson_part`, :func:`lesson_reading` -- the papers' orderings under each condition of
  the controlled experiments (``vlr_lib.train.lessons``, notebook 12);
- :func:`history_frame`, :func:`history_values`, :func:`sweep_values`, :func:`sweep_slice`,
  :func:`sweep_grid` -- histories and sweeps as tables;
- :func:`to_markdown`, :func:`markdown_block` -- Markdown for docs/results.md;
- :func:`fmt`, :func:`readout` -- numbers in labels and titles (``readout``: as a slider shows them).

Uncertainty. Three seeds give a rough spread, not a significance test. Two configurations
are called *separated* on a metric when their mean ± std intervals do not overlap,
|mean_a - mean_b| > std_a + std_b (sample std, ddof=1, over seeds); otherwise the
difference is *within the seed noise*.
"""
from __future__ import annotations

import inspect
import itertools
import json
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from . import goal, losses
from ._checks import check_finite, check_nonnegative
from .names import GOAL_PREFIX, WARMUP_PREFIX, loss_name, loss_parameters, parse_warmup_name
from .stats import VERDICTS, paired_interval, verdict

#: Metric key -> label. Recalls and rsum are percent; mAP@5 and PR-AUC fractions; similarities cosines.
METRIC_LABELS: dict[str, str] = {
    "i2t_r1": "i2t R@1",
    "i2t_r5": "i2t R@5",
    "i2t_r10": "i2t R@10",
    "map5": "i2t mAP@5",
    "t2i_r1": "t2i R@1",
    "t2i_r5": "t2i R@5",
    "t2i_r10": "t2i R@10",
    "rsum": "rsum",
    "pr_auc": "PR-AUC",
    "loss": "training loss",
    "grad_norm": "gradient norm (mean per epoch)",
    "pos_sim": "mean positive similarity",
    "hardneg_sim": "mean hardest-negative similarity",
    "sim_gap": "positive − hardest negative",
    "best_rsum": "best validation rsum",
    "train_loss": "final training loss",
}
#: Bleeker & de Rijke's Table 1 order (i2t block with mAP@5, t2i block, rsum), then PR-AUC.
TABLE1_COLUMNS: tuple[str, ...] = ("i2t_r1", "i2t_r5", "i2t_r10", "map5", "t2i_r1", "t2i_r5", "t2i_r10", "rsum",
                                   "pr_auc")
#: Metrics summarised per configuration (``vlr_lib.train.evaluate``), then the grid's derived ones.
SUMMARY_METRICS: tuple[str, ...] = (*TABLE1_COLUMNS, "pos_sim", "hardneg_sim", "best_rsum", "train_loss")
FRACTIONS = ("map5", "pr_auc")
GROUPS = ("all", "closed-form", "GOAL")
COCOS_RULES = {"triplet": "Triplet", "triplet_sh": "Triplet-SH", "nt_xent": "NT-Xent", "smooth_ap": "SmoothAP"}
COCOS_STATS = ("C_q", "C_0", "W_neg", "W_pos")
#: Columns that tell runs of different data or schedules apart (never averaged together).
SETUP_COLUMNS = ("data_id", "settings")
#: Columns of a grid's runs table that hold training settings (``vlr_lib.train.grid_search.FIT_KEYS``).
SETTING_COLUMNS = ("epochs", "batch_size", "lr", "lr_decay_epoch", "sampling", "probe_batch", "grad_clip",
                   "optimizer_at_switch", "head", "dim",
                   "text_encoder", "width", "word_dim", "hidden", "min_count")
#: Xuan & Chen's Table 1 names the hardest-negative triplet "Triplet"; ours is Triplet-SH.
_TABLE1_NAMES = {"Triplet": "Triplet-SH"}


# --------------------------------------------------------------------------- names and formats


def flatten_record(record: Mapping) -> dict:
    """{"cocos": {"i2t": {"C_q": 3}}} -> {"cocos_i2t_C_q": 3}; other keys unchanged (a history record as a row)."""
    out: dict = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            for sub, v in flatten_record(value).items():
                out[f"{key}_{sub}"] = v
        else:
            out[key] = value
    return out


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def check_metric(metric: str) -> str:
    """`metric` when it is a key of :data:`TABLE1_COLUMNS`, else a ValueError naming it."""
    if metric not in TABLE1_COLUMNS:
        raise ValueError(f"metric must be one of {TABLE1_COLUMNS}, got {metric!r}")
    return metric


def table1_name(triplet: str, pair: str) -> str:
    """The existing loss a GOAL cell reproduces (Xuan & Chen Table 1, in our names), or "New"."""
    known = goal.TABLE1.get((triplet, pair), "New")
    return _TABLE1_NAMES.get(known, known)


def _defaults(fn) -> dict:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty and k not in ("pos_mask", "reduction", "weights")}


def hyperparameters(loss: str, overrides: Mapping | None = None) -> str:
    """The parameters a configuration trains with, e.g. 'margin=0.2, gamma=60.0' (library defaults + `overrides`).

    For GOAL, only the parameters its two weights use (``goal.TRIPLET_PARAMS`` / ``PAIR_PARAMS``);
    for a loss schedule, those of its two phases.
    """
    if loss.startswith(WARMUP_PREFIX):
        first, _, then = parse_warmup_name(loss)
        parts = dict.fromkeys(", ".join(hyperparameters(p, overrides) for p in (first, then)).split(", "))
        return ", ".join(p for p in parts if p)
    if loss.startswith(GOAL_PREFIX):
        triplet, pair = goal.parse_goal_name(loss)
        d = _defaults(goal.goal_objective)
        values = {k: d[k] for k in dict.fromkeys([*goal.TRIPLET_PARAMS[triplet], *goal.PAIR_PARAMS[pair]])}
    else:
        values = _defaults(losses.LOSSES[loss])
    values.update({k: v for k, v in (overrides or {}).items() if k in values})
    return ", ".join(f"{k}={v}" for k, v in values.items() if v is not None)


def _digits(metric: str) -> int:
    """Decimals shown: 1 for percentages, 3 for fractions (our PR-AUCs differ in the third decimal)."""
    return 3 if metric in FRACTIONS else 1


def mean_std(mean: float, std: float, metric: str) -> str:
    """'71.3 ± 1.2' (percentages) or '0.712 ± 0.012' (fractions); a NaN or inf is an error, never printed."""
    check_finite("mean", mean)
    check_nonnegative("std", check_finite("std", std))
    digits = _digits(metric)
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def config_label(config: Mapping) -> str:
    """"unified(gamma=60, margin=0.2)": a configuration without its seed."""
    rest = ", ".join(f"{k}={config[k]}" for k in sorted(config) if k != "loss")
    return f"{config['loss']}({rest})" if rest else str(config["loss"])


# --------------------------------------------------------------------------- the summary


def _default_metrics(runs: pd.DataFrame, prefix: str) -> list[str]:
    found = [m for m in SUMMARY_METRICS if f"{prefix}{m}" in runs.columns]
    if not found:
        raise ValueError(f"runs has no {prefix}<metric> columns ({', '.join(SUMMARY_METRICS)}); "
                         "was it made by vlr_lib.train.grid or the showdown?")
    return found


def _overrides(row: pd.Series, loss: str) -> dict:
    """The loss parameters a configuration sets (its non-empty parameter columns)."""
    return {p: row[p] for p in loss_parameters(loss) if p in row.index and not _missing(row[p])}


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def summarize(runs: pd.DataFrame, prefix: str = "", metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean and std (ddof=1; 0 with one seed) over seeds of every metric, one row per configuration.

    `prefix` picks the metrics: "" the grid's last-epoch validation metrics, "sel_" the
    showdown's test metrics at the epoch of best validation rsum, "test_" its test metrics at
    the last epoch. `metrics` (default: every :data:`SUMMARY_METRICS` the table has) are
    named without the prefix. Runs of other data or schedules (the :data:`SETUP_COLUMNS`)
    are never averaged together. Rows keep the order of first appearance.

    Columns: config, loss, name (:func:`loss_name`), hyper (:func:`hyperparameters`),
    n_seeds, the setup columns when the table has them, ``<metric>_mean`` / ``_std``, and
    ``epoch_mean`` (mean selected epoch) when there is a ``<prefix>epoch`` column.
    """
    if not isinstance(runs, pd.DataFrame) or runs.empty:
        raise ValueError("runs is empty: there are no runs to summarize")
    metrics = list(metrics) if metrics is not None else _default_metrics(runs, prefix)
    missing = [f"{prefix}{m}" for m in metrics if f"{prefix}{m}" not in runs.columns]
    if missing:
        raise ValueError(f"runs lacks the columns {missing}; was it made by vlr_lib.train.grid or the showdown?")
    keys = ["config", *(c for c in SETUP_COLUMNS if c in runs.columns)]
    g = runs.groupby(keys, sort=False, dropna=False)
    first = g.head(1).set_index(keys)
    out = pd.DataFrame(index=first.index)
    out["loss"] = first["loss"]
    out["name"] = out["loss"].map(loss_name)
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
        raise TypeError(f"summary must be a pandas DataFrame (vlr_lib.report.summarize), got {type(summary).__name__}")
    if summary.empty:
        raise ValueError("summary is empty: summarize a runs table with at least one run (vlr_lib.report.summarize)")
    missing = [c for c in (*SUMMARY_COLUMNS, *(f"{m}_{s}" for m in metrics for s in ("mean", "std")))
               if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks the columns {missing}; make it with vlr_lib.report.summarize")
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


# --------------------------------------------------------------------------- the papers' layouts


def table1(summary: pd.DataFrame) -> pd.DataFrame:
    """Bleeker & de Rijke's Table 1 layout as strings "mean ± std", plus PR-AUC (Veit & Wilber).

    Columns: loss, hyper-param, then i2t R@1/5/10, i2t mAP@5, t2i R@1/5/10,
    rsum, PR-AUC (recalls percent; mAP@5 and PR-AUC fractions as in the papers,
    with three decimals where Bleeker & de Rijke print two: ours differ in the third).
    """
    out = pd.DataFrame({"loss": summary["name"], "hyper-param": summary["hyper"]})
    for m in TABLE1_COLUMNS:
        out[METRIC_LABELS[m]] = [mean_std(a, b, m) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_std"])]
    return out.reset_index(drop=True)


def goal_matrix(summary: pd.DataFrame, metric: str = "rsum") -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) of `metric` as [5 pair weights, 3 triplet weights] arrays (NaN where a cell is missing)."""
    metric = check_metric(metric)
    mean = np.full((len(goal.GOAL_PAIRS), len(goal.GOAL_TRIPLETS)), np.nan)
    std = mean.copy()
    by_loss = summary.drop_duplicates("loss").set_index("loss")
    for (i, p), (j, t) in itertools.product(enumerate(goal.GOAL_PAIRS), enumerate(goal.GOAL_TRIPLETS)):
        key = f"goal:{t},{p}"
        if key in by_loss.index:
            mean[i, j] = by_loss.at[key, f"{metric}_mean"]
            std[i, j] = by_loss.at[key, f"{metric}_std"]
    return mean, std


def goal_table(summary: pd.DataFrame, metric: str = "rsum") -> pd.DataFrame:
    """The GOAL grid as strings, rows P^pair, columns T^triplet (Xuan & Chen Tables 3-5)."""
    mean, std = goal_matrix(summary, metric)
    cells = [[mean_std(a, b, metric) if np.isfinite(a) else "" for a, b in zip(ra, rs)] for ra, rs in zip(mean, std)]
    return pd.DataFrame(cells, index=[f"P^{p}" for p in goal.GOAL_PAIRS],
                        columns=[f"T^{t}" for t in goal.GOAL_TRIPLETS])


# --------------------------------------------------------------------------- uncertainty


def group(summary: pd.DataFrame, which: str) -> pd.DataFrame:
    """The rows of one of :data:`GROUPS`: all, the closed-form losses, or the GOAL cells."""
    if which not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, got {which!r}")
    is_goal = check_summary(summary)["loss"].str.startswith(GOAL_PREFIX)
    out = summary.loc[{"all": slice(None), "closed-form": ~is_goal, "GOAL": is_goal}[which]]
    if out.empty:
        raise ValueError(f"group {which!r} has no configurations in the summary")
    return out


def _stats(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    metric = check_metric(metric)
    check_summary(summary, [metric])
    return summary[["config", "loss", "name"]].assign(mean=summary[f"{metric}_mean"], std=summary[f"{metric}_std"])


def separations(summary: pd.DataFrame, metric: str = "rsum") -> pd.DataFrame:
    """Every pair of configurations: difference of means, the noise std_a + std_b, and whether it is exceeded."""
    s = _stats(summary, metric).reset_index(drop=True)
    i, j = np.triu_indices(len(s), k=1)
    a, b = s.iloc[i].reset_index(drop=True), s.iloc[j].reset_index(drop=True)
    delta = a["mean"] - b["mean"]
    noise = a["std"] + b["std"]
    return pd.DataFrame({"a": a["loss"], "b": b["loss"], "mean_a": a["mean"], "mean_b": b["mean"],
                         "delta": delta, "noise": noise, "separated": delta.abs() > noise})


def ranking(summary: pd.DataFrame, metric: str = "rsum") -> pd.DataFrame:
    """Configurations best first, with 'tied_with_best': within the seed noise of the best one."""
    s = _stats(summary, metric).sort_values("mean", ascending=False, kind="stable").reset_index(drop=True)
    best = s.iloc[0]
    s["tied_with_best"] = (best["mean"] - s["mean"]) <= (best["std"] + s["std"])
    s["rank"] = np.arange(1, len(s) + 1)
    return s


def compare(summary: pd.DataFrame, a: str, b: str, metric: str = "rsum") -> dict:
    """One comparison (losses a vs b): means, stds, delta = a - b, noise, separated, and a sentence."""
    s = _stats(summary, metric).drop_duplicates("loss").set_index("loss")
    for name, key in (("a", a), ("b", b)):
        if key not in s.index:
            raise ValueError(f"{name} {key!r} is not a configuration of the summary")
    ma, sa, mb, sb = s.at[a, "mean"], s.at[a, "std"], s.at[b, "mean"], s.at[b, "std"]
    delta, noise = ma - mb, sa + sb
    separated = bool(abs(delta) > noise)
    digits = _digits(metric)
    shown = round(delta, digits) + 0.0  # no "-0.000"
    if separated:
        hi = s.at[a if delta > 0 else b, "name"]
        verdict = f"{hi} is ahead by {abs(delta):.{digits}f}, more than the seed noise {noise:.{digits}f}"
    else:
        verdict = (f"the difference {shown:+.{digits}f} is within the seed noise {noise:.{digits}f}: "
                   "no winner at this sample size")
    sentence = (f"{s.at[a, 'name']} {mean_std(ma, sa, metric)} vs {s.at[b, 'name']} {mean_std(mb, sb, metric)} "
                f"({METRIC_LABELS[metric]}): {verdict}.")
    return {"a": a, "b": b, "metric": metric, "mean_a": ma, "std_a": sa, "mean_b": mb, "std_b": sb,
            "delta": delta, "noise": noise, "separated": separated, "text": sentence}


#: The papers' claims the reading checks on this data: (a, b, metric, who said a > b).
PAPER_CLAIMS: tuple[tuple[str, str, str, str], ...] = (
    ("triplet_hardest", "triplet_all", "rsum", "Bleeker & de Rijke obs. 2 (and VSE++)"),
    ("triplet_hardest", "info_nce", "rsum", "Bleeker & de Rijke obs. 3"),
    ("triplet_hardest", "smooth_ap", "rsum", "Bleeker & de Rijke obs. 5"),
    ("unified", "triplet_hardest", "rsum", "Li et al. Tables 1, 7"),
    ("cross_example_softmax", "sampled_softmax", "pr_auc", "Veit & Wilber Table 1 (calibration)"),
    ("goal:cir,sig-ms", "goal:con,con", "rsum", "Xuan & Chen Tables 3-5"),
)


def reading(summary: pd.DataFrame, metric: str = "rsum") -> dict:
    """The written reading of a showdown, every sentence built from the numbers.

    Returns a dict with ``ranking`` (:func:`ranking` on `metric`), ``best``,
    ``tied`` (losses within the seed noise of the best), ``n_separated`` /
    ``n_pairs`` (over all pairs), ``claims`` (one :func:`compare` per entry of
    :data:`PAPER_CLAIMS` whose two losses were trained, with ``agrees``: the
    claimed direction holds beyond the noise), ``goal_best`` (the best GOAL cell),
    ``map_best`` (the best mAP@5) and ``text`` (Markdown).
    """
    rank = ranking(summary, metric)
    names = dict(zip(rank["loss"], rank["name"]))
    best = rank.iloc[0]
    tied = list(rank.loc[rank["tied_with_best"], "loss"])
    seps = separations(summary, metric)
    claims = []
    for a, b, m, who in PAPER_CLAIMS:
        if a in names and b in names:
            c = compare(summary, a, b, m)
            c.update(source=who, agrees=bool(c["separated"] and c["delta"] > 0))
            claims.append(c)
    goal_rank = rank[rank["loss"].str.startswith(GOAL_PREFIX)]
    goal_best = goal_rank.iloc[0]["loss"] if len(goal_rank) else None
    map_best = ranking(summary, "map5").iloc[0]["loss"]
    n_sep = int(seps["separated"].sum())
    lines = [
        f"**Best {METRIC_LABELS[metric]}: {best['name']}, {mean_std(best['mean'], best['std'], metric)}.** "
        + (f"Within its seed noise: {', '.join(names[t] for t in tied[1:])}; these "
           f"{len(tied)} are not told apart by {int(summary['n_seeds'].min())} seeds."
           if len(tied) > 1 else "No other configuration is within its seed noise."),
        f"Of the {len(seps)} pairs of configurations, {n_sep} differ by more than their summed seed stds on "
        f"{METRIC_LABELS[metric]}; the rest ({len(seps) - n_sep}) cannot be ordered here. With {len(seps)} "
        "comparisons at once, some pairs separate by chance alone: one separated pair is a lead to re-run "
        "with more seeds, not a finding; the papers' orderings below, each named before the runs, are single "
        "comparisons and read more safely.",
    ]
    if goal_best is not None:
        row = goal_rank.iloc[0]
        lines.append(f"Best GOAL combination: {row['name']}, {mean_std(row['mean'], row['std'], metric)} "
                     f"(rank {int(row['rank'])} of {len(rank)}).")
    same = map_best == best["loss"]
    lines.append(f"Best mAP@5: {names[map_best]}" + (" -- the same configuration, as Bleeker & de Rijke "
                 "observe (obs. 6)." if same else f", not the best {METRIC_LABELS[metric]} one (Bleeker & de Rijke "
                 "found them to coincide, obs. 6)."))
    for c in claims:
        status = "holds here" if c["agrees"] else ("is reversed here" if c["separated"] else "is not resolved here")
        lines.append(f"{c['source']}: '{names[c['a']]} > {names[c['b']]}' {status}. {c['text']}")
    return {"ranking": rank, "best": best["loss"], "tied": tied, "n_pairs": len(seps), "n_separated": n_sep,
            "claims": claims, "goal_best": goal_best, "map_best": map_best, "digits": _digits(metric),
            "text": "\n".join(f"- {line}" for line in lines)}


# --------------------------------------------------------------------------- COCOS


def cocos_summary(runs: pd.DataFrame, stat: str = "C_q", prefix: str = "sel_") -> pd.DataFrame:
    """COCOS of every rule and direction at the selected epoch, mean over seeds; rows configs, columns 'rule dir'.

    `stat`: ``C_q`` (contributing candidates per query, mean over queries with a
    gradient), ``C_0`` (queries without gradient), ``W_neg`` / ``W_pos`` (NT-Xent
    weights; NaN for the other rules). Rows are named by :func:`loss_name`.
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
    out.index = [loss_name(loss) for loss in g["loss"].first()]
    return out


def cocos_own_rule(runs: pd.DataFrame, prefix: str = "sel_") -> pd.DataFrame:
    """COCOS of the four losses Bleeker & de Rijke count, each under its own rule (their Tables 2-4).

    Rows: Triplet (rule "triplet"), Triplet-SH ("triplet_sh"), NT-Xent
    ("nt_xent"), SmoothAP ("smooth_ap") when trained; columns C^q, C^0 and, for
    NT-Xent, W^{qv-} and W^{qv+}, per direction, mean over seeds at the selected epoch.
    """
    from .analysis import COCOS_RULE_OF_LOSS

    rows = []
    for loss, rule in COCOS_RULE_OF_LOSS.items():
        part = runs[runs["loss"] == loss]
        if part.empty:
            continue
        row = {"loss": losses.loss_label(loss), "rule": COCOS_RULES[rule]}
        for stat, d in itertools.product(COCOS_STATS, ("i2t", "t2i")):
            col = f"{prefix}cocos_{rule}_{d}_{stat}"
            if col in part.columns:
                row[f"{stat} {d}"] = float(part[col].mean())
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- histories and sweeps


def history_frame(histories: Mapping[str, object]) -> pd.DataFrame:
    """Histories {run name: list of per-epoch dicts or a DataFrame} as one long table.

    Columns: ``run``, ``epoch`` and every metric (nested COCOS dicts flattened as in
    ``FitResult.frame``), plus ``sim_gap = pos_sim - hardneg_sim`` when both exist.
    Runs keep their order; rows are sorted by epoch within a run.
    """
    if not isinstance(histories, Mapping) or not histories:
        raise ValueError("histories must be a non-empty mapping {run name: history}")
    parts = []
    for name, hist in histories.items():
        frame = hist.copy() if isinstance(hist, pd.DataFrame) else pd.DataFrame([flatten_record(r) for r in hist])
        if frame.empty or "epoch" not in frame:
            raise ValueError(f"histories[{name!r}] must hold at least one epoch with an 'epoch' field")
        frame.insert(0, "run", str(name))
        parts.append(frame.sort_values("epoch", kind="stable"))
    out = pd.concat(parts, ignore_index=True)
    if {"pos_sim", "hardneg_sim"} <= set(out.columns):
        out["sim_gap"] = out["pos_sim"] - out["hardneg_sim"]
    return out


def history_values(history: pd.DataFrame, metric: str, relative: bool = False) -> np.ndarray:
    """One run's `metric` per epoch (its rows of a :func:`history_frame`) as floats, NaN where not recorded.

    `relative` divides by the first finite value: a training loss relative to its start, because the
    losses live on different scales (sums vs means, 1/gamma).
    """
    if metric not in history:
        return np.full(len(history), np.nan)
    y = pd.to_numeric(history[metric], errors="coerce").to_numpy(dtype=float)
    finite = y[np.isfinite(y)]
    return y / finite[0] if relative and finite.size and finite[0] != 0 else y


def loss_rows(runs: pd.DataFrame, loss: str) -> pd.DataFrame:
    """The rows of one loss in a runs table (a ValueError naming the losses it holds otherwise)."""
    if not isinstance(runs, pd.DataFrame) or "loss" not in runs:
        raise TypeError("runs must be a grid's runs table (GridResult.runs) with a 'loss' column")
    rows = runs[runs["loss"] == loss]
    if rows.empty:
        raise ValueError(f"loss {loss!r} has no runs; the table holds {sorted(runs['loss'].unique())}")
    return rows


def sweep_values(runs: pd.DataFrame, loss: str) -> dict[str, list]:
    """{parameter: sorted distinct values} of the parameters that vary over the runs of `loss`.

    Parameters are the loss's keyword arguments (:func:`loss_parameters`) and the training
    settings (:data:`SETTING_COLUMNS`) that are columns of `runs` and take two or more values.
    """
    rows = loss_rows(runs, loss)
    names = [p for p in loss_parameters(loss) if p not in ("reduction", "weights")]
    out = {}
    for p in names + [k for k in SETTING_COLUMNS if k not in names]:
        if p in rows:
            values = pd.unique(rows[p].dropna())
            if len(values) > 1:
                out[p] = sorted(values.tolist())
    return out


def sweep_losses(runs: pd.DataFrame) -> list[str]:
    """Losses of the table that have at least one swept parameter (in order of appearance)."""
    return [loss for loss in dict.fromkeys(runs["loss"]) if sweep_values(runs, loss)]


def is_close(column: pd.Series, value) -> np.ndarray:
    """Rows equal to `value` (floats compared with a relative tolerance: values went through JSON/CSV)."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        col = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
        return np.isclose(col, float(value), rtol=1e-9, atol=0.0)
    return (column == value).to_numpy()


def sweep_slice(runs: pd.DataFrame, loss: str, x: str, fixed: Mapping | None = None,
                metric: str = "rsum") -> pd.DataFrame:
    """Mean, std and count over seeds of `metric` per value of `x`, other swept parameters at `fixed`.

    Swept parameters missing from `fixed` are held at their first value. Returns a
    frame with columns x, mean, std (0 for one seed), n, sorted by x.
    """
    values = sweep_values(runs, loss)
    if x not in values:
        raise ValueError(f"x must be a swept parameter of {loss!r}, one of {list(values)}; got {x!r}")
    rows = loss_rows(runs, loss)
    if metric not in rows:
        raise ValueError(f"metric {metric!r} is not a column of runs")
    fixed = dict(fixed or {})
    unknown = sorted(set(fixed) - set(values))
    if unknown:
        raise ValueError(f"fixed has {unknown}, not swept parameters of {loss!r} ({list(values)})")
    mask = np.ones(len(rows), dtype=bool)
    for p, vals in values.items():
        if p != x:
            mask &= is_close(rows[p], fixed.get(p, vals[0]))
    sub = rows[mask]
    y = pd.to_numeric(sub[metric], errors="coerce")
    g = y.groupby(sub[x].to_numpy())
    out = pd.DataFrame({"mean": g.mean(), "std": g.std().fillna(0.0), "n": g.size()})
    return out.rename_axis(x).reset_index().sort_values(x, kind="stable", ignore_index=True)


def sweep_grid(runs: pd.DataFrame, loss: str, x: str, y: str, metric: str = "rsum") -> pd.DataFrame:
    """Mean `metric` over seeds on the grid of two swept parameters of `loss` (e.g. margin x gamma).

    Rows are the values of `y`, columns those of `x` (both sorted, :func:`sweep_values`); a
    combination without runs is NaN.
    """
    values = sweep_values(runs, loss)
    for name, p in (("x", x), ("y", y)):
        if p not in values:
            raise ValueError(f"{name} must be a swept parameter of {loss!r}, one of {list(values)}; got {p!r}")
    if x == y:
        raise ValueError("x and y must be different parameters")
    rows = loss_rows(runs, loss)
    if metric not in rows:
        raise ValueError(f"metric {metric!r} is not a column of runs")
    z = np.full((len(values[y]), len(values[x])), np.nan)
    for i, yv in enumerate(values[y]):
        for j, xv in enumerate(values[x]):
            cell = is_close(rows[x], xv) & is_close(rows[y], yv)
            if cell.any():
                z[i, j] = float(pd.to_numeric(rows[metric][cell], errors="coerce").mean())
    return pd.DataFrame(z, index=pd.Index(values[y], name=y), columns=pd.Index(values[x], name=x))


def fmt(value) -> str:
    """A parameter value for labels: numbers with %g, anything else as str."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return str(value)

#: How a log-scale slider shows its value (d3-format), and so how figure titles print it (:func:`readout`).
LOG_READOUT = ".3~g"


def readout(value: float, spec: str = LOG_READOUT) -> str:
    """`value` exactly as a slider with readout format `spec` shows it (d3-format ".Nf" or ".N~g"), for titles.

    ".N~g" is JavaScript's toPrecision(N) with trailing zeros trimmed: exponent notation only
    below 1e-6 or from 10^N up (60 -> "60", 22.387 -> "22.4", 1e4 -> "1e+4").
    """
    check_finite("value", value)
    match = re.fullmatch(r"\.(\d+)(~?)([fg])", spec)
    if match is None:
        raise ValueError(f"spec must be a d3 format like '.2f' or '.3~g', got {spec!r}")
    digits, trim, kind = int(match.group(1)), bool(match.group(2)), match.group(3)
    if kind == "f":
        return f"{value:.{digits}f}"
    mantissa, exponent = f"{value:.{max(digits, 1) - 1}e}".split("e")
    e = int(exponent)
    text = f"{mantissa}e{e:+d}" if (e < -6 or e >= digits) else f"{value:.{max(digits - 1 - e, 0)}f}"
    if trim:
        head, sep, tail = text.partition("e")
        head = head.rstrip("0").rstrip(".") if "." in head else head
        text = head + sep + tail
    return text


# --------------------------------------------------------------------------- the lessons (notebook 12)

#: The differences notebook 12 plots: (a, b, the sign the papers report for a - b, who reports it).
LESSON_DELTAS: tuple[tuple[str, str, int, str], ...] = (
    ("triplet_hardest", "triplet_all", +1, "VSE++ (Faghri et al.) and Bleeker & de Rijke obs. 2"),
    ("unified", "triplet_hardest", +1, "Li et al. Tables 1, 7"),
    ("info_nce", "triplet_hardest", -1, "Bleeker & de Rijke obs. 3"),
)
def lesson_table(runs: pd.DataFrame, metric: str = "rsum", prefix: str = "sel_") -> pd.DataFrame:
    """Each condition's three differences of :data:`LESSON_DELTAS`, paired by seed, with a 95% interval and verdict.

    `runs`: one row per (experiment, condition, role, seed) with ``order`` (position of the
    condition) and ``<prefix><metric>``. For a difference a - b of two roles the seeds are
    paired (same seed: same initialisation and batches): ``delta`` is the mean per-seed
    difference, ``ci_low`` / ``ci_high`` its paired t 95% interval (``vlr_lib.stats``), ``half``
    the interval's half-width, ``verdict`` "holds" when the interval lies on the papers' side
    of 0, "reverses" when on the other side, else "cannot tell" (always, with one seed).
    ``seed_min`` / ``seed_max`` are the smallest and largest per-seed difference. One row per
    (experiment, condition, comparison).
    """
    metric = check_metric(metric)
    col = f"{prefix}{metric}"
    needed = {"experiment", "condition", "order", "role", "seed", col}
    if not isinstance(runs, pd.DataFrame) or not needed <= set(runs.columns):
        raise ValueError(f"runs must be the lessons table (vlr_lib.train.lessons.run) with columns {sorted(needed)}")
    rows = []
    for (exp, cond), part in runs.groupby(["experiment", "condition"], sort=False):
        by_role = part.pivot_table(index="seed", columns="role", values=col, aggfunc="first")
        extra = {"overlap": float(part["overlap"].iloc[0])} if "overlap" in part else {}
        for a, b, sign, source in LESSON_DELTAS:
            if a not in by_role or b not in by_role:
                continue
            pair = by_role[[a, b]].dropna()
            delta, low, high = paired_interval(pair[a], pair[b])
            per_seed = pair[a] - pair[b]
            rows.append({"experiment": exp, "condition": cond, "order": int(part["order"].iloc[0]), **extra,
                         "comparison": f"{loss_name(a)} − {loss_name(b)}", "a": a, "b": b, "expected": sign,
                         "source": source, "mean_a": pair[a].mean(), "std_a": pair[a].std(ddof=1),
                         "mean_b": pair[b].mean(), "std_b": pair[b].std(ddof=1), "delta": delta, "ci_low": low,
                         "ci_high": high, "half": (high - low) / 2, "verdict": verdict(low, high, sign),
                         "seed_min": per_seed.min(), "seed_max": per_seed.max(), "n_seeds": len(pair),
                         "metric": metric})
    if not rows:
        raise ValueError("runs holds no condition with both roles of any comparison")
    return pd.DataFrame(rows).sort_values(["experiment", "order"], kind="stable", ignore_index=True,
                                          key=lambda c: c.map({e: i for i, e in enumerate(dict.fromkeys(
                                              runs["experiment"]))}) if c.name == "experiment" else c)


def _delta_text(row: pd.Series) -> str:
    digits = _digits(row["metric"])
    every = ""
    if row["n_seeds"] > 1 and (row["seed_min"] > 0 or row["seed_max"] < 0):
        every = f", {'ahead' if row['seed_min'] > 0 else 'behind'} on every seed"
    return f"{row['condition']} ({row['delta']:+.{digits}f} ± {row['half']:.{digits}f}{every})"


def lesson_reading(table: pd.DataFrame, labels: Mapping[str, str] | None = None) -> dict:
    """Where each paper's ordering holds, reverses, or cannot be told, per experiment, with the numbers.

    `table` is :func:`lesson_table`'s; `labels` names the experiments (e.g.
    ``vlr_lib.train.lessons.EXPERIMENTS``). Each difference is given as "condition (delta ±
    half-width of its paired 95% interval)", with "ahead/behind on every seed" when the per-seed
    differences share their sign. Returns {"verdicts": {(experiment, comparison):
    {verdict: [conditions]}}, "text": Markdown, one paragraph per experiment}.
    """
    labels = dict(labels or {})
    verdicts: dict = {}
    paragraphs = []
    for exp, part in table.groupby("experiment", sort=False):
        sentences = []
        for comparison, rows in part.groupby("comparison", sort=False):
            first = rows.iloc[0]
            claim = (f"'{loss_name(first['a'])} {'>' if first['expected'] > 0 else '<'} {loss_name(first['b'])}' "
                     f"({first['source']})")
            found = {v: rows[rows["verdict"] == v] for v in VERDICTS}
            verdicts[(exp, comparison)] = {v: list(found[v]["condition"]) for v in VERDICTS}
            cannot = f"{int(first['n_seeds'])} seeds cannot tell"
            said = [f"{what}: {', '.join(_delta_text(r) for _, r in found[v].iterrows())}"
                    for v, what in (("holds", "holds"), ("reverses", "reverses"), ("cannot tell", cannot))
                    if len(found[v])]
            sentences.append(f"{claim} {'; '.join(said)}.")
        metric = METRIC_LABELS[part["metric"].iloc[0]]
        paragraphs.append(f"**{labels.get(exp, exp)}** ({metric} differences paired by seed, mean ± half-width of "
                          "the 95% paired t interval): " + " ".join(sentences))
    return {"verdicts": verdicts, "text": "\n\n".join(paragraphs)}


def lesson_part(table: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The rows of one experiment of a :func:`lesson_table`, in the order of its conditions."""
    if not isinstance(table, pd.DataFrame) or not {"experiment", "order", "comparison", "delta", "half"} <= set(table):
        raise TypeError("table must be a lesson table (vlr_lib.report.lesson_table)")
    part = table[table["experiment"] == experiment]
    if part.empty:
        raise ValueError(f"experiment must be one of {list(dict.fromkeys(table['experiment']))}, got {experiment!r}")
    return part.sort_values("order", kind="stable")


def lesson_matrix(table: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """One experiment of a lesson table as text: rows conditions (with the scene overlap when measured), columns
    the comparisons, cells "delta ± noise (verdict)"."""
    part = lesson_part(table, experiment)
    digits = _digits(part["metric"].iloc[0])
    cells = part.assign(cell=[f"{d:+.{digits}f} ± {n:.{digits}f} ({v})" for d, n, v in
                              zip(part["delta"], part["half"], part["verdict"])])
    out = cells.pivot_table(index=["order", "condition"], columns="comparison", values="cell", aggfunc="first",
                            sort=False).reset_index(level="order", drop=True)
    out = out[list(dict.fromkeys(part["comparison"]))]
    if experiment == "difficulty" and "overlap" in part:
        out.insert(0, "scene overlap", [f"{o:.3f}" for o in part.drop_duplicates("condition")["overlap"]])
    out.columns.name = None
    return out


def role_matrix(runs: pd.DataFrame, experiment: str, metric: str = "rsum", prefix: str = "sel_") -> pd.DataFrame:
    """Mean ± std over seeds of each role's metric per condition of one experiment (rows conditions)."""
    part = runs[runs["experiment"] == experiment]
    col = f"{prefix}{check_metric(metric)}"
    g = part.groupby(["order", "condition", "role"], sort=False)[col]
    text = [mean_std(m, s, metric) for m, s in zip(g.mean(), g.std(ddof=1).fillna(0.0))]
    frame = pd.DataFrame({"cell": text}, index=g.mean().index).reset_index()
    out = frame.pivot_table(index=["order", "condition"], columns="role", values="cell", aggfunc="first")
    out = out.sort_index(level="order").reset_index(level="order", drop=True)
    roles = [r for r in ("triplet_all", "triplet_hardest", "unified", "info_nce") if r in out]
    out = out[roles].rename(columns=lambda r: losses.loss_label(r))
    out.columns.name = None
    return out


def lessons_markdown(runs: pd.DataFrame, meta: Mapping, labels: Mapping[str, str] | None = None) -> str:
    """The docs/results.md section of notebook 12's experiments: provenance, each experiment's differences and
    rsums, the generated reading. `runs` / `meta` come from ``vlr_lib.train.lessons.run``."""
    labels = dict(labels or {})
    spec = meta["spec"]
    table = lesson_table(runs)
    lines = [
        f"### Notebook 12: when do the papers' lessons hold? ({'fast' if spec['fast'] else 'full'} size), "
        f"{meta['date'][:10]}",
        "",
        f"- command: `{meta['command']}`",
        f"- conditions: every experiment trains Triplet, Triplet-SH, Unified and NT-Xent (library defaults) "
        f"through the showdown of its condition (`vlr_lib.train.showdown.spec_for('shapes', fast={spec['fast']}, "
        f"setting)`: same data sizes, schedule, selection on validation), difficulty {spec['difficulty']} unless "
        f"swept ({', '.join(f'{d:g}' for d in spec['difficulties'])}), warm-up epochs "
        f"{', '.join(map(str, spec['warmup_epochs']))}, settings {', '.join(spec['settings'])}; seeds "
        f"{', '.join(map(str, spec['seeds']))}",
        "- reported: test rsum at the epoch of best validation rsum; a difference a − b is the mean of the per-seed "
        "differences (same seed: same initialisation and batches) ± the half-width of its 95% paired t interval; "
        "'holds' / 'reverses' = the interval lies on / against the papers' side of 0, else 'cannot tell'",
        f"- hardware: {meta['hardware']}; wall time {meta['wall_seconds'] / 60:.1f} min ({meta['n_cells']} cells, "
        f"{meta['epochs_trained_now']} epochs trained in that call)",
        f"- converged: {last_epoch_share(runs):.0%} of the distinct runs select their last epoch",
        "",
    ]
    for exp in dict.fromkeys(table["experiment"]):
        lines += [f"**{labels.get(exp, exp)}**: differences of test rsum", "", to_markdown(lesson_matrix(table, exp),
                                                                                          index=True),
                  "", "test rsum of each loss, mean ± std over seeds:", "",
                  to_markdown(role_matrix(runs, exp), index=True), ""]
    lines += ["Reading (generated from the table by `vlr_lib.report.lesson_reading`):", "",
              lesson_reading(table, labels)["text"], ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- markdown


def to_markdown(df: pd.DataFrame, index: bool | None = None) -> str:
    """A GitHub-flavoured Markdown table (pandas' to_markdown needs tabulate, which we do not depend on)."""
    index = (not isinstance(df.index, pd.RangeIndex)) if index is None else index
    frame = df.reset_index() if index else df
    if index and frame.columns[0] == "index":
        frame = frame.rename(columns={"index": ""})
    cells = [[str(c) for c in frame.columns]] + [[str(v) for v in row] for row in frame.itertuples(index=False)]
    esc = [[c.replace("|", "\\|") for c in row] for row in cells]
    head, body = esc[0], esc[1:]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
                     + ["| " + " | ".join(row) + " |" for row in body])


def last_epoch_share(runs: pd.DataFrame) -> float:
    """The share of distinct runs (cells) whose best validation rsum is at their last epoch: still rising when they
    stopped. A table of such runs measures how fast each loss learns, not where it ends."""
    if not isinstance(runs, pd.DataFrame) or not {"best_epoch", "epoch"} <= set(runs):
        raise ValueError("runs must be a runs table with the columns best_epoch and epoch")
    cells = runs.drop_duplicates("key") if "key" in runs else runs
    return float((cells["best_epoch"] == cells["epoch"]).mean())


def training_line(spec: Mapping) -> str:
    """What a showdown trained, in words, from its stored spec (older specs without a setting were "features")."""
    setting = spec.get("setting", "features")
    if setting == "features":
        model = f"heads only on frozen features ({spec['head']}, {spec['dim']}-d)"
    elif setting == "vsepp":
        model = (f"VSE++ setting: a {spec['head']} image head on the frozen image features and a "
                 f"{spec.get('text_encoder', 'gru').upper()} text encoder from scratch (word embeddings "
                 f"{spec.get('word_dim') or 'default'}-d, hidden {spec.get('hidden') or 'default'}), {spec['dim']}-d")
    else:
        model = (f"end to end: TinyCNN (width {spec.get('width', 32)}) and a {spec.get('text_encoder', 'gru').upper()} "
                 f"text encoder from scratch, {spec['dim']}-d")
    decay = spec.get("lr_decay_epoch")
    after = "half the epochs" if decay is None else f"{decay} epochs"
    clip = f", the gradient's norm clipped at {spec['grad_clip']:g}" if spec.get("grad_clip") else ""
    return (f"{model}, {spec['epochs']} epochs, batch {spec['batch_size']}, Adam lr {spec['lr']} x0.1 after {after}"
            f"{clip}, sampling by {spec['sampling']}, seeds {', '.join(map(str, spec['seeds']))}; every loss at its "
            "library defaults unless its label names a parameter")


#: What :func:`markdown_block` reads of a showdown's metadata (``vlr_lib.train.showdown.run``), and of its spec.
META_KEYS = ("spec", "date", "command", "data", "n_test_images", "chance_rsum_test", "hardware", "wall_seconds",
             "n_runs", "epochs_trained_now")
META_SPEC_KEYS = ("data", "fast", "seeds")


def _check_meta(meta: object) -> Mapping:
    if not isinstance(meta, Mapping):
        raise TypeError(f"meta must be a showdown's metadata (a dict), got {type(meta).__name__}")
    missing = [k for k in META_KEYS if k not in meta]
    if not missing and isinstance(meta["spec"], Mapping):
        missing = [f"spec.{k}" for k in META_SPEC_KEYS if k not in meta["spec"]]
    elif not missing:
        missing = ["spec (a dict)"]
    if missing:
        raise ValueError(f"meta lacks {', '.join(missing)}: pass the metadata of vlr_lib.train.showdown.run")
    return meta


def markdown_block(runs: pd.DataFrame, meta: Mapping) -> str:
    """The docs/results.md section of one showdown: provenance, the Table 1 layout, the GOAL grids, the reading.

    `runs` and `meta` are a finished showdown's table and metadata (``vlr_lib.train.showdown.run``).
    """
    summary = summarize(runs, prefix="sel_")
    spec = _check_meta(meta)["spec"]
    lines = [
        f"### {spec['data']}, setting {spec.get('setting', 'features')} ({'fast' if spec['fast'] else 'full'} size), "
        f"{meta['date'][:10]}",
        "",
        f"- command: `{meta['command']}`",
        f"- data: {meta['data']}",
        f"- training: {training_line(spec)}",
        f"- reported: test split ({meta['n_test_images']} images) at the epoch with the best validation rsum; "
        f"mean ± std over {len(spec['seeds'])} seeds; chance rsum {meta['chance_rsum_test']:.1f}",
        f"- hardware: {meta['hardware']}; wall time {meta['wall_seconds'] / 60:.1f} min "
        f"({meta['n_runs']} runs, {meta['epochs_trained_now']} epochs trained in that call)",
        f"- converged: {last_epoch_share(runs):.0%} of the runs select their last epoch",
        "",
        to_markdown(table1(summary)),
        "",
    ]
    for metric in ("i2t_r1", "t2i_r1", "rsum"):
        lines += [f"GOAL grid, {METRIC_LABELS[metric]} (Xuan & Chen Tables 3-5 layout: pair weights down, "
                  "triplet weights across), mean ± std:", "", to_markdown(goal_table(summary, metric)), ""]
    lines += ["Reading (generated from the table by `vlr_lib.report.reading`; 'separated' = the mean ± std "
              "intervals do not overlap):", "", reading(summary)["text"], ""]
    return "\n".join(lines)


def settings_json(settings: Mapping) -> str:
    """The canonical text of a grid's training settings (the ``settings`` column of its runs table)."""
    return json.dumps(dict(settings), sort_keys=True)
