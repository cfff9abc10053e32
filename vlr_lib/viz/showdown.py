"""Tables, figures and the written reading of notebook 10: the loss showdown.

Input is the tidy table of a showdown (one row per configuration x seed, the
columns of ``vlr_lib.train.grid`` plus the callback's ``sel_*`` / ``test_*``
metrics, see ``data_scripts/run_showdown.py``). Everything here is a pure
function of that table:

- :func:`summarize` -- mean and std over seeds per configuration;
- :func:`table1` -- Bleeker & de Rijke's Table 1 layout (R@1/5/10 i2t, mAP@5,
  R@1/5/10 t2i, rsum) plus PR-AUC (Veit & Wilber, Table 1), "mean ± std";
- :func:`goal_table`, :func:`goal_heatmaps` -- the 3 x 5 GOAL grid in Xuan &
  Chen's Tables 3-5 layout (pair weights as rows, triplet weights as columns);
- :func:`metric_errorbars` -- every configuration's mean ± std on one metric;
- :func:`cocos_summary`, :func:`cocos_heatmap` -- COCOS at the selected epoch;
- :func:`separations`, :func:`ranking`, :func:`reading` -- which differences
  exceed the seed noise, and the prose built from them.

Uncertainty. Three seeds give a rough spread, not a significance test. Two
configurations are called *separated* on a metric when their mean ± std
intervals do not overlap, |mean_a - mean_b| > std_a + std_b (sample std,
ddof=1, over seeds); otherwise the difference is *within the seed noise*.
"""
from __future__ import annotations

import inspect
import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..goal import GOAL_PAIRS, GOAL_TRIPLETS, TABLE1
from ._style import NEUTRAL, PALETTE, POSITIVE, SEQUENTIAL, layout

__all__ = [
    "METRICS",
    "TABLE1_COLUMNS",
    "display_name",
    "hyperparameters",
    "summarize",
    "table1",
    "goal_matrix",
    "goal_table",
    "goal_heatmaps",
    "separations",
    "ranking",
    "metric_errorbars",
    "cocos_summary",
    "cocos_own_rule",
    "cocos_heatmap",
    "compare",
    "reading",
    "to_markdown",
]

#: Metric key -> label. Recalls and rsum are percent; mAP@5 and PR-AUC are fractions.
METRICS: dict[str, str] = {
    "i2t_r1": "i2t R@1",
    "i2t_r5": "i2t R@5",
    "i2t_r10": "i2t R@10",
    "map5": "i2t mAP@5",
    "t2i_r1": "t2i R@1",
    "t2i_r5": "t2i R@5",
    "t2i_r10": "t2i R@10",
    "rsum": "rsum",
    "pr_auc": "PR-AUC",
}
#: Bleeker & de Rijke's Table 1 order (i2t block with mAP@5, t2i block, rsum), then PR-AUC.
TABLE1_COLUMNS: tuple[str, ...] = tuple(METRICS)
FRACTIONS = ("map5", "pr_auc")
GROUPS = ("all", "closed-form", "GOAL")
COCOS_RULES = {"triplet": "Triplet", "triplet_sh": "Triplet-SH", "nt_xent": "NT-Xent", "smooth_ap": "SmoothAP"}
COCOS_STATS = ("C_q", "C_0", "W_neg", "W_pos")

_NAMES = {
    "triplet_all": "Triplet (all negatives)",
    "triplet_hardest": "Triplet-SH (hardest negative)",
    "info_nce": "NT-Xent / InfoNCE",
    "unified": "Unified (Li et al.)",
    "sampled_softmax": "Sampled softmax",
    "cross_example_softmax": "Cross-example softmax",
    "smooth_ap": "SmoothAP",
}
#: Xuan & Chen's "Triplet" (Table 1) is the VSE++ triplet on the hardest negative.
_TABLE1_LABELS = {"Triplet": "Triplet-SH (VSE++)"}


# --------------------------------------------------------------------------- names


def _goal_parts(loss: str) -> tuple[str, str] | None:
    if not isinstance(loss, str) or not loss.startswith("goal:"):
        return None
    triplet, _, pair = loss[len("goal:"):].partition(",")
    return triplet, pair


def display_name(loss: str) -> str:
    """'Triplet-SH (hardest negative)', or 'GOAL (cir, sig-ms)' with Table 1's loss when it is one."""
    parts = _goal_parts(loss)
    if parts is None:
        return _NAMES.get(loss, str(loss))
    known = _table1_label(parts)
    return f"GOAL ({parts[0]}, {parts[1]})" + ("" if known == "New" else f" = {known}")


