"""The tuned comparison of notebook 11: the four headline losses and the two learned-temperature ones, each given the
same validation budget.

The showdown (notebook 10) trains every loss at its library defaults: an *untuned* comparison,
which favours whichever loss's default happens to suit the data. Here Triplet, Triplet-SH,
NT-Xent and Unified each get five values of their main hyperparameter (:data:`GRID`: the
triplet margin, NT-Xent's temperature, the unified loss's scale gamma at its margin 0.2; each
list holds the loss's default), and so do CLIP's learned temperature and SigLIP (their learned parameters'
initial values: t' = log(1/tau), SigLIP's bias b; issue 36), trained at the showdown's features budget
(``cells.spec_for``) with the same five seeds. Every run is reported at its epoch of best
validation rsum, as in the showdown.

Selection is on **validation only** (:func:`selection`): per loss, the value with the highest
mean best-validation rsum over the seeds, among the values whose every run learned (a best
validation rsum above chance). The test split then reports the chosen value and the default
on the same seeds (:func:`comparison`), and each ordering of two losses, untuned and tuned, is
a paired 95% interval over the seeds (:func:`orderings`, ``vlr_lib.stats``).

Records: the full-size shapes run ships as ``vlr_lib/recorded/tuned-shapes-features-full``;
``run(spec, record=True)`` opens it, otherwise the cells are trained (cached per cell under
``<runs>/tuned-<data>-features-<fast|full>``, so an interrupted run resumes).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import pandas as pd
import torch

from .. import registry
from .._io import atomic_write_json, claim_run_folder
from ..metrics import chance_rsum
from ..paths import runs_dir
from ..stats import Comparison, paired_interval, verdicts
from ..train import make_objective, rank_and_world
from . import record as R
from . import cells
from .grid_search import float32_twins, writing

#: loss -> (its main hyperparameter, the values the validation budget covers; the default is among them).
GRID: dict[str, tuple[str, tuple[float, ...]]] = {
    "triplet_all": ("margin", (0.05, 0.1, 0.2, 0.3, 0.5)),
    "triplet_hardest": ("margin", (0.05, 0.1, 0.2, 0.3, 0.5)),
    "info_nce": ("temperature", (0.02, 0.05, 0.1, 0.2, 0.5)),
    "unified": ("gamma", (10.0, 20.0, 40.0, 60.0, 80.0)),
    # a learned parameter's value is its initial one: CLIP's t' = log(1/tau) starting at tau = 0.02 ... 0.2
    # (default 0.07, Radford et al.), so the question "does a learned tau beat the tuned fixed tau" gives the
    # learned one the same five tries
    "clip_learned": ("logit_scale", tuple(math.log(1 / tau) for tau in (0.2, 0.1, 0.07, 0.05, 0.02))),
    # SigLIP's knob is the bias's initial value, the one Zhai et al. discuss and ablate (Sec. 3.3 and the bias
    # ablation: b = -10 with t' = log 10 best, against b = 0 and others): it sets the prior a pair starts at,
    # sigma(t s + b) ~ 0 for b = -10, where the N - 1 negatives per positive dominate the first steps
    "siglip": ("logit_bias", (-20.0, -15.0, -10.0, -5.0, 0.0)),
}
SEEDS = (0, 1, 2, 3, 4)
FAST_SEEDS = (0, 1)
META_FILE = "tuned.json"


def grid_for(fast: bool) -> dict[str, tuple[str, tuple[float, ...]]]:
    """:data:`GRID`, or in fast mode (CI, seconds) each loss's smallest value, its default and its largest."""
    if not fast:
        return dict(GRID)
    return {loss: (p, tuple(sorted({min(v), default_of(loss, p), max(v)}))) for loss, (p, v) in GRID.items()}


class NoConfigurationLeft(ValueError):
    """Every value of a loss's sweep failed validation (no run above chance): nothing can be chosen."""


def spec_for(data: str = "shapes", fast: bool = False, seeds: Sequence[int] | None = None) -> cells.ShowdownSpec:
    """The showdown's features budget (``cells.spec_for``) with the comparison's seeds (5; fast mode 2)."""
    return cells.spec_for(data, fast, "features", seeds=tuple(seeds or (FAST_SEEDS if fast else SEEDS)))


