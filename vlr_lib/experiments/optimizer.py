"""Chapter 13's optimizer experiment: the optimizer at a loss switch, pre-registered on its own, on unseen seeds.

Everything it trains is declared in its pre-registration (``vlr_lib/preregistration/optimizer.toml``, read by
``vlr_lib.experiments.preregistration.load_optimizer``), a later one than the replication's, which left this
experiment out; this module adds no number of its own. Chapter 12's experiment (e) trains a warm-up (1 epoch of
Triplet (all), then Triplet-SH) with Adam fresh or carried over at the switch; here each declared *handling* --
fresh Adam, Adam carried over, and VSE∞'s recipe (Chen et al., CVPR 2021: one AdamW with weight decay 1e-4
carried over its warm-up switch, the gradient's norm clipped at 2) -- trains at each declared *budget* (20 epochs
with the learning rate decayed at 10, and 40 decayed at 20) on the final seeds, at the showdown's schedule
otherwise (``cells.spec_for``). A condition is "<handling>@<budget>"; each run reports its test rsum at its epoch
of best validation rsum (``sel_rsum``); the declared comparisons -- a side is a condition, or the per-seed
difference "c1 - c2" of two (the budget interaction) -- are paired by seed and read through
``vlr_lib.stats.verdicts`` over the declared family (Holm). A comparison outside the family is refused as
exploratory (:func:`compare`).

Cells are cached under ``<runs>/replication-optimizer-<data>-<fast|full>``, so an interrupted run resumes. The
record (``vlr_lib/recorded/replication-optimizer-shapes-full``) stores the file's sha256, text and git commit and
the dates of the runs; :func:`run` refuses a record made from another version of the file
(``replication.StaleRecord``, naming the file). Fast mode (the tests, CI) runs the protocol at the showdown's fast
size, each budget scaled as the showdown's fast epochs are (20 -> 4), on the first two seeds: seconds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..metrics import chance_rsum
from ..paths import runs_dir
from ..stats import Comparison, paired_interval
from ..stats import verdicts as holm_verdicts
from ..train import rank_and_world
from . import cells as S
from . import preregistration as P
from . import record as R
from .replication import (FAST_SEEDS, _interval, _markdown_table, checked_provenance, preregistered_record,
                          provenance, record_meta)

NAME = "replication-optimizer-shapes-full"
REMAKE = "make record --only 13-optimizer (python -m vlr_lib record --only 13-optimizer)"


@dataclass
class OptimizerRuns:
    """A finished optimizer experiment: one row per run (``runs``), one per run and epoch (``epochs``), how."""

    runs: pd.DataFrame
    epochs: pd.DataFrame
    meta: dict
    prereg: P.OptimizerPreregistration
    record: R.Record | None = None


# --------------------------------------------------------------------------- the plan


def seeds_of(prereg: P.OptimizerPreregistration, fast: bool) -> tuple[int, ...]:
    return prereg.seeds[:FAST_SEEDS] if fast else prereg.seeds


def spec_of(prereg: P.OptimizerPreregistration, fast: bool, device: str | None = None) -> S.ShowdownSpec:
    """The showdown's schedule and data of the declared setting (full or fast size) on the declared seeds."""
    return S.spec_for(prereg.data, fast, prereg.setting, seeds=seeds_of(prereg, fast), device=device)


def budget_of(prereg: P.OptimizerPreregistration, budget: P.Budget, fast: bool) -> tuple[int, int]:
    """(epochs, lr decay epoch) of `budget`; fast mode scales both as the showdown's fast epochs scale its full
    ones (20 -> 4), never below 2 epochs with the decay inside the run."""
    if not fast:
        return budget.epochs, budget.lr_decay_epoch
    full, small = spec_of(prereg, False).epochs, spec_of(prereg, True).epochs
    epochs = max(2, round(budget.epochs * small / full))
    return epochs, min(epochs - 1, max(1, round(budget.lr_decay_epoch * small / full)))


def config(prereg: P.OptimizerPreregistration, condition: str, fast: bool) -> dict:
    """A condition as a grid cell: the loss schedule, the handling's optimizer fields and the budget."""
    handling, budget = prereg.condition(condition)
    epochs, decay = budget_of(prereg, budget, fast)
    return {"loss": prereg.loss, **handling.settings(), "epochs": epochs, "lr_decay_epoch": decay}


def out_dir(prereg: P.OptimizerPreregistration, fast: bool) -> Path:
    return runs_dir() / f"replication-optimizer-{prereg.data}-{'fast' if fast else 'full'}"


