"""Which differences the seeds can tell, and the prose built from them (the written reading of a showdown).

Uncertainty: the workbook's one rule (``vlr_lib.stats``). Two configurations trained with the same
seed share their initialisation and batches, so a difference a - b is read per seed: its mean,
its paired t 95% interval, and a verdict from the Holm-corrected test over a declared family:

- every pair of configurations (:func:`separations`, the ranking): "ahead" / "behind" /
  "not told apart" -- the seeds cannot order the two, which is no finding of equality;
- the papers' orderings (:data:`PAPER_CLAIMS`) and Xuan & Chen's pair weights
  (:data:`GOAL_PAIR_CLAIMS`), each named before the runs: "holds" / "reverses" / "cannot tell".

The uncorrected interval is shown beside every verdict; a verdict is never read from it.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .. import registry, stats
from ..goal import GOAL_PAIRS, GOAL_TRIPLETS
from .labels import GROUPS, METRIC_LABELS, _digits, check_metric, mean_std
from .summary import check_summary, summarize

#: A claim: (a, b, metric, the sign the source reports for a - b, who reports it).
Claim = tuple[str, str, str, int, str]

#: The papers' orderings the reading checks on this data; one family, Holm-corrected together.
PAPER_CLAIMS: tuple[Claim, ...] = (
    ("triplet_hardest", "triplet_all", "rsum", +1, "Bleeker & de Rijke obs. 2 (and VSE++)"),
    ("triplet_hardest", "info_nce", "rsum", +1, "Bleeker & de Rijke obs. 3"),
    ("triplet_hardest", "smooth_ap", "rsum", +1, "Bleeker & de Rijke obs. 5"),
    ("unified", "triplet_hardest", "rsum", +1, "Li et al. Tables 1, 7"),
    ("cross_example_softmax", "sampled_softmax", "pr_auc", +1, "Veit & Wilber Table 1 (calibration)"),
    ("goal:cir,sig-ms", "goal:con,con", "rsum", +1, "Xuan & Chen Tables 3-5"),
)

#: The losses students meet in practice (issue 36) against NT-Xent at its fixed default tau = 0.1, declared before
#: their runs and read in each setting: one family of its own, Holm-corrected together.
PRACTICE_CLAIMS: tuple[Claim, ...] = (
    ("clip_learned", "info_nce", "rsum", +1, "Radford et al. (CLIP): tau learned, not fixed"),
    ("siglip", "info_nce", "rsum", +1, "Zhai et al. (SigLIP): the sigmoid loss ahead of the softmax at small batches"),
)

#: Xuan & Chen's pair weights (Tables 3-5): under each triplet weight T, every other pair weight P beats
#: P^con, so (T, con) - (T, P) < 0. One family of 12, Holm-corrected together ("reverses": P^con wins).
GOAL_PAIR_CLAIMS: tuple[Claim, ...] = tuple(
    (f"goal:{t},con", f"goal:{t},{p}", "rsum", -1, "Xuan & Chen Tables 3-5 (pair weights)")
    for t in GOAL_TRIPLETS for p in GOAL_PAIRS if p != "con")


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


def ranking(summary: pd.DataFrame, metric: str = "rsum") -> pd.DataFrame:
    """Configurations best first by mean, with ``rank`` and ``overlaps_best``: whether the mean ± std bar overlaps
    the best's. That is a picture of the spread (the figures draw it), not a test: which configurations the seeds
    tell apart is :func:`separations`'."""
    s = _stats(summary, metric).sort_values("mean", ascending=False, kind="stable").reset_index(drop=True)
    best = s.iloc[0]
    s["overlaps_best"] = (best["mean"] - s["mean"]) <= (best["std"] + s["std"])
    s["rank"] = np.arange(1, len(s) + 1)
    return s


def per_seed(runs: pd.DataFrame, metric: str = "rsum", prefix: str = "sel_") -> pd.DataFrame:
    """`metric` per seed (rows) and loss (columns): the pairing every comparison reads. A loss must have one run
    per seed, and every loss the same seeds."""
    col = f"{prefix}{check_metric(metric)}"
    if not isinstance(runs, pd.DataFrame) or not {"loss", "seed", col} <= set(runs.columns):
        raise ValueError(f"runs must be a showdown's runs table with columns loss, seed and {col}")
    if runs.duplicated(["loss", "seed"]).any():
        raise ValueError("runs holds two runs of one loss and seed: a comparison pairs one run per seed")
    table = runs.pivot(index="seed", columns="loss", values=col)
    if table.isna().any().any():
        raise ValueError("every loss of runs must have the same seeds: a comparison is paired by seed")
    return table[list(dict.fromkeys(runs["loss"]))]


def interval_text(delta: float, low: float, high: float, metric: str) -> str:
    """'+10.3 [4.2, 16.4]': a difference and its interval, at the metric's decimals."""
    d = _digits(metric)
    return f"{delta + 0.0:+.{d}f} [{low + 0.0:.{d}f}, {high + 0.0:.{d}f}]"