def tunable(loss: str) -> tuple[str, ...]:
    """The hyperparameters of `loss` a sweep can tune: the registry's real-valued ones (``margin``, ``temperature``,
    ``gamma``...; of a learned one, ``logit_scale``, its initial value), never a choice (``reduction``) or ``topk``
    (no numeric default to compare a tuned value with). The registry owns what a loss takes; this is the one place
    that picks from it."""
    return tuple(name for name, h in registry.entry(loss).hyper.items() if h.kind == "float")


def _float32_problem(values: tuple[float, ...]) -> str | None:
    """Why `values` are not distinct finite training values: the trainer computes in float32, where a value may
    overflow, round to 0, or equal another (one run trained twice and reported as two values)."""
    if not values or not all(math.isfinite(v) for v in values):
        return "must be finite numbers"
    as32 = [float(torch.tensor(v, dtype=torch.float32)) for v in values]
    if not all(math.isfinite(v) for v in as32):
        return "overflow float32 (the trainer computes in float32)"
    if any(v != 0 and w == 0 for v, w in zip(values, as32)):
        return "round to 0 in float32 (the trainer computes in float32)"
    if len(set(values)) != len(values) or float32_twins(values) is not None:
        return "must be distinct, also in float32 (the trainer computes in float32: two equal values are one run)"
    return None


def check_grid(grid: Mapping[str, tuple[str, Sequence[float]]]) -> dict[str, tuple[str, tuple[float, ...]]]:
    """`grid` checked: known losses, each naming one of its hyperparameters (:func:`tunable`) with distinct finite
    values (in float32 too, as the trainer computes) in the registry's range of the hyperparameter, the default
    among them (the untuned row is the default's)."""
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError(f"grid must map loss names to (parameter, values), got {grid!r}")
    out = {}
    for loss, spec in grid.items():
        if not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise ValueError(f"grid[{loss!r}] must be (parameter, values), got {spec!r}")
        param, values = spec
        if param not in tunable(loss):
            raise ValueError(f"{loss} has no hyperparameter {param!r}: one of {tunable(loss)}")
        values = tuple(float(v) for v in values)
        problem = _float32_problem(values)
        if problem:
            raise ValueError(f"the values of {loss}'s {param} {problem}, got {values!r}")
        h = registry.entry(loss).hyper[param]
        outside = [v for v in values if (h.low is not None and v < h.low) or (h.high is not None and v > h.high)]
        if outside:
            low, high = ("-inf" if h.low is None else f"{h.low:g}"), ("inf" if h.high is None else f"{h.high:g}")
            raise ValueError(f"the values of {loss}'s {param} must lie in its sensible range [{low}, {high}] "
                             f"(the loss registry's), got {outside[0]:g}")
        for v in values:  # each value as the trainer checks it (one evaluation in float32), before anything trains
            try:
                make_objective(loss, {param: v}).check(8)
            except FloatingPointError as err:
                raise ValueError(str(err)) from None
        if default_of(loss, param) not in values:
            raise ValueError(f"the values of {loss}'s {param} must include its default {default_of(loss, param):g} "
                             f"(the untuned row), got {values!r}")
        out[loss] = (param, values)
    return out


def default_of(loss: str, param: str) -> float:
    """The library default of `loss`'s parameter `param` (its registry entry's)."""
    return float(registry.entry(loss).defaults()[param])


def contestants(grid: Mapping = GRID) -> list[dict]:
    """One grid configuration per (loss, value): ``{"loss": "info_nce", "temperature": 0.05}``."""
    return [{"loss": loss, param: v} for loss, (param, values) in check_grid(grid).items() for v in values]


def out_dir(spec: cells.ShowdownSpec) -> Path:
    return runs_dir() / f"tuned-{spec.data}-{spec.setting}-{'fast' if spec.fast else 'full'}"


def record_key(spec: cells.ShowdownSpec, grid: Mapping = GRID) -> dict:
    """The settings the record is found by: the budget (the spec) and the contestants."""
    return {"experiment": "tuned", "spec": spec.key(),
            "configs": [registry.resolved_config(c) for c in contestants(grid)]}


