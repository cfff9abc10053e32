"""The tables and the reading of notebook 12's controlled experiments (``vlr_lib.experiments.lessons``)."""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .. import registry
from ..stats import VERDICTS, Comparison, verdicts
from .labels import METRIC_LABELS, _digits, check_metric, mean_std
from .markdown import last_epoch_share, to_markdown

#: The differences notebook 12 plots: (a, b, the sign the papers report for a - b, who reports it).
LESSON_DELTAS: tuple[tuple[str, str, int, str], ...] = (
    ("triplet_hardest", "triplet_all", +1, "VSE++ (Faghri et al.) and Bleeker & de Rijke obs. 2"),
    ("unified", "triplet_hardest", +1, "Li et al. Tables 1, 7"),
    ("info_nce", "triplet_hardest", -1, "Bleeker & de Rijke obs. 3"),
)
def lesson_table(runs: pd.DataFrame, metric: str = "rsum", prefix: str = "sel_") -> pd.DataFrame:
    """Each condition's three differences of :data:`LESSON_DELTAS`, paired by seed, Holm-corrected over the table.

    `runs`: one row per (experiment, condition, role, seed) with ``order`` (position of the
    condition) and ``<prefix><metric>``. For a difference a - b of two roles the seeds are
    paired (same seed: same initialisation and batches): ``delta`` is the mean per-seed
    difference, ``ci_low`` / ``ci_high`` its uncorrected paired t 95% interval (``vlr_lib.stats``),
    ``half`` that interval's half-width, ``p`` its paired t test. The table's comparisons are one
    family (``vlr_lib.stats.verdicts``; a condition that shares its runs with another, such as each
    experiment's base condition, counts once, ``family_size``): ``p_holm`` is Holm-corrected over it, ``holm_low`` /
    ``holm_high`` the interval at the level Holm tested it, and ``verdict`` is read from ``p_holm``:
    "holds" on the papers' side of 0, "reverses" on the other, else "cannot tell" (always, with one
    seed); ``uncorrected`` is the same word read from the uncorrected interval. ``seed_min`` /
    ``seed_max`` are the smallest and largest per-seed difference. One row per (experiment,
    condition, comparison).
    """
    metric = check_metric(metric)
    col = f"{prefix}{metric}"
    needed = {"experiment", "condition", "order", "role", "seed", col}
    if not isinstance(runs, pd.DataFrame) or not needed <= set(runs.columns):
        raise ValueError(f"runs must be the lessons table (vlr_lib.experiments.lessons.run) with columns {sorted(needed)}")
    rows, comps = [], []
    for (exp, cond), part in runs.groupby(["experiment", "condition"], sort=False):
        by_role = part.pivot_table(index="seed", columns="role", values=col, aggfunc="first")
        extra = {"overlap": float(part["overlap"].iloc[0])} if "overlap" in part else {}
        for a, b, sign, source in LESSON_DELTAS:
            if a not in by_role or b not in by_role:
                continue
            pair = by_role[[a, b]].dropna()
            per_seed = pair[a] - pair[b]
            # a condition that shares its runs with another (the base condition of every experiment) is the
            # same comparison: it enters the family once
            same = (a, b, tuple(pair.index), tuple(pair[a]), tuple(pair[b]))
            comps.append(Comparison(repr(same), pair[a].to_numpy(), pair[b].to_numpy(), sign))
            rows.append({"experiment": exp, "condition": cond, "order": int(part["order"].iloc[0]), **extra,
                         "comparison": f"{registry.label(a)} − {registry.label(b)}", "a": a, "b": b, "expected": sign,
                         "source": source, "mean_a": pair[a].mean(), "std_a": pair[a].std(ddof=1),
                         "mean_b": pair[b].mean(), "std_b": pair[b].std(ddof=1),
                         "seed_min": per_seed.min(), "seed_max": per_seed.max(), "n_seeds": len(pair),
                         "metric": metric})
    if not rows:
        raise ValueError("runs holds no condition with both roles of any comparison")
    distinct = list({c.name: c for c in comps}.values())
    v = verdicts(distinct, family=[c.name for c in distinct]).set_index("name").loc[[c.name for c in comps]]
    v = v.reset_index(drop=True)
    out = pd.DataFrame(rows).assign(delta=v["delta"], ci_low=v["low"], ci_high=v["high"], half=(v["high"] - v["low"]) / 2,
                                    p=v["p"], p_holm=v["p_holm"], holm_low=v["low_holm"], holm_high=v["high_holm"],
                                    verdict=v["verdict"], uncorrected=v["uncorrected"], family_size=len(distinct))
    return out.sort_values(["experiment", "order"], kind="stable", ignore_index=True,
                                          key=lambda c: c.map({e: i for i, e in enumerate(dict.fromkeys(
                                              runs["experiment"]))}) if c.name == "experiment" else c)


def _delta_text(row: pd.Series) -> str:
    digits = _digits(row["metric"])
    every = ""
    if row["n_seeds"] > 1 and (row["seed_min"] > 0 or row["seed_max"] < 0):
        every = f", {'ahead' if row['seed_min'] > 0 else 'behind'} on every seed"
    beside = "" if row["uncorrected"] == row["verdict"] else f"; uncorrected: {row['uncorrected']}"
    return f"{row['condition']} ({row['delta']:+.{digits}f} ± {row['half']:.{digits}f}{every}{beside})"