def separations(runs: pd.DataFrame, metric: str = "rsum", prefix: str = "sel_") -> pd.DataFrame:
    """Every pair of configurations, paired by seed and Holm-corrected over the family of all pairs.

    Columns: a, b, mean_a, mean_b, delta (mean a - b), low / high (uncorrected paired 95% interval), p, p_holm,
    verdict ("ahead" / "behind" / "not told apart", a's place; read from p_holm), uncorrected (the same words
    from the uncorrected test), separated (verdict is not "not told apart").
    """
    table = per_seed(runs, metric, prefix)
    pairs = list(itertools.combinations(table.columns, 2))
    if not pairs:
        raise ValueError("runs must hold at least two losses to compare")
    comps = [stats.Comparison(f"{a} | {b}", table[a], table[b]) for a, b in pairs]
    v = stats.verdicts(comps, family=[c.name for c in comps])
    out = pd.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs],
                        "mean_a": [table[a].mean() for a, _ in pairs], "mean_b": [table[b].mean() for _, b in pairs]})
    out = pd.concat([out, v[["delta", "low", "high", "p", "p_holm", "verdict", "uncorrected"]]], axis=1)
    out["separated"] = out["verdict"] != "not told apart"
    return out


def claims(runs: pd.DataFrame, family: Sequence[Claim] = PAPER_CLAIMS, prefix: str = "sel_") -> list[dict]:
    """The claims of `family` whose two losses were trained, read as one Holm-corrected family.

    Each: a, b, metric, expected, source, n (seeds), mean_a / std_a / mean_b / std_b, delta, low / high (the
    uncorrected paired 95% interval), low_holm / high_holm (at the level Holm tested it), p, p_holm, verdict
    ("holds" / "reverses" / "cannot tell", from p_holm), uncorrected, family_size and a sentence (``text``).
    """
    trained = set(runs["loss"])
    present = [c for c in family if c[0] in trained and c[1] in trained]
    if not present:
        return []
    comps = [stats.Comparison(f"{a} - {b} ({m})", per_seed(runs, m, prefix)[a], per_seed(runs, m, prefix)[b], sign)
             for a, b, m, sign, _ in present]
    v = stats.verdicts(comps, family=[c.name for c in comps])
    out = []
    for (a, b, m, sign, source), comp, (_, row) in zip(present, comps, v.iterrows()):
        c = {"a": a, "b": b, "metric": m, "expected": sign, "source": source, "n": int(row["n"]),
             "mean_a": float(np.mean(comp.a)), "std_a": float(np.std(comp.a, ddof=1)) if len(comp.a) > 1 else 0.0,
             "mean_b": float(np.mean(comp.b)), "std_b": float(np.std(comp.b, ddof=1)) if len(comp.b) > 1 else 0.0,
             "family_size": len(present),
             **{k: row[k] for k in ("delta", "low", "high", "low_holm", "high_holm", "p", "p_holm", "verdict",
                                    "uncorrected")}}
        c["text"] = _claim_text(c)
        out.append(c)
    return out


def _claim_text(c: dict) -> str:
    a, b, m = registry.label(c["a"]), registry.label(c["b"]), c["metric"]
    status = {"holds": "holds here", "reverses": "is reversed here",
              "cannot tell": f"cannot be told with {c['n']} seeds"}[c["verdict"]]
    beside = "" if c["uncorrected"] == c["verdict"] else f"; uncorrected it would read '{c['uncorrected']}'"
    return (f"{c['source']}: '{a} {'>' if c['expected'] > 0 else '<'} {b}' {status}. {a} "
            f"{mean_std(c['mean_a'], c['std_a'], m)} vs {b} {mean_std(c['mean_b'], c['std_b'], m)} "
            f"({METRIC_LABELS[m]}): paired difference {interval_text(c['delta'], c['low'], c['high'], m)} (95%), "
            f"Holm-corrected p = {c['p_holm']:.3f} over {c['family_size']} claims{beside}.")


def _goal_text(goal_claims: list[dict]) -> str:
    n = len(goal_claims)
    count = {v: sum(c["verdict"] == v for c in goal_claims) for v in stats.VERDICTS}
    raw = sum(c["uncorrected"] == "reverses" for c in goal_claims)
    cells = "; ".join(f"({c['a'][5:]}) − ({c['b'][5:]}) = {interval_text(c['delta'], c['low'], c['high'], 'rsum')}"
                      f"{'' if c['verdict'] == 'cannot tell' else ' ' + c['verdict']}" for c in goal_claims)
    told = count["holds"] + count["reverses"]
    where = ("the seeds tell no cell" if not told else "P^con is ahead in every cell the seeds tell"
             if not count["holds"] else "P^con is behind in every cell the seeds tell" if not count["reverses"]
             else "the seeds tell both ways")
    verb = lambda k, one, many: one if count[k] == 1 else many  # noqa: E731
    return (f"Xuan & Chen Tables 3-5 (pair weights): under every triplet weight they find the other pair weights "
            f"ahead of P^con. Here {where}: of the {n} comparisons (one family), {count['reverses']} "
            f"{verb('reverses', 'reverses', 'reverse')} the paper after Holm's correction ({raw} by their uncorrected "
            f"intervals), {count['holds']} {verb('holds', 'holds', 'hold')}, {count['cannot tell']} cannot be told "
            f"with {goal_claims[0]['n']} seeds. (T, P^con) − (T, P), rsum [95%]: {cells}.")