def run(spec: cells.ShowdownSpec, grid: Mapping | None = None, command: str = "", out: Path | None = None,
        record: bool = False, progress: bool = False) -> cells.Showdown:
    """Every (loss, value) x seed of `grid` (default :func:`grid_for` the spec's size) at `spec`'s budget: with
    `record`, the shipped record when it matches, else trained now (finished cells are read from ``out/cells``).
    ``$VLR_RECORD`` set: also kept as a record."""
    grid = check_grid(grid or grid_for(spec.fast))
    if len(spec.seeds) < 2:
        raise ValueError(f"seeds must hold at least 2 seeds (a paired interval needs pairs), got {spec.seeds!r}")
    out = Path(out or out_dir(spec))
    key = record_key(spec, grid)
    if record and (rec := R.read(out.name, key)) is not None:
        return cells.opened(rec)
    claim_run_folder(out, mark=False)
    result, data, callback, wall = cells.train_cells(spec, contestants(grid), out, progress)
    meta = {**cells.race_meta(spec, result, data, callback, wall, command or "vlr_lib.experiments.tuned.run(spec_for(...))"),
            "chance_rsum_val": chance_rsum(data.val[2])}
    if rank_and_world()[0] == 0:
        with writing(out):
            atomic_write_json(out / META_FILE, meta)
        R.keep_grid(out.name, key, result.runs, out, command=meta["command"], wall_seconds=meta["wall_seconds"],
                    title=f"the tuned comparison ({spec.data}, {'fast' if spec.fast else 'full'} size)", meta=meta)
    return cells.Showdown(result.runs, meta, out, reused=False)


#: Issue 36's question, declared before the runs: does a learned temperature, at its paper's initialisation and
#: untuned (the reason to learn it), beat NT-Xent at its tuned fixed tau? And SigLIP's learned t and b? Each is
#: (a, a's row, b, b's row) of the test metric, paired by seed; one family of its own, Holm-corrected together
#: (:func:`learned_vs_tuned`). The tuned - tuned orderings of the same losses are :func:`orderings`' family.
LEARNED_VS_TUNED: tuple[tuple[str, str, str, str], ...] = (
    ("clip_learned", "untuned", "info_nce", "tuned"),
    ("siglip", "untuned", "info_nce", "tuned"),
)

#: The cell the record's check re-trains (``vlr_lib.experiments.recheck``): a value none of the other records trains.
CHECKED = {"loss": "info_nce", "temperature": 0.05}


def recorded_and_again(epochs: int | None = None, seed: int = 0) -> tuple[list[float], list[float]]:
    """The record's per-epoch validation rsums of :data:`CHECKED` (seed `seed`) and the same cell re-trained from
    scratch on the CPU (its first `epochs`; the learning rate still decays at the record's epoch)."""
    spec = replace(spec_for(), device="cpu")
    rec = R.read(out_dir(spec).name, record_key(spec))
    if rec is None:
        raise FileNotFoundError(f"no record of the tuned comparison matches the code: {R.REGENERATE}")
    history = R.cell_history(R.cells_of(rec.tables), CHECKED, seed)
    if epochs is not None:
        spec, history = replace(spec, epochs=epochs), history[:epochs]
    kwargs = {k: v for k, v in CHECKED.items() if k != "loss"}
    again = cells.retrain(spec, CHECKED["loss"], seed, loss_kwargs=kwargs)
    return [r["rsum"] for r in history], [r["rsum"] for r in again.history]


# --------------------------------------------------------------------------- reading


def _value_column(runs: pd.DataFrame, loss: str, param: str) -> pd.Series:
    rows = runs[runs["loss"] == loss]
    if param not in rows:
        raise ValueError(f"runs has no column {param!r} for {loss}: not a table of this comparison")
    return rows[param].astype(float)


def selection(runs: pd.DataFrame, chance_val: float, grid: Mapping = GRID) -> pd.DataFrame:
    """Per loss and value: the mean and std over seeds of the best validation rsum, ``learned`` (every run above
    `chance_val`) and ``chosen`` (the learned value with the highest mean). A loss with no learned value raises
    :class:`NoConfigurationLeft`."""
    rows = []
    for loss, (param, values) in check_grid(grid).items():
        part = runs[runs["loss"] == loss].assign(value=_value_column(runs, loss, param))
        stats = []
        for v in values:
            val = part.loc[(part["value"] - v).abs() < 1e-12, "best_rsum"].astype(float)
            learned = len(val) > 0 and bool((val > chance_val).all()) and bool(val.notna().all())
            stats.append({"loss": loss, "parameter": param, "value": v, "default": v == default_of(loss, param),
                          "n": len(val), "val_mean": val.mean(), "val_std": val.std(ddof=1), "learned": learned})
        left = [s for s in stats if s["learned"]]
        if not left:
            raise NoConfigurationLeft(f"no value of {loss}'s {param} is left after validation: no value had every "
                                      f"run above chance (validation rsum {chance_val:.1f}); try other values")
        best = max(left, key=lambda s: s["val_mean"])
        rows += [{**s, "chosen": s is best} for s in stats]
    return pd.DataFrame(rows)