# --------------------------------------------------------------------------- training


def _condition_of(prereg: P.OptimizerPreregistration, runs: pd.DataFrame, fast: bool) -> list[str]:
    """Each run's condition, matched on its config's fields (every run must be exactly one condition)."""
    fields = [k for k in config(prereg, prereg.conditions[0], fast) if k != "loss"]
    wanted = {tuple(str(v) for v in (config(prereg, c, fast)[k] for k in fields)): c for c in prereg.conditions}
    out = [wanted.get(tuple(str(None if pd.isna(r[k]) else r[k]) for k in fields)) for _, r in runs.iterrows()]
    if None in out:
        raise RuntimeError("every run of the optimizer experiment must be exactly one of its conditions")
    return out


def train(prereg: P.OptimizerPreregistration, fast: bool, progress: bool = False,
          device: str | None = None) -> tuple[pd.DataFrame, float, float]:
    """Every condition on every seed (cached cells are read, not trained): (runs, chance rsum on validation, wall
    seconds). The runs table holds condition, handling, budget, seed, epochs, best and selected rsum, key."""
    spec = spec_of(prereg, fast, device)
    result, data, _, wall = S.train_cells(spec, [config(prereg, c, fast) for c in prereg.conditions],
                                          out_dir(prereg, fast), progress)
    runs = result.runs
    condition = _condition_of(prereg, runs, fast)
    slim = pd.DataFrame({
        "condition": condition, "handling": [c.split("@")[0] for c in condition],
        "budget": [c.split("@")[1] for c in condition], "seed": runs["seed"].astype(int),
        "epochs": runs["epochs"].astype(int), "best_rsum": runs["best_rsum"].astype(float),
        "best_epoch": runs["best_epoch"].astype(int), "sel_rsum": runs["sel_rsum"].astype(float), "key": runs["key"]})
    return slim, chance_rsum(data.val[2]), wall


# --------------------------------------------------------------------------- the record


def record_key(prereg: P.OptimizerPreregistration, fast: bool = False) -> dict:
    """What the record is found by: the pre-registration's hash and the schedule it trains under."""
    return {"experiment": "optimizer", "preregistration": prereg.sha256, "spec": spec_of(prereg, fast).key()}


def recorded(prereg: P.OptimizerPreregistration) -> OptimizerRuns | None:
    """The shipped record of `prereg`, else None; one made from another version of the file is refused
    (:class:`replication.StaleRecord`, naming the file)."""
    rec = preregistered_record(NAME, prereg, record_key(prereg), REMAKE)
    if rec is None:
        return None
    return OptimizerRuns(pd.DataFrame(rec.tables["runs"]), pd.DataFrame(rec.tables["epochs"]), rec.manifest["meta"],
                         prereg, rec)


def _epochs(prereg: P.OptimizerPreregistration, runs: pd.DataFrame, fast: bool) -> pd.DataFrame:
    """One row per run and epoch: validation and test rsum, seconds (from the cells)."""
    rows = []
    for cell in R.grid_cells(out_dir(prereg, fast), runs["key"].unique()):
        for i, r in enumerate(cell["history"], 1):
            rows.append({"key": cell["key"], "epoch": i, "rsum": r.get("rsum"),
                         "test_rsum": r.get("test", {}).get("rsum"), "seconds": r.get("seconds")})
    return pd.DataFrame(rows)