def lesson_reading(table: pd.DataFrame, labels: Mapping[str, str] | None = None) -> dict:
    """Where each paper's ordering holds, reverses, or cannot be told, per experiment, with the numbers.

    `table` is :func:`lesson_table`'s; `labels` names the experiments (e.g.
    ``vlr_lib.experiments.lessons.EXPERIMENTS``). Each difference is given as "condition (delta ±
    half-width of its uncorrected paired 95% interval)", with "ahead/behind on every seed" when the per-seed
    differences share their sign; the verdicts are the table's, Holm-corrected over all its comparisons, and a
    condition whose uncorrected interval reads otherwise says so. Returns {"verdicts": {(experiment, comparison):
    {verdict: [conditions]}}, "text": Markdown, one paragraph per experiment}.
    """
    labels = dict(labels or {})
    verdicts: dict = {}
    paragraphs = []
    for exp, part in table.groupby("experiment", sort=False):
        sentences = []
        for comparison, rows in part.groupby("comparison", sort=False):
            first = rows.iloc[0]
            claim = (f"'{registry.label(first['a'])} {'>' if first['expected'] > 0 else '<'} {registry.label(first['b'])}' "
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
                          "the uncorrected 95% paired t interval; verdicts Holm-corrected over the table's "
                          f"{int(part['family_size'].iloc[0])} comparisons): " + " ".join(sentences))
    return {"verdicts": verdicts, "text": "\n\n".join(paragraphs)}


def seed_differences(runs: pd.DataFrame, experiment: str, condition: str, a: str, b: str, metric: str = "rsum",
                     prefix: str = "sel_") -> pd.Series:
    """The per-seed differences a - b of two roles in one condition of the lessons table (index: seed), whose
    mean is :func:`lesson_table`'s ``delta``: what its paired interval is computed from."""
    col = f"{prefix}{check_metric(metric)}"
    if not isinstance(runs, pd.DataFrame) or not {"experiment", "condition", "role", "seed", col} <= set(runs):
        raise ValueError(f"runs must be the lessons table (vlr_lib.experiments.lessons.run) with column {col}")
    part = runs[(runs["experiment"] == experiment) & (runs["condition"] == condition)]
    if part.empty:
        raise ValueError(f"condition must be one of experiment {experiment!r}'s conditions, got {condition!r}")
    by_role = part.pivot_table(index="seed", columns="role", values=col, aggfunc="first")
    missing = [r for r in (a, b) if r not in by_role]
    if missing:
        raise ValueError(f"a and b must be roles of the runs {sorted(by_role)}, got {missing}")
    pair = by_role[[a, b]].dropna()
    return (pair[a] - pair[b]).rename(f"{a} - {b}")


def lesson_part(table: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The rows of one experiment of a :func:`lesson_table`, in the order of its conditions."""
    if not isinstance(table, pd.DataFrame) or not {"experiment", "order", "comparison", "delta", "half"} <= set(table):
        raise TypeError("table must be a lesson table (vlr_lib.report.lessons.lesson_table)")
    part = table[table["experiment"] == experiment]
    if part.empty:
        raise ValueError(f"experiment must be one of {list(dict.fromkeys(table['experiment']))}, got {experiment!r}")
    return part.sort_values("order", kind="stable")


def lesson_matrix(table: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """One experiment of a lesson table as text: rows conditions (with the scene overlap when measured), columns
    the comparisons, cells "delta ± half-width (Holm verdict)", and "; uncorrected: ..." where that reads otherwise."""
    part = lesson_part(table, experiment)
    digits = _digits(part["metric"].iloc[0])
    cells = part.assign(cell=[f"{d:+.{digits}f} ± {n:.{digits}f} ({v}{'' if u == v else f'; uncorrected: {u}'})"
                              for d, n, v, u in zip(part["delta"], part["half"], part["verdict"], part["uncorrected"])])
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
    out = out[roles].rename(columns=lambda r: registry.label(r))
    out.columns.name = None
    return out


def lessons_markdown(runs: pd.DataFrame, meta: Mapping, labels: Mapping[str, str] | None = None) -> str:
    """The docs/results.md section of notebook 12's experiments: provenance, each experiment's differences and
    rsums, the generated reading. `runs` / `meta` come from ``vlr_lib.experiments.lessons.run``."""
    labels = dict(labels or {})
    spec = meta["spec"]
    table = lesson_table(runs)
    lines = [
        f"### Notebook 12: when do the papers' lessons hold? ({'fast' if spec['fast'] else 'full'} size), "
        f"{meta['date'][:10]}",
        "",
        f"- command: `{meta['command']}`",
        f"- conditions: every experiment trains Triplet, Triplet-SH, Unified and NT-Xent (library defaults) "
        f"through the showdown of its condition (`vlr_lib.experiments.cells.spec_for('shapes', fast={spec['fast']}, "
        f"setting)`: same data sizes, schedule, selection on validation), difficulty {spec['difficulty']} unless "
        f"swept ({', '.join(f'{d:g}' for d in spec['difficulties'])}), warm-up epochs "
        f"{', '.join(map(str, spec['warmup_epochs']))}, settings {', '.join(spec['settings'])}; seeds "
        f"{', '.join(map(str, spec['seeds']))}",
        "- reported: test rsum at the epoch of best validation rsum; a difference a − b is the mean of the per-seed "
        "differences (same seed: same initialisation and batches) ± the half-width of its uncorrected 95% paired t "
        "interval; 'holds' / 'reverses' / 'cannot tell' = the paired t test, Holm-corrected over every comparison of "
        "the table, on / against the papers' side of 0, else not told (`vlr_lib.stats.verdicts`)",
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
    lines += ["Reading (generated from the table by `vlr_lib.report.lessons.lesson_reading`):", "",
              lesson_reading(table, labels)["text"], ""]
    return "\n".join(lines)