def _test_by_seed(runs: pd.DataFrame, loss: str, param: str, value: float, metric: str) -> pd.Series:
    part = runs[(runs["loss"] == loss) & ((_value_column(runs, loss, param) - value).abs() < 1e-12)]
    return part.set_index("seed")[metric].astype(float).sort_index()


def comparison(runs: pd.DataFrame, chosen: pd.DataFrame, metric: str = "sel_rsum") -> pd.DataFrame:
    """Per loss: the test `metric` (at the best validation epoch) at its default and at its chosen value, over the
    same seeds, and the paired 95% interval of tuned - untuned."""
    rows = []
    for loss, part in chosen.groupby("loss", sort=False):
        param = part["parameter"].iloc[0]
        default = float(part.loc[part["default"], "value"].iloc[0])
        best = float(part.loc[part["chosen"], "value"].iloc[0])
        a, b = _test_by_seed(runs, loss, param, best, metric), _test_by_seed(runs, loss, param, default, metric)
        delta, low, high = paired_interval(a.to_numpy(), b.reindex(a.index).to_numpy())
        rows.append({"loss": loss, "label": registry.label(loss), "parameter": param, "default": default,
                     "untuned": b.mean(), "chosen": best, "tuned": a.mean(), "delta": delta, "ci_low": low,
                     "ci_high": high, "n_seeds": len(a)})
    return pd.DataFrame(rows)


def orderings(runs: pd.DataFrame, chosen: pd.DataFrame, metric: str = "sel_rsum") -> pd.DataFrame:
    """Every pair of losses, untuned (both at their defaults) and tuned (both at their chosen values): the mean
    paired difference a - b of the test `metric` over seeds, its uncorrected 95% interval, ``p`` its paired t test,
    and ``separated``: told apart by the test Holm-corrected over every row (untuned and tuned together, one
    family: ``vlr_lib.stats.verdicts``, ``p_holm``); ``uncorrected``: whether the interval alone excludes 0."""
    picks = {}
    for loss, part in chosen.groupby("loss", sort=False):
        param = part["parameter"].iloc[0]
        picks[loss] = {kind: _test_by_seed(runs, loss, param, float(part.loc[part[col], "value"].iloc[0]), metric)
                       for kind, col in (("untuned", "default"), ("tuned", "chosen"))}
    rows, comps = [], []
    for a, b in combinations(picks, 2):
        for kind in ("untuned", "tuned"):
            x, y = picks[a][kind], picks[b][kind]
            comps.append(Comparison(f"{a} - {b} ({kind})", x.to_numpy(), y.reindex(x.index).to_numpy()))
            rows.append({"a": a, "b": b, "comparison": f"{registry.label(a)} − {registry.label(b)}", "kind": kind})
    if not comps:
        return pd.DataFrame(rows, columns=["a", "b", "comparison", "kind", "delta", "ci_low", "ci_high", "p",
                                           "p_holm", "separated", "uncorrected"])
    v = verdicts(comps, family=[c.name for c in comps])
    return pd.DataFrame(rows).assign(delta=v["delta"], ci_low=v["low"], ci_high=v["high"], p=v["p"],
                                     p_holm=v["p_holm"], separated=(v["verdict"] != "not told apart").to_numpy(),
                                     uncorrected=(v["uncorrected"] != "not told apart").to_numpy())