def _table1_label(parts: tuple[str, str]) -> str:
    known = TABLE1.get(parts, "New")
    return _TABLE1_LABELS.get(known, known)


def _defaults(fn) -> dict:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty and k not in ("pos_mask", "reduction", "weights")}


def hyperparameters(loss: str) -> str:
    """The library defaults a configuration trains with, e.g. 'margin=0.2, gamma=60.0'."""
    from .. import goal, losses

    parts = _goal_parts(loss)
    if parts is None:
        values = _defaults(losses.LOSSES[loss])
    else:
        d = _defaults(goal.goal_objective)
        keys = [*goal.TRIPLET_PARAMS.get(parts[0], ()), *goal.PAIR_PARAMS.get(parts[1], ())]
        values = {k: d[k] for k in dict.fromkeys(keys)}
    return ", ".join(f"{k}={v}" for k, v in values.items() if v is not None)


# --------------------------------------------------------------------------- tables


def summarize(runs: pd.DataFrame, prefix: str = "sel_", metrics: Sequence[str] = TABLE1_COLUMNS) -> pd.DataFrame:
    """Mean and std (ddof=1) over seeds of ``<prefix><metric>``, one row per configuration, input order.

    ``prefix="sel_"``: test metrics at the epoch with the best validation rsum;
    ``"test_"``: at the last epoch. Columns: config, loss, name, hyper, n_seeds,
    ``<metric>_mean`` / ``_std`` (std 0 with one seed) and, for "sel_", epoch_mean.
    """
    if runs.empty:
        raise ValueError("runs is empty: no showdown rows to summarize")
    cols = [f"{prefix}{m}" for m in metrics]
    missing = [c for c in cols if c not in runs.columns]
    if missing:
        raise ValueError(f"runs lacks the columns {missing}; was it made by data_scripts/run_showdown.py?")
    g = runs.groupby("config", sort=False)
    out = pd.DataFrame({"config": list(g.groups)}).set_index("config")
    out["loss"] = g["loss"].first()
    out["name"] = out["loss"].map(display_name)
    out["hyper"] = out["loss"].map(hyperparameters)
    out["n_seeds"] = g.size()
    for m, c in zip(metrics, cols):
        out[f"{m}_mean"] = g[c].mean()
        out[f"{m}_std"] = g[c].std(ddof=1).fillna(0.0)
    if f"{prefix}epoch" in runs.columns:
        out["epoch_mean"] = g[f"{prefix}epoch"].mean()
    return out.reset_index()


def _fmt(mean: float, std: float, metric: str) -> str:
    digits = _digits(metric)
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def _digits(metric: str) -> int:
    """Decimals shown: 1 for percentages, 3 for fractions (our PR-AUCs differ in the third decimal)."""
    return 3 if metric in FRACTIONS else 1


def table1(summary: pd.DataFrame) -> pd.DataFrame:
    """Bleeker & de Rijke's Table 1 layout as strings "mean ± std", plus PR-AUC (Veit & Wilber).

    Columns: loss, hyper-param, then i2t R@1/5/10, i2t mAP@5, t2i R@1/5/10,
    rsum, PR-AUC (recalls percent; mAP@5 and PR-AUC fractions as in the papers,
    with three decimals where Bleeker & de Rijke print two: ours differ in the third).
    """
    out = pd.DataFrame({"loss": summary["name"], "hyper-param": summary["hyper"]})
    for m in TABLE1_COLUMNS:
        out[METRICS[m]] = [_fmt(a, b, m) for a, b in zip(summary[f"{m}_mean"], summary[f"{m}_std"])]
    return out.reset_index(drop=True)


def _metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {tuple(METRICS)}, got {metric!r}")
    return metric


