"""Which differences exceed the seed noise, and the prose built from them (the written reading of a showdown).

Uncertainty. Three seeds give a rough spread, not a significance test. Two configurations
are called *separated* on a metric when their mean ± std intervals do not overlap,
|mean_a - mean_b| > std_a + std_b (sample std, ddof=1, over seeds); otherwise the
difference is *within the seed noise*.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import registry
from .labels import GROUPS, METRIC_LABELS, _digits, check_metric, mean_std
from .summary import check_summary

def group(summary: pd.DataFrame, which: str) -> pd.DataFrame:
    """The rows of one of :data:`GROUPS`: all, the closed-form losses, or the GOAL cells."""
    if which not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, got {which!r}")
    is_goal = check_summary(summary)["loss"].map(registry.is_goal)
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
    goal_rank = rank[rank["loss"].map(registry.is_goal)]
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