def learned_vs_tuned(runs: pd.DataFrame, chosen: pd.DataFrame, metric: str = "sel_rsum") -> pd.DataFrame:
    """:data:`LEARNED_VS_TUNED` read from the runs: per declared comparison, a at its row (``untuned``: its default,
    ``tuned``: its chosen value) minus b at its row, the test `metric` paired by seed, its uncorrected 95% interval,
    ``p``, ``p_holm`` (Holm over the declared family, ``vlr_lib.stats.verdicts``) and ``verdict`` ("holds": a ahead,
    "reverses", "cannot tell"). Only the comparisons whose two losses were trained; none: an empty table."""
    rows, comps = [], []
    for a, a_row, b, b_row in LEARNED_VS_TUNED:
        if not {a, b} <= set(chosen["loss"]):
            continue
        x, y = (_pick(runs, chosen, loss, row, metric) for loss, row in ((a, a_row), (b, b_row)))
        name = f"{a} ({a_row}) - {b} ({b_row})"
        comps.append(Comparison(name, x.to_numpy(), y.reindex(x.index).to_numpy(), expected=1))
        rows.append({"a": a, "a_row": a_row, "b": b, "b_row": b_row, "name": name, "mean_a": x.mean(),
                     "mean_b": y.mean(),
                     "comparison": f"{registry.label(a)} ({a_row}) − {registry.label(b)} ({b_row})"})
    columns = ["a", "a_row", "b", "b_row", "name", "mean_a", "mean_b", "comparison", "n", "delta", "low", "high", "p",
               "p_holm", "verdict", "uncorrected"]
    if not comps:
        return pd.DataFrame(rows, columns=columns)
    v = verdicts(comps, family=[c.name for c in comps]).set_index("name")
    out = pd.DataFrame(rows)
    for col in ("n", "delta", "low", "high", "p", "p_holm", "verdict", "uncorrected"):
        out[col] = v.loc[out["name"], col].to_numpy()
    return out[columns]


def _pick(runs: pd.DataFrame, chosen: pd.DataFrame, loss: str, row: str, metric: str) -> pd.Series:
    """`loss`'s test `metric` by seed at its default (`row` "untuned") or its chosen value ("tuned")."""
    part = chosen[chosen["loss"] == loss]
    value = float(part.loc[part["default" if row == "untuned" else "chosen"], "value"].iloc[0])
    return _test_by_seed(runs, loss, part["parameter"].iloc[0], value, metric)