def reading(runs: pd.DataFrame, metric: str = "rsum", prefix: str = "sel_") -> dict:
    """The written reading of a showdown, every sentence built from the per-seed runs.

    Returns a dict with ``ranking`` (:func:`ranking` of the summary on `metric`), ``best``, ``tied``
    (the best and the configurations not told apart from it, Holm over all pairs), ``n_pairs``,
    ``n_separated`` (Holm) and ``n_separated_uncorrected``, ``claims`` (:func:`claims` of
    :data:`PAPER_CLAIMS`), ``practice_claims`` (of :data:`PRACTICE_CLAIMS`, empty without those runs), ``goal_claims`` (of :data:`GOAL_PAIR_CLAIMS`, empty without GOAL runs),
    ``goal_best`` (the best GOAL cell), ``map_best`` (the best mAP@5) and ``text`` (Markdown).
    """
    summary = summarize(runs, prefix=prefix)
    rank = ranking(summary, metric)
    names = dict(zip(rank["loss"], rank["name"]))
    best = rank.iloc[0]
    seps = separations(runs, metric, prefix)
    told = seps[seps["separated"] & ((seps["a"] == best["loss"]) | (seps["b"] == best["loss"]))]
    apart = set(told["a"]) | set(told["b"])
    tied = [l for l in rank["loss"] if l == best["loss"] or l not in apart]
    paper, goal_claims = claims(runs, PAPER_CLAIMS, prefix), claims(runs, GOAL_PAIR_CLAIMS, prefix)
    practice = claims(runs, PRACTICE_CLAIMS, prefix)
    goal_rank = rank[rank["loss"].map(registry.is_goal)]
    goal_best = goal_rank.iloc[0]["loss"] if len(goal_rank) else None
    map_best = ranking(summary, "map5").iloc[0]["loss"]
    n_seeds, n_sep, n_raw = int(summary["n_seeds"].min()), int(seps["separated"].sum()), int((seps["p"] < 0.05).sum())
    behind = [names[l] for l in rank["loss"] if l in apart and l != best["loss"]]
    lines = [
        f"**Highest mean {METRIC_LABELS[metric]}: {best['name']}, {mean_std(best['mean'], best['std'], metric)}.** "
        + (f"Behind it, told apart by {n_seeds} seeds: {', '.join(behind)}; the other {len(tied) - 1} are not "
           "told apart from it." if behind else
           f"None of the other {len(rank) - 1} is told apart from it by {n_seeds} seeds: its lead is not shown."),
        f"Of the {len(seps)} pairs of configurations, {n_sep} {'is' if n_sep == 1 else 'are'} told apart on {METRIC_LABELS[metric]} by the "
        f"paired t test with Holm's correction over all {len(seps)} ({n_raw} by uncorrected paired 95% intervals: "
        "with this many comparisons some exclude 0 by chance alone, so an uncorrected one is a lead to re-run with "
        "more seeds, not a finding). The papers' orderings below were named before the runs and form a family of "
        "their own.",
    ]
    if goal_best is not None:
        row = goal_rank.iloc[0]
        lines.append(f"Highest mean GOAL combination: {row['name']}, {mean_std(row['mean'], row['std'], metric)} "
                     f"(rank {int(row['rank'])} of {len(rank)}).")
    same = map_best == best["loss"]
    lines.append(f"Highest mean mAP@5: {names[map_best]}" + (" -- the same configuration, as Bleeker & de Rijke "
                 "observe (obs. 6)." if same else f", not the highest {METRIC_LABELS[metric]} one (Bleeker & de "
                 "Rijke found them to coincide, obs. 6)."))
    lines += [c["text"] for c in paper]
    lines += [c["text"] for c in practice]
    if goal_claims:
        lines.append(_goal_text(goal_claims))
    return {"ranking": rank, "best": best["loss"], "tied": tied, "n_pairs": len(seps), "n_separated": n_sep,
            "n_separated_uncorrected": n_raw, "claims": paper, "practice_claims": practice, "goal_claims": goal_claims,
            "goal_best": goal_best,
            "map_best": map_best, "digits": _digits(metric), "text": "\n".join(f"- {line}" for line in lines)}