def _run_dates(prereg: P.OptimizerPreregistration, runs: pd.DataFrame, fast: bool) -> list[str]:
    """[first, last]: when the runs' cells were written (UTC)."""
    stamps = [(out_dir(prereg, fast) / "cells" / f"{key}.json").stat().st_mtime for key in runs["key"].unique()]
    return [datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds") for t in (min(stamps), max(stamps))]


def run(prereg: P.OptimizerPreregistration | None = None, fast: bool = False, record: bool = True,
        progress: bool = False, command: str = "", device: str | None = None) -> OptimizerRuns:
    """The optimizer experiment of `prereg` (default the shipped file): with `record`, the shipped full-size record
    when it was made from this file (a stale one is refused), in fast mode too; else every run trained, or read
    from its cells. Under ``$VLR_RECORD`` (``make record``) a full-size result is kept as the record, and its
    pre-registration must be committed first (the record names its commit)."""
    prereg = prereg or P.load_optimizer()
    if record and (found := recorded(prereg)) is not None:
        return found
    origin = checked_provenance(prereg, fast)
    t0 = time.perf_counter()
    runs, chance, _ = train(prereg, fast, progress, device)
    epochs = _epochs(prereg, runs, fast)
    meta = record_meta(prereg, origin, fast=fast, command=command or "vlr_lib.experiments.optimizer.run()",
                       chance=chance, run_dates=_run_dates(prereg, runs, fast), n_runs=len(runs), epochs=epochs,
                       device=device, t0=t0)
    out = OptimizerRuns(runs, epochs, meta, prereg)
    if not fast and rank_and_world()[0] == 0:
        R.keep(NAME, record_key(prereg), {"runs": R.frame_rows(runs), "epochs": R.frame_rows(epochs)},
               command=meta["command"], title="the pre-registered optimizer experiment (shapes, full size)",
               wall_seconds=meta["wall_seconds"], train_seconds=meta["train_seconds"], meta=meta)
    return out


# --------------------------------------------------------------------------- reading


def by_seed(exp: OptimizerRuns, side: str) -> pd.Series:
    """The metric per seed of a side: a condition, or "c1 - c2" (the per-seed difference of two conditions)."""
    if " - " in side:
        first, second = side.split(" - ")
        return by_seed(exp, first) - by_seed(exp, second)
    part = exp.runs[exp.runs["condition"] == side]
    if part.empty:
        raise ValueError(f"the optimizer experiment has no run of {side!r} (its conditions: "
                         f"{list(exp.prereg.conditions)})")
    return part.set_index("seed")[exp.prereg.metric].astype(float).sort_index()


def _comparison(exp: OptimizerRuns, name: str, a: str, b: str, expected: int | None) -> Comparison:
    x, y = by_seed(exp, a), by_seed(exp, b)
    if list(x.index) != list(y.index) or x.isna().any() or y.isna().any():
        raise ValueError(f"{name}: a and b must hold the same seeds ({list(x.index)} vs {list(y.index)})")
    return Comparison(name, x.to_numpy(), y.to_numpy(), expected)


def declared(exp: OptimizerRuns) -> list[Comparison]:
    """Every comparison of the pre-registration's family."""
    return [_comparison(exp, d.name, d.a, d.b, d.expected) for d in exp.prereg.comparisons]


def verdicts(exp: OptimizerRuns) -> pd.DataFrame:
    """The family's verdicts (``vlr_lib.stats.verdicts``, Holm over every declared comparison), with each
    comparison's claim, a and b."""
    table = holm_verdicts(declared(exp), family=exp.prereg.family, alpha=exp.prereg.alpha)
    info = pd.DataFrame([{"claim": d.claim, "a": d.a, "b": d.b} for d in exp.prereg.comparisons])
    return pd.concat([table, info], axis=1)


def compare(exp: OptimizerRuns, a: str, b: str) -> pd.Series:
    """The verdict of a - b when it is a declared comparison (its row of :func:`verdicts`); any other pair is
    refused by ``stats.verdicts`` as exploratory (a ValueError: show it with :func:`exploratory`)."""
    found = [d for d in exp.prereg.comparisons if (d.a, d.b) == (a, b)]
    if found:
        table = verdicts(exp)
        return table[table["name"] == found[0].name].iloc[0]
    holm_verdicts([*declared(exp), _comparison(exp, f"{a} − {b}", a, b, None)], family=exp.prereg.family,
                  alpha=exp.prereg.alpha)  # refuses it: not in the family
    raise AssertionError("unreachable: stats.verdicts refuses a comparison outside the family")


def exploratory(exp: OptimizerRuns, a: str, b: str) -> tuple[float, float, float]:
    """An undeclared a - b: its mean paired difference and uncorrected 95% interval, no verdict."""
    c = _comparison(exp, "exploratory", a, b, None)
    return paired_interval(c.a, c.b)


def convergence(exp: OptimizerRuns) -> pd.DataFrame:
    """Per condition: the runs, how many select their last epoch, the share, and whether it is within the
    pre-registered limit."""
    runs = exp.runs.assign(last=exp.runs["best_epoch"] == exp.runs["epochs"])
    out = runs.groupby("condition", sort=False).agg(runs=("last", "size"), last=("last", "sum")).reset_index()
    out["share"] = out["last"] / out["runs"]
    out["ok"] = out["share"] <= exp.prereg.max_last_epoch_share
    return out


def recorded_and_again(epochs: int | None = None, seed: int | None = None) -> tuple[list[float], list[float]]:
    """The record's per-epoch validation rsums of its checked run -- VSE∞'s recipe at the first budget (AdamW
    carried over, clipped), the first seed -- and the same run re-trained from scratch on the CPU (its first
    `epochs`; the learning rate still decays at the record's epoch)."""
    prereg = P.load_optimizer()
    exp = recorded(prereg)
    if exp is None:
        raise FileNotFoundError(f"no record of the optimizer experiment matches the code: {REMAKE}")
    seed = prereg.seeds[0] if seed is None else seed
    condition = f"{prereg.handlings[-1].name}@{prereg.budgets[0].name}"
    row = exp.runs[(exp.runs["condition"] == condition) & (exp.runs["seed"] == seed)].iloc[0]
    history = exp.epochs[exp.epochs["key"] == row["key"]].sort_values("epoch")["rsum"].astype(float).tolist()
    cfg = config(prereg, condition, False)
    spec = replace(spec_of(prereg, False, device="cpu"), lr_decay_epoch=cfg.pop("lr_decay_epoch"))
    full = cfg.pop("epochs")
    spec = replace(spec, epochs=full if epochs is None else epochs)
    history = history if epochs is None else history[:epochs]
    again = S.retrain(spec, cfg.pop("loss"), seed, settings=cfg)
    return history, [r["rsum"] for r in again.history]


# --------------------------------------------------------------------------- what the chapter and docs/results.md show


def conditions_table(exp: OptimizerRuns) -> pd.DataFrame:
    """Test rsum per handling (rows) and budget (columns): mean ± std over the seeds."""
    p = exp.prereg
    cells = exp.runs.groupby(["handling", "budget"])[p.metric].agg(["mean", "std"])
    return pd.DataFrame({f"{b.epochs} epochs": [f"{cells.loc[(h.name, b.name), 'mean']:.1f} ± "
                                                f"{cells.loc[(h.name, b.name), 'std']:.1f}" for h in p.handlings]
                         for b in p.budgets}, index=pd.Index([h.label for h in p.handlings], name="handling"))


def verdict_table(exp: OptimizerRuns) -> pd.DataFrame:
    """The family as text: comparison, claim, a − b with its uncorrected 95% interval, the Holm-adjusted p, the
    corrected verdict and the word the uncorrected interval alone would give."""
    v = verdicts(exp)
    return pd.DataFrame({"comparison": v["name"], "claim": v["claim"],
                         "a − b [95% CI, uncorrected]": [_interval(*r) for r in zip(v["delta"], v["low"], v["high"])],
                         "p (Holm)": [f"{p:.3f}" for p in v["p_holm"]], "verdict (Holm)": v["verdict"],
                         "uncorrected alone": v["uncorrected"]})


def reading(exp: OptimizerRuns) -> list[str]:
    """One sentence per declared comparison, its words read from the corrected verdict (never more than it)."""
    out = []
    for r in verdicts(exp).itertuples():
        word = f"**{r.verdict}**"
        if r.verdict in ("cannot tell", "not told apart") and r.uncorrected != r.verdict:
            word += " (the uncorrected interval alone excludes 0: a lead, not a finding)"
        out.append(f"- {r.name}: {word}; a − b = {_interval(r.delta, r.low, r.high)} rsum over {r.n} seeds, "
                   f"Holm p = {r.p_holm:.3f}.")
    return out


def markdown(exp: OptimizerRuns) -> str:
    """The experiment as Markdown (docs/results.md's sub-section): provenance, conditions, verdicts, convergence."""
    m = exp.meta
    conv = convergence(exp)
    over = conv[~conv["ok"]]
    lines = [(provenance(m) + f"{m['n_runs']} runs, seeds {list(exp.prereg.seeds)}, "
              f"lr {exp.prereg.lr:g} (the showdown's, not tuned)."), "",
             "Test rsum at the best validation epoch (mean ± std over the seeds):", "",
             *_markdown_table(conditions_table(exp).reset_index()), "",
             f"The declared family ({len(exp.prereg.family)} comparisons, Holm's correction; `optimizer.verdicts`):",
             "", *_markdown_table(verdict_table(exp)), "", *reading(exp), "",
             (f"Convergence: at most {exp.prereg.max_last_epoch_share:.0%} of each condition's runs may select their "
              "last epoch; " + ("every condition is within it." if over.empty else "over the limit: " + "; ".join(
                  f"{r.condition}: {r.last} of {r.runs}" for r in over.itertuples()) + "."))]
    return "\n".join(lines)