def tables(race: cells.Showdown, grid: Mapping | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(selection, comparison, orderings) of a finished comparison (its stored chance level on validation); `grid`
    defaults to :func:`grid_for` the race's size."""
    grid = grid or grid_for(bool(race.meta.get("spec", {}).get("fast")))
    chosen = selection(race.runs, race.meta["chance_rsum_val"], grid)
    return chosen, comparison(race.runs, chosen), orderings(race.runs, chosen)


# --------------------------------------------------------------------------- Markdown


def _value(loss: str, param: str, v: float) -> str:
    """A swept value as the table shows it: CLIP's t' with the temperature it starts at, tau = e^{-t'}."""
    return f"{v:.3g} (τ {math.exp(-v):.2g})" if (loss, param) == ("clip_learned", "logit_scale") else f"{v:g}"


def _interval(delta: float, low: float, high: float) -> str:
    return f"{delta:+.1f} [{low:+.1f}, {high:+.1f}]"


def frames(race: cells.Showdown, grid: Mapping | None = None) -> tuple[str, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """What the comparison shows: a paragraph (Markdown) on what was trained and how the value is chosen, then the
    validation sweep, the test table and every ordering as tables of formatted text (a notebook displays them;
    :func:`markdown` writes them as Markdown)."""
    from ..report.markdown import last_epoch_share, training_line

    grid = grid or grid_for(bool(race.meta["spec"].get("fast")))
    chosen, table, order = tables(race, grid)
    spec, n_seeds = race.meta["spec"], len(race.meta["spec"]["seeds"])
    intro = (f"Trained: {training_line(spec)}. {budget_line(grid, bool(spec.get('fast')))} Each loss's "
             f"value is chosen on **validation** (mean best-validation rsum over the {n_seeds} seeds; chance "
             f"{race.meta['chance_rsum_val']:.1f}); the test split reports the chosen value and the default. "
             f"{len(race.runs)} runs; {last_epoch_share(race.runs):.0%} of them select their last epoch. "
             "A value chosen at the edge of its range may have a better neighbour outside it: the budget is "
             f"{'equal' if equal_budget(grid) else 'not equal'}, not exhaustive.")
    sweep = []
    for loss, part in chosen.groupby("loss", sort=False):
        best = part.loc[part["chosen"], "value"].iloc[0]
        edge = " (edge of the range)" if best in (part["value"].min(), part["value"].max()) else ""
        sweep.append({"loss": registry.label(loss), "parameter": part["parameter"].iloc[0],
                      "validation rsum per value (mean over seeds)": ", ".join(
                          f"{_value(loss, p, v)}: {m:.1f}" + ("" if ok else " (not learned)")
                          for p, v, m, ok in zip(part["parameter"], part["value"], part["val_mean"], part["learned"])),
                      "chosen": f"{_value(loss, part['parameter'].iloc[0], best)}{edge}",
                      "default": _value(loss, part["parameter"].iloc[0], part.loc[part["default"], "value"].iloc[0])})
    shown = lambda r, v: f"({r.parameter} {_value(r.loss, r.parameter, v)})"  # noqa: E731
    test = pd.DataFrame([{"loss": r.label, "untuned (default)": f"{r.untuned:.1f} {shown(r, r.default)}",
                          "tuned (chosen)": f"{r.tuned:.1f} {shown(r, r.chosen)}",
                          "tuned − untuned [95% CI]": _interval(r.delta, r.ci_low, r.ci_high)}
                         for r in table.itertuples()])
    rows = []
    for comp, part in order.groupby("comparison", sort=False):
        row = {"a − b": comp}
        for kind in ("untuned", "tuned"):
            r = part[part["kind"] == kind].iloc[0]
            text = _interval(r["delta"], r["ci_low"], r["ci_high"])
            row[kind] = (f"{text} told apart (Holm)" if r["separated"] else
                         f"{text} excludes 0 alone" if r["uncorrected"] else text)
        rows.append(row)
    return intro, pd.DataFrame(sweep), test, pd.DataFrame(rows)


def equal_budget(grid: Mapping) -> bool:
    """Every loss of `grid` took as many values as the others."""
    return len({len(values) for _, values in check_grid(grid).values()}) == 1


def budget_line(grid: Mapping, fast: bool) -> str:
    """What each loss's sweep was, in words: one count when every loss took as many values, else each loss's; and the
    losses whose values are not the comparison's own (:func:`grid_for`: given by hand, e.g. ``--values``)."""
    grid, own = check_grid(grid), grid_for(fast)
    counts = {registry.label(loss): len(values) for loss, (_, values) in grid.items()}
    if equal_budget(grid):
        line = f"Each loss's main hyperparameter took {next(iter(counts.values()))} values."
    else:
        line = ("The losses' main hyperparameters took different numbers of values ("
                + ", ".join(f"{label} {n}" for label, n in counts.items()) + "): a loss with more values had more "
                "chances on validation.")
    given = [registry.label(loss) for loss in grid if own.get(loss) != grid[loss]]
    if given:
        line += f" The values of {', '.join(given)} were given by hand, not the comparison's own."
    return line


def _markdown_table(frame: pd.DataFrame) -> list[str]:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return lines + ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]


def markdown(race: cells.Showdown, grid: Mapping | None = None) -> str:
    """The comparison as Markdown (the command line's and docs/results.md's block): :func:`frames` as text."""
    intro, sweep, test, order = frames(race, grid)
    n_seeds = len(race.meta["spec"]["seeds"])
    lines = [intro, "", *_markdown_table(sweep), "",
             f"Test rsum at each run's best validation epoch, mean over the {n_seeds} seeds; tuned − untuned is "
             "paired by seed with its 95% paired t interval:", "", *_markdown_table(test), "",
             "Every ordering of two losses, untuned and tuned (test rsum a − b, paired by seed, uncorrected 95% "
             "interval):", "", *_markdown_table(order), "",
             f"{2 * len(order)} intervals are read here: at 95% each, about {0.05 * 2 * len(order):.1f} of them "
             "would exclude 0 by chance alone if no loss differed. So a pair is *told apart* only when the paired t "
             f"test survives Holm's correction over all {2 * len(order)} (`vlr_lib.stats`); an interval that "
             "excludes 0 alone is a lead, not a finding."]
    learned = learned_vs_tuned(race.runs, tables(race, grid)[0])
    if len(learned):
        lines += ["", "Does a learned temperature, untuned at its paper's initialisation, beat NT-Xent at its "
                  "tuned τ? (test rsum a − b, paired by seed, uncorrected 95% interval; the verdict from Holm's "
                  f"correction over these {len(learned)}, declared before the runs: `tuned.LEARNED_VS_TUNED`)", "",
                  *_markdown_table(pd.DataFrame([{"a − b": r.comparison, "a − b [95% CI]": _interval(r.delta, r.low,
                                                  r.high), "Holm p": f"{r.p_holm:.3f}", "verdict": r.verdict}
                                                 for r in learned.itertuples()]))]
    return "\n".join(lines)