def goal_matrix(summary: pd.DataFrame, metric: str = "rsum") -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) of `metric` as [5 pair weights, 3 triplet weights] arrays (NaN where a cell is missing)."""
    metric = _metric(metric)
    mean = np.full((len(GOAL_PAIRS), len(GOAL_TRIPLETS)), np.nan)
    std = mean.copy()
    by_loss = summary.set_index("loss")
    for (i, p), (j, t) in itertools.product(enumerate(GOAL_PAIRS), enumerate(GOAL_TRIPLETS)):
        key = f"goal:{t},{p}"
        if key in by_loss.index:
            mean[i, j] = by_loss.at[key, f"{metric}_mean"]
            std[i, j] = by_loss.at[key, f"{metric}_std"]
    return mean, std


def goal_table(summary: pd.DataFrame, metric: str = "rsum") -> pd.DataFrame:
    """The GOAL grid as strings, rows P^pair, columns T^triplet (Xuan & Chen Tables 3-5)."""
    mean, std = goal_matrix(summary, metric)
    cells = [[_fmt(a, b, metric) if np.isfinite(a) else "" for a, b in zip(ra, rs)] for ra, rs in zip(mean, std)]
    return pd.DataFrame(cells, index=[f"P^{p}" for p in GOAL_PAIRS], columns=[f"T^{t}" for t in GOAL_TRIPLETS])


# --------------------------------------------------------------------------- uncertainty


def _stats(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    metric = _metric(metric)
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
    s = _stats(summary, metric).set_index("loss")
    for name, key in (("a", a), ("b", b)):
        if key not in s.index:
            raise ValueError(f"{name} {key!r} is not a configuration of the summary")
    ma, sa, mb, sb = s.at[a, "mean"], s.at[a, "std"], s.at[b, "mean"], s.at[b, "std"]
    delta, noise = ma - mb, sa + sb
    separated = bool(abs(delta) > noise)
    shown = round(delta, _digits(metric)) + 0.0  # no "-0.000"
    fa, fb = _fmt(ma, sa, metric), _fmt(mb, sb, metric)
    digits = _digits(metric)
    if separated:
        hi, lo = (a, b) if delta > 0 else (b, a)
        verdict = (f"{display_name(hi)} is ahead by {abs(delta):.{digits}f}, more than the seed noise "
                   f"{noise:.{digits}f}")
    else:
        verdict = (f"the difference {shown:+.{digits}f} is within the seed noise {noise:.{digits}f}: "
                   "no winner at this sample size")
    sentence = f"{display_name(a)} {fa} vs {display_name(b)} {fb} ({METRICS[metric]}): {verdict}."
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
    best = rank.iloc[0]
    tied = list(rank.loc[rank["tied_with_best"], "loss"])
    seps = separations(summary, metric)
    trained = set(summary["loss"])
    claims = []
    for a, b, m, who in PAPER_CLAIMS:
        if a in trained and b in trained:
            c = compare(summary, a, b, m)
            c.update(source=who, agrees=bool(c["separated"] and c["delta"] > 0))
            claims.append(c)
    goal_rank = rank[rank["loss"].str.startswith("goal:")]
    goal_best = goal_rank.iloc[0]["loss"] if len(goal_rank) else None
    map_best = ranking(summary, "map5").iloc[0]["loss"]
    digits = _digits(metric)
    lines = [
        f"**Best {METRICS[metric]}: {best['name']}, {_fmt(best['mean'], best['std'], metric)}.** "
        + (f"Within its seed noise: {', '.join(display_name(t) for t in tied[1:])}; these "
           f"{len(tied)} are not told apart by {int(summary['n_seeds'].min())} seeds."
           if len(tied) > 1 else "No other configuration is within its seed noise."),
        f"Of the {len(seps)} pairs of configurations, {int(seps['separated'].sum())} differ by more than "
        f"their summed seed stds on {METRICS[metric]}; the rest "
        f"({len(seps) - int(seps['separated'].sum())}) cannot be ordered here.",
    ]
    if goal_best is not None:
        row = goal_rank.iloc[0]
        lines.append(f"Best GOAL combination: {display_name(goal_best)}, "
                     f"{_fmt(row['mean'], row['std'], metric)} (rank {int(row['rank'])} of {len(rank)}).")
    same = map_best == best["loss"]
    lines.append(f"Best mAP@5: {display_name(map_best)}" + (" -- the same configuration, as Bleeker & de Rijke "
                 "observe (obs. 6)." if same else f", not the best {METRICS[metric]} one (Bleeker & de Rijke "
                 "found them to coincide, obs. 6)."))
    for c in claims:
        status = "holds here" if c["agrees"] else ("is reversed here" if c["separated"] else "is not resolved here")
        lines.append(f"{c['source']}: '{display_name(c['a'])} > {display_name(c['b'])}' {status}. {c['text']}")
    text = "\n".join(f"- {line}" for line in lines)
    return {"ranking": rank, "best": best["loss"], "tied": tied, "n_pairs": len(seps),
            "n_separated": int(seps["separated"].sum()), "claims": claims, "goal_best": goal_best,
            "map_best": map_best, "digits": digits, "text": text}


# --------------------------------------------------------------------------- figures


def _group(summary: pd.DataFrame, group: str) -> pd.DataFrame:
    if group not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, got {group!r}")
    is_goal = summary["loss"].str.startswith("goal:")
    keep = {"all": slice(None), "closed-form": ~is_goal, "GOAL": is_goal}[group]
    out = summary.loc[keep]
    if out.empty:
        raise ValueError(f"group {group!r} has no configurations in the summary")
    return out


def metric_errorbars(summary: pd.DataFrame, metric: str = "rsum", group: str = "all",
                     chance: float | None = None) -> go.Figure:
    """Mean ± std over seeds per configuration, best at the top; colour = relation to the best.

    Green: the best; blue: within its seed noise (intervals overlap); grey:
    separated from it. The shaded band is the best's mean ± std; `chance` draws
    the chance level (rsum only makes sense there).
    """
    rank = ranking(_group(summary, group), metric)
    kinds = np.where(rank["rank"] == 1, "best", np.where(rank["tied_with_best"], "tied", "separated"))
    colours = {"best": POSITIVE, "tied": PALETTE[0], "separated": NEUTRAL}
    labels = {"best": "best", "tied": "within the best's seed noise", "separated": "separated from the best"}
    fig = go.Figure()
    for kind in ("best", "tied", "separated"):
        part = rank[kinds == kind]
        fig.add_trace(go.Scatter(
            x=part["mean"], y=part["name"], mode="markers", name=labels[kind],
            marker=dict(color=colours[kind], size=9),
            error_x=dict(type="data", array=part["std"], visible=True, color=colours[kind]),
            customdata=np.stack([part["std"], part["rank"]], axis=1) if len(part) else None,
            hovertemplate="%{y}<br>%{x:.3f} ± %{customdata[0]:.3f} (rank %{customdata[1]})<extra></extra>",
        ))
    best = rank.iloc[0]
    fig.add_vrect(x0=best["mean"] - best["std"], x1=best["mean"] + best["std"], fillcolor=POSITIVE, opacity=0.12,
                  line_width=0)
    if chance is not None:
        fig.add_vline(x=float(chance), line_dash="dot", line_color=NEUTRAL,
                      annotation_text=f"chance {chance:.1f}", annotation_position="bottom right")
    lo = float((rank["mean"] - rank["std"]).min())
    hi = float((rank["mean"] + rank["std"]).max())
    if chance is not None:
        lo, hi = min(lo, float(chance)), max(hi, float(chance))
    pad = 0.05 * max(hi - lo, 1e-6)
    fig.update_layout(**layout(f"{METRICS[metric]} per loss, mean ± std over seeds ({group})", METRICS[metric]),
                      height=max(300, 28 * len(rank) + 120), legend=dict(orientation="h", y=-0.15))
    fig.update_xaxes(range=[lo - pad, hi + pad])
    fig.update_yaxes(categoryorder="array", categoryarray=list(rank["name"])[::-1])
    return fig


def goal_heatmaps(summary: pd.DataFrame, metric: str = "r1", color: str = "mean") -> go.Figure:
    """The GOAL grid as annotated heatmaps, Xuan & Chen Tables 3-5 layout (rows P, columns T).

    ``metric="r1"``: two panels, i2t R@1 and t2i R@1 (the papers' tables);
    any key of :data:`METRICS`: one panel. Cells show "mean ± std" and the loss of
    Table 1 where the combination is one. ``color="mean"`` colours by the mean;
    ``"delta"`` by the difference to (T^con, P^con), the triplet baseline of the
    paper (Table 2), on a diverging scale. A green frame (a layout shape named
    "best <metric>") marks each panel's best cell.
    """
    if color not in ("mean", "delta"):
        raise ValueError(f"color must be 'mean' or 'delta', got {color!r}")
    panels = ["i2t_r1", "t2i_r1"] if metric == "r1" else [_metric(metric)]
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[METRICS[m] for m in panels],
                        horizontal_spacing=0.14)
    xs, ys = [f"T<sup>{t}</sup>" for t in GOAL_TRIPLETS], [f"P<sup>{p}</sup>" for p in GOAL_PAIRS]
    names = [[_table1_label((t, p)) for t in GOAL_TRIPLETS] for p in GOAL_PAIRS]
    for k, m in enumerate(panels):
        mean, std = goal_matrix(summary, m)
        z = mean - mean[0, 0] if color == "delta" else mean
        text = [[(f"{_fmt(a, b, m)}" + ("" if n == "New" else f"<br>{n}")) if np.isfinite(a) else ""
                 for a, b, n in zip(ra, rs, rn)] for ra, rs, rn in zip(mean, std, names)]
        span = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
        extra = dict(colorscale="RdBu", zmid=0.0, zmin=-span, zmax=span) if color == "delta" else \
            dict(colorscale=SEQUENTIAL)
        fig.add_trace(go.Heatmap(z=z, x=xs, y=ys, text=text, texttemplate="%{text}", name=METRICS[m],
                                 colorbar=dict(x=fig.layout[f"xaxis{k + 1}"].domain[1] + 0.01, len=0.9,
                                               title="Δ" if color == "delta" else ""),
                                 hovertemplate="%{y} · %{x}<br>%{text}<extra></extra>", **extra), 1, k + 1)
        if np.isfinite(mean).any():  # frame the best cell (category axes: cell j spans j - 0.5 .. j + 0.5)
            i, j = np.unravel_index(np.nanargmax(mean), mean.shape)
            fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5, row=1, col=k + 1,
                          line=dict(color=POSITIVE, width=4), name=f"best {m}")
        fig.update_yaxes(autorange="reversed", row=1, col=k + 1)
    title = "GOAL grid: " + ("Δ vs (T<sup>con</sup>, P<sup>con</sup>), " if color == "delta" else "") + \
        "mean ± std over seeds"
    fig.update_layout(**layout(title), height=430, width=None)
    return fig


def cocos_summary(runs: pd.DataFrame, stat: str = "C_q", prefix: str = "sel_") -> pd.DataFrame:
    """COCOS of every rule and direction at the selected epoch, mean over seeds; rows configs, columns 'rule dir'.

    `stat`: ``C_q`` (contributing candidates per query, mean over queries with a
    gradient), ``C_0`` (queries without gradient), ``W_neg`` / ``W_pos`` (NT-Xent
    weights; NaN for the other rules). Rows are named by :func:`display_name`.
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
    out.index = [display_name(loss) for loss in g["loss"].first()]
    return out


def cocos_own_rule(runs: pd.DataFrame, prefix: str = "sel_") -> pd.DataFrame:
    """COCOS of the four losses Bleeker & de Rijke count, each under its own rule (their Tables 2-4).

    Rows: Triplet (rule "triplet"), Triplet-SH ("triplet_sh"), NT-Xent
    ("nt_xent"), SmoothAP ("smooth_ap") when trained; columns C^q, C^0 and, for
    NT-Xent, W^{qv-} and W^{qv+}, per direction, mean over seeds at the selected epoch.
    """
    from ..analysis import COCOS_RULE_OF_LOSS as LOSS_TO_RULE

    rows = []
    for loss, rule in LOSS_TO_RULE.items():
        part = runs[runs["loss"] == loss]
        if part.empty:
            continue
        row = {"loss": display_name(loss), "rule": COCOS_RULES[rule]}
        for stat in COCOS_STATS:
            for d in ("i2t", "t2i"):
                col = f"{prefix}cocos_{rule}_{d}_{stat}"
                if col in part.columns:
                    row[f"{stat} {d}"] = float(part[col].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def cocos_heatmap(table: pd.DataFrame, stat: str = "C_q") -> go.Figure:
    """A :func:`cocos_summary` table as a heatmap; colour normalised per column, the cells show the values."""
    values = table.to_numpy(dtype=float)
    finite = np.isfinite(values)
    peak = np.where(finite, np.abs(values), 0.0).max(axis=0, keepdims=True)  # columns without values: 0
    z = np.where(finite, values / np.where(peak > 0, peak, 1.0), np.nan)
    text = [[f"{v:.2f}" if np.isfinite(v) else "" for v in row] for row in values]
    fig = go.Figure(go.Heatmap(z=z, x=list(table.columns), y=list(table.index), text=text, texttemplate="%{text}",
                               colorscale=SEQUENTIAL, zmin=0, zmax=1, colorbar=dict(title="/ column max"),
                               hovertemplate="%{y}<br>%{x}: %{text}<extra></extra>"))
    fig.update_layout(**layout(f"COCOS {stat} at the selected epoch (probe batch, mean over seeds)",
                               "rule and direction"), height=max(320, 26 * len(table) + 140))
    fig.update_yaxes(autorange="reversed")
    return fig


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
