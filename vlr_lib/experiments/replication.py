"""Chapter 13's replication: the pre-registered, tuned comparison of the fixed list of losses on new seeds.

Everything it trains is declared in its pre-registration (``vlr_lib/preregistration/replication.toml``, read by
``vlr_lib.experiments.preregistration``); this module adds no number of its own. The protocol, Musgrave,
Belongie & Lim's (*A Metric Learning Reality Check*, ECCV 2020), per setting (the showdown's two, at its
full-size schedule, ``cells.spec_for``):

1. **tuning** -- every loss trains its 3 x 3 grid of learning rate x main hyperparameter on the tuning seed; a
   point is *learned* when every run of it ends above chance on validation, and the chosen point has the highest
   mean best validation rsum among the learned ones (:func:`choose`);
2. **extension** -- a choice on an edge of an axis trains that axis's declared extension value once (the other
   axis at its choice), and the choice is made again over every point: every loss gets the same budget, 9 + at
   most 2 validation runs (:func:`extension_points`);
3. **final** -- each loss at its chosen point on the final seeds; each reports its test rsum at its epoch of best
   validation rsum (``sel_rsum``), and the declared comparisons are paired by seed and read through
   ``vlr_lib.stats.verdicts`` over the declared family (Holm). A comparison outside the family is refused as
   exploratory (:func:`compare`);
4. **optimizer** (when the pre-registration declares it; chapter 13's does not, for want of machine time) --
   chapter 12's experiment (e) on the final seeds: a warm-up, then the switch with Adam fresh or carried over.
   Chapter 13's optimizer experiment has its own, later file instead (``optimizer.toml``, read and kept by
   ``vlr_lib.experiments.optimizer``).

Convergence is checked per loss and setting (:func:`convergence`). Cells are cached per run under
``<runs>/replication-<data>-<part>-<fast|full>`` (a part is a setting or "optimizer"), so an interrupted run
resumes and the parts can train in separate processes (:func:`train_part`). The record
(``vlr_lib/recorded/replication-shapes-full``) stores the pre-registration's sha256, text and git commit and the
date of the runs; :func:`run` refuses a record made from another version of the file (:class:`StaleRecord`).
Fast mode (the tests, CI) is a smoke test of the protocol at the showdown's fast size: the main hyperparameters
tuned at the middle learning rate, the first 2 final seeds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .. import registry
from ..metrics import chance_rsum
from ..paths import runs_dir
from ..stats import Comparison, paired_interval
from ..stats import verdicts as holm_verdicts
from ..train import rank_and_world
from . import preregistration as P
from . import record as R
from . import cells as S

NAME = "replication-shapes-full"
FAST_SEEDS = 2  #: fast mode's final seeds: the first two declared
PHASES = ("tuning", "extension", "final", "optimizer")
REMAKE = "make record --only 13 (python -m vlr_lib record --only 13)"


class StaleRecord(RuntimeError):
    """The shipped record was made from another version of the pre-registration file."""


@dataclass
class Replication:
    """A finished replication: one row per run (``runs``), one per run and epoch (``epochs``), how it was made."""

    runs: pd.DataFrame
    epochs: pd.DataFrame
    meta: dict
    prereg: P.Preregistration
    record: R.Record | None = None


# --------------------------------------------------------------------------- the plan


def spec_of(prereg: P.Preregistration, setting: str, fast: bool, seeds=None, device: str | None = None) -> S.ShowdownSpec:
    """The showdown's schedule of `setting` (full or fast size) with `seeds` (default the final seeds)."""
    return S.spec_for(prereg.data, fast, setting, seeds=tuple(seeds or final_seeds(prereg, fast)), device=device)


def final_seeds(prereg: P.Preregistration, fast: bool) -> tuple[int, ...]:
    return prereg.seeds[:FAST_SEEDS] if fast else prereg.seeds


def lr_axis(prereg: P.Preregistration, setting: str, fast: bool) -> tuple[tuple[float, ...], tuple[float, float] | None]:
    """The learning rates the tuning covers and their extension; fast mode (a smoke test of the protocol, seconds)
    tunes the main hyperparameter at the middle learning rate only, with no extension of that axis."""
    lrs, ext = prereg.lr_grid(setting)
    return ((lrs[1],), None) if fast else (lrs, ext)


def parts(prereg: P.Preregistration) -> tuple[str, ...]:
    """What trains apart: each setting, then the optimizer experiment when one is declared."""
    return (*prereg.settings, *(("optimizer",) if prereg.conditions else ()))


def out_dir(prereg: P.Preregistration, part: str, fast: bool) -> Path:
    return runs_dir() / f"replication-{prereg.data}-{part}-{'fast' if fast else 'full'}"


def config(grid: P.LossGrid, lr: float, value: float) -> dict:
    """The grid cell of `grid`'s loss at (lr, value): its fixed parameters, its main one and the learning rate."""
    return {"loss": grid.loss, **dict(grid.fixed), grid.parameter: float(value), "lr": float(lr)}


def optimizer_config(prereg: P.Preregistration, cond: P.Condition, spec: S.ShowdownSpec) -> dict:
    """A condition of the optimizer experiment as a grid cell (longer runs decay at the same share of the run)."""
    out = {"loss": prereg.optimizer_loss, "optimizer_at_switch": cond.optimizer_at_switch}
    if cond.grad_clip is not None:
        out["grad_clip"] = cond.grad_clip
    if cond.length > 1:
        out["epochs"] = spec.epochs * cond.length
        out["lr_decay_epoch"] = None if spec.lr_decay_epoch is None else spec.lr_decay_epoch * cond.length
    return out


# --------------------------------------------------------------------------- selection (pure: the record re-derives it)


def points(tuning: pd.DataFrame, chance: float) -> pd.DataFrame:
    """Per (lr, value) of one loss's tuning runs: n, the mean best validation rsum, ``learned`` (every run above
    `chance`), sorted by lr then value."""
    rows = []
    for (lr, value), part in tuning.groupby(["lr", "value"], sort=True):
        val = part["best_rsum"].astype(float)
        rows.append({"lr": float(lr), "value": float(value), "n": len(val), "val_mean": float(val.mean()),
                     "learned": bool(val.notna().all() and (val > chance).all())})
    return pd.DataFrame(rows, columns=["lr", "value", "n", "val_mean", "learned"])


def choose(pts: pd.DataFrame) -> tuple[float, float] | None:
    """The learned point with the highest mean validation rsum (the first in (lr, value) order on ties); None when
    no point learned."""
    left = pts[pts["learned"]]
    if left.empty:
        return None
    best = left.loc[left["val_mean"].idxmax()]
    return float(best["lr"]), float(best["value"])


def extension_points(grid: P.LossGrid, lrs: tuple[float, ...], lr_ext: tuple[float, float] | None,
                     choice: tuple[float, float]) -> list[tuple[float, float]]:
    """The pre-declared extension of a grid choice: per axis whose choice is an edge of its three values, the
    extension value beyond that edge, with the other axis at its choice (`lr_ext` None: the lr is not extended)."""
    lr, value = choice
    out = []
    for axis, values, ext in ((0, lrs, lr_ext), (1, grid.values, grid.extension)):
        if ext is None:
            continue
        here = choice[axis]
        beyond = ext[0] if here == values[0] else ext[1] if here == values[-1] else None
        if beyond is not None:
            out.append((beyond, value) if axis == 0 else (lr, beyond))
    return out


def _tuning_rows(runs: pd.DataFrame, setting: str, loss: str, phases=("tuning", "extension")) -> pd.DataFrame:
    return runs[(runs["setting"] == setting) & (runs["loss"] == loss) & runs["phase"].isin(phases)]


def selection(rep: Replication, setting: str) -> pd.DataFrame:
    """Every loss's tuning in `setting`: one row per point tried (``kind`` grid or extension), its mean validation
    rsum and whether it learned, ``chosen`` (the final choice), and the runs it spent. The extension trained must
    be the one the rule asks for: otherwise an error (a record that does not follow its pre-registration)."""
    prereg, chance = rep.prereg, rep.meta["chance_rsum_val"][setting]
    lrs, lr_ext = lr_axis(prereg, setting, bool(rep.meta.get("fast")))
    rows = []
    for grid in prereg.losses:
        grid_pts = points(_tuning_rows(rep.runs, setting, grid.loss, ("tuning",)), chance)
        first = choose(grid_pts)
        if first is None:
            raise ValueError(f"no point of {grid.loss}'s grid learned in the {setting} setting (validation rsum "
                             f"above chance {chance:.1f} on every run): nothing can be chosen")
        wanted = extension_points(grid, lrs, lr_ext, first)
        ext_pts = points(_tuning_rows(rep.runs, setting, grid.loss, ("extension",)), chance)
        got = list(zip(ext_pts["lr"], ext_pts["value"]))
        if sorted(got) != sorted(wanted):
            raise ValueError(f"the extension of {grid.loss} in the {setting} setting trained {got}, the "
                             f"pre-registration's rule asks for {wanted}: the runs do not follow {prereg.path.name}")
        every = pd.concat([grid_pts.assign(kind="grid"), ext_pts.assign(kind="extension")], ignore_index=True)
        final = choose(every.sort_values(["lr", "value"], ignore_index=True))
        for r in every.itertuples():
            rows.append({"setting": setting, "loss": grid.loss, "label": registry.label(grid.loss),
                         "parameter": grid.parameter, "lr": r.lr, "value": r.value, "kind": r.kind, "n": r.n,
                         "val_mean": r.val_mean, "learned": r.learned, "chosen": (r.lr, r.value) == final})
    return pd.DataFrame(rows)


def choices(rep: Replication, settings: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Per setting and loss: the chosen learning rate and value, whether the choice still sits on an edge of
    everything tried (after the extension), and the validation runs spent (at most the budget)."""
    rows = []
    for setting in settings or rep.prereg.settings:
        sel = selection(rep, setting)
        for loss, part in sel.groupby("loss", sort=False):
            best = part[part["chosen"]].iloc[0]
            edges = [name for name, col in (("lr", "lr"), (best["parameter"], "value"))  # an axis of one value has none
                     if part[col].nunique() > 1 and best[col] in (part[col].min(), part[col].max())]
            spent = int(part["n"].sum())
            rows.append({"setting": setting, "loss": loss, "label": best["label"], "parameter": best["parameter"],
                         "lr": best["lr"], "value": best["value"], "val_mean": best["val_mean"],
                         "edge": ", ".join(edges), "extended": bool((part["kind"] == "extension").any()),
                         "runs": spent, "within_budget": spent <= rep.prereg.budget * len(rep.prereg.tuning_seeds)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- training


def _slim(runs: pd.DataFrame, phase: str, setting: str, param_of: dict[str, str] | None = None,
          condition_of: dict[str, str] | None = None) -> pd.DataFrame:
    """The runs-table columns the replication keeps, with its phase, setting and (optimizer) condition."""
    out = pd.DataFrame({
        "phase": phase, "setting": setting,
        "condition": runs["key"].map(condition_of) if condition_of else None,
        "loss": runs["loss"],
        "parameter": runs["loss"].map(param_of) if param_of else None,
        "value": [float(r[param_of[r["loss"]]]) if param_of else float("nan") for _, r in runs.iterrows()],
        "lr": runs["lr"].astype(float), "epochs": runs["epochs"].astype(int), "seed": runs["seed"].astype(int),
        "best_rsum": runs["best_rsum"].astype(float), "best_epoch": runs["best_epoch"].astype(int),
        "sel_rsum": runs["sel_rsum"].astype(float), "key": runs["key"]})
    return out


def _aliased(prereg: P.Preregistration, runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with each ``same_as`` loss's rows added: its twin's runs (the same cells) under its own name."""
    twins = [runs[runs["loss"] == g.same_as].assign(loss=g.loss) for g in prereg.losses if g.same_as]
    return pd.concat([runs, *twins], ignore_index=True) if twins else runs


def _train(spec: S.ShowdownSpec, configs: list[dict], out: Path, progress: bool):
    result, data, _, wall = S.train_cells(spec, configs, out, progress)
    return result.runs, chance_rsum(data.val[2]), wall


def train_setting(prereg: P.Preregistration, setting: str, fast: bool, progress: bool = False,
                  device: str | None = None) -> tuple[pd.DataFrame, float, float]:
    """Tuning, extension and final runs of `setting` (cached cells are read, not trained): (runs, chance rsum on
    validation, wall seconds)."""
    out = out_dir(prereg, setting, fast)
    lrs, lr_ext = lr_axis(prereg, setting, fast)
    params = {g.loss: g.parameter for g in prereg.losses}
    tune = spec_of(prereg, setting, fast, prereg.tuning_seeds, device)
    trained = [g for g in prereg.losses if not g.same_as]
    grid_configs = [config(g, lr, v) for g in trained for lr in lrs for v in g.values]
    runs, chance, wall = _train(tune, grid_configs, out, progress)
    parts = [_aliased(prereg, _slim(runs, "tuning", setting, params))]
    probe = Replication(parts[0], pd.DataFrame(), {"chance_rsum_val": {setting: chance}, "fast": fast}, prereg)
    ext = []
    for g in trained:
        first = choose(points(_tuning_rows(probe.runs, setting, g.loss), chance))
        if first is not None:
            ext += [config(g, lr, v) for lr, v in extension_points(g, lrs, lr_ext, first)]
    if ext:
        runs, _, w = _train(tune, ext, out, progress)
        parts.append(_aliased(prereg, _slim(runs, "extension", setting, params)))
        wall += w
    probe.runs = pd.concat(parts, ignore_index=True)
    chosen = choices(probe, (setting,))
    finals = [config(prereg.grid_of(r.loss), r.lr, r.value) for r in chosen.itertuples()
              if not prereg.grid_of(r.loss).same_as]
    runs, _, w = _train(spec_of(prereg, setting, fast, device=device), finals, out, progress)
    parts.append(_aliased(prereg, _slim(runs, "final", setting, params)))
    return pd.concat(parts, ignore_index=True), chance, wall + w


def train_optimizer(prereg: P.Preregistration, fast: bool, progress: bool = False,
                    device: str | None = None) -> tuple[pd.DataFrame, float, float]:
    """The optimizer experiment's runs on the final seeds: (runs, chance rsum on validation, wall seconds)."""
    spec = spec_of(prereg, prereg.optimizer_setting, fast, device=device)
    configs = [optimizer_config(prereg, c, spec) for c in prereg.conditions]
    runs, chance, wall = _train(spec, configs, out_dir(prereg, "optimizer", fast), progress)
    keys = {}
    for cond in prereg.conditions:
        want = (cond.optimizer_at_switch, cond.grad_clip or spec.grad_clip, spec.epochs * cond.length)
        for r in runs.itertuples():
            clip = None if pd.isna(r.grad_clip) else float(r.grad_clip)
            if (r.optimizer_at_switch, clip, int(r.epochs)) == want:
                keys[r.key] = cond.name
    if len(keys) != len(runs):
        raise RuntimeError("every run of the optimizer experiment must be exactly one of its conditions")
    return _slim(runs, "optimizer", prereg.optimizer_setting, condition_of=keys), chance, wall


def train_part(prereg: P.Preregistration, part: str, fast: bool, progress: bool = False,
               device: str | None = None) -> tuple[pd.DataFrame, float, float]:
    """One part of :func:`parts` (a setting, or "optimizer") trained or read from its cells."""
    if part == "optimizer" and prereg.conditions:
        return train_optimizer(prereg, fast, progress, device)
    if part not in prereg.settings:
        raise ValueError(f"part must be one of {parts(prereg)}, got {part!r}")
    return train_setting(prereg, part, fast, progress, device)


# --------------------------------------------------------------------------- the record


def record_key(prereg: P.Preregistration, fast: bool = False) -> dict:
    """What the record is found by: the pre-registration's hash and the schedules of its settings."""
    return {"experiment": "replication", "preregistration": prereg.sha256,
            "specs": {s: spec_of(prereg, s, fast).key() for s in sorted(set(prereg.settings))}}


def preregistered_record(name: str, prereg, key: dict, remake: str) -> R.Record | None:
    """The shipped record `name` of a pre-registration (its file's sha256 in the record's meta) when its settings
    are `key`, else None; a record made from another version of the file is refused (:class:`StaleRecord`, naming
    the file and `remake`, the command that makes it again)."""
    rec = R.read(name, None)
    if rec is None:
        return None
    made_from = rec.manifest["meta"].get("preregistration", {})
    if made_from.get("sha256") != prereg.sha256:
        raise StaleRecord(f"the record {name} was made from another version of {prereg.path} (sha256 "
                          f"{str(made_from.get('sha256'))[:12]}..., the file's is {prereg.sha256[:12]}...): it is "
                          f"stale; make it again with {remake}")
    return R.read(name, key)


def recorded(prereg: P.Preregistration) -> Replication | None:
    """The shipped record of `prereg`, else None (no record, or one of other schedules); a record made from
    another version of the pre-registration file is refused (:class:`StaleRecord`, naming the file)."""
    rec = preregistered_record(NAME, prereg, record_key(prereg), REMAKE)
    if rec is None:
        return None
    return Replication(pd.DataFrame(rec.tables["runs"]), pd.DataFrame(rec.tables["epochs"]), rec.manifest["meta"],
                       prereg, rec)


def _epochs(prereg: P.Preregistration, frames: dict[str, pd.DataFrame], fast: bool) -> pd.DataFrame:
    """One row per run and epoch: validation and test rsum, seconds (from the parts' cells)."""
    rows = []
    for part, runs in frames.items():
        for cell in R.grid_cells(out_dir(prereg, part, fast), runs["key"].unique()):
            for i, r in enumerate(cell["history"], 1):
                rows.append({"key": cell["key"], "epoch": i, "rsum": r.get("rsum"),
                             "test_rsum": r.get("test", {}).get("rsum"), "seconds": r.get("seconds")})
    return pd.DataFrame(rows)


def _run_dates(prereg: P.Preregistration, frames: dict[str, pd.DataFrame], fast: bool) -> list[str]:
    """[first, last]: when the runs' cells were written (UTC), the dates of the runs."""
    stamps = [(out_dir(prereg, part, fast) / "cells" / f"{key}.json").stat().st_mtime
              for part, runs in frames.items() for key in runs["key"].unique()]
    return [datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds") for t in (min(stamps), max(stamps))]


def checked_provenance(prereg, fast: bool) -> dict:
    """The checks before a pre-registration's runs train, then its provenance (``P.provenance``): under
    ``$VLR_RECORD`` at full size the file must be committed (the record names the commit), and its seeds unseen."""
    origin = P.provenance(prereg)
    if not fast and R.destination() is not None and not origin["file_committed"]:
        raise P.PreregistrationError(f"{prereg.path}: commit the pre-registration before its runs (the record "
                                     "names the commit it was made from)")
    P.check_unseen(prereg)
    return origin


def record_meta(prereg, origin: dict, *, fast: bool, command: str, chance, run_dates: list[str], n_runs: int,
                epochs: pd.DataFrame, device: str | None, t0: float) -> dict:
    """The meta of a pre-registered record: the file (path, sha256, text, provenance), then how the runs were made."""
    return {"preregistration": {"path": f"vlr_lib/preregistration/{prereg.path.name}", "sha256": prereg.sha256,
                                "text": prereg.text, **origin},
            "fast": fast, "command": command, "chance_rsum_val": chance, "run_dates": run_dates,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "n_runs": n_runs,
            "hardware": S.hardware(S.default_device(device)),
            "train_seconds": round(float(epochs["seconds"].fillna(0).sum()), 1),
            "wall_seconds": round(time.perf_counter() - t0, 1)}


def run(prereg: P.Preregistration | None = None, fast: bool = False, record: bool = True, progress: bool = False,
        command: str = "", device: str | None = None) -> Replication:
    """The replication of `prereg` (default the shipped file): with `record`, the shipped full-size record when it
    was made from this file (a stale one is refused), in fast mode too; else every part trained, or read from its
    cells, at full or fast size. Under ``$VLR_RECORD`` (``make record``) a full-size result is kept as the
    record, and its pre-registration must be committed first (the record names its commit)."""
    prereg = prereg or P.load()
    if record and (found := recorded(prereg)) is not None:
        return found
    origin = checked_provenance(prereg, fast)
    t0, frames, chance = time.perf_counter(), {}, {}
    for part in parts(prereg):
        frames[part], chance[part], _ = train_part(prereg, part, fast, progress, device)
    runs = pd.concat(frames.values(), ignore_index=True)
    epochs = _epochs(prereg, frames, fast)
    meta = record_meta(prereg, origin, fast=fast, command=command or "vlr_lib.experiments.replication.run()",
                       chance={s: chance[s] for s in prereg.settings}, run_dates=_run_dates(prereg, frames, fast),
                       n_runs=len(runs), epochs=epochs, device=device, t0=t0)
    rep = Replication(runs, epochs, meta, prereg)
    if not fast and rank_and_world()[0] == 0:
        R.keep(NAME, record_key(prereg), {"runs": R.frame_rows(runs), "epochs": R.frame_rows(epochs)},
               command=meta["command"], title="the pre-registered, tuned replication (shapes, full size)",
               wall_seconds=meta["wall_seconds"], train_seconds=meta["train_seconds"], meta=meta)
    return rep


# --------------------------------------------------------------------------- reading


def finals(rep: Replication) -> pd.DataFrame:
    """Per setting and loss: the final runs' test metric at the chosen point, mean and std over the seeds."""
    part = rep.runs[rep.runs["phase"] == "final"]
    out = part.groupby(["setting", "loss"], sort=False)[rep.prereg.metric].agg(["mean", "std", "count"])
    out = out.reset_index()
    out.insert(2, "label", out["loss"].map(registry.label))
    return out


def _by_seed(rep: Replication, setting: str, name: str, optimizer: bool) -> pd.Series:
    runs = rep.runs
    if optimizer:
        part = runs[(runs["phase"] == "optimizer") & (runs["condition"] == name)]
    else:
        part = runs[(runs["phase"] == "final") & (runs["setting"] == setting) & (runs["loss"] == name)]
    if part.empty:
        raise ValueError(f"the replication has no final run of {name!r} in the {setting} setting")
    return part.set_index("seed")[rep.prereg.metric].astype(float).sort_index()


def _comparison(rep: Replication, name: str, a: str, b: str, setting: str, expected: int | None,
                optimizer: bool) -> Comparison:
    x, y = _by_seed(rep, setting, a, optimizer), _by_seed(rep, setting, b, optimizer)
    if list(x.index) != list(y.index):
        raise ValueError(f"{name}: a and b were trained on other seeds ({list(x.index)} vs {list(y.index)})")
    return Comparison(name, x.to_numpy(), y.to_numpy(), expected)


def declared(rep: Replication) -> list[Comparison]:
    """Every comparison of the pre-registration's family, from the final (or optimizer) runs."""
    conditions = {c.name for c in rep.prereg.conditions}
    return [_comparison(rep, d.name, d.a, d.b, d.setting, d.expected, d.a in conditions)
            for d in rep.prereg.comparisons]


def verdicts(rep: Replication) -> pd.DataFrame:
    """The family's verdicts (``vlr_lib.stats.verdicts``, Holm over every declared comparison), with each
    comparison's claim, setting, a and b."""
    table = holm_verdicts(declared(rep), family=rep.prereg.family, alpha=rep.prereg.alpha)
    info = pd.DataFrame([{"claim": d.claim, "setting": d.setting, "a": d.a, "b": d.b} for d in rep.prereg.comparisons])
    return pd.concat([table, info], axis=1)


def compare(rep: Replication, a: str, b: str, setting: str) -> pd.Series:
    """The verdict of a - b in `setting` when it is a declared comparison (its row of :func:`verdicts`); any other
    pair is refused by ``stats.verdicts`` as exploratory (a ValueError: show it with :func:`exploratory`)."""
    found = [d for d in rep.prereg.comparisons if (d.a, d.b, d.setting) == (a, b, setting)]
    if found:
        table = verdicts(rep)
        return table[table["name"] == found[0].name].iloc[0]
    optimizer = a in {c.name for c in rep.prereg.conditions}
    name = f"{a} − {b} ({setting})" if optimizer else f"{registry.label(a)} − {registry.label(b)} ({setting})"
    holm_verdicts([*declared(rep), _comparison(rep, name, a, b, setting, None, optimizer)],
                  family=rep.prereg.family, alpha=rep.prereg.alpha)  # refuses it: not in the family
    raise AssertionError("unreachable: stats.verdicts refuses a comparison outside the family")


def exploratory(rep: Replication, a: str, b: str, setting: str) -> tuple[float, float, float]:
    """An undeclared a - b in `setting`: its mean paired difference and uncorrected 95% interval, no verdict."""
    optimizer = a in {c.name for c in rep.prereg.conditions}
    c = _comparison(rep, "exploratory", a, b, setting, None, optimizer)
    return paired_interval(c.a, c.b)


def convergence(rep: Replication) -> pd.DataFrame:
    """Per phase group (tuning with its extension, final, optimizer), setting and loss (or condition): the runs,
    how many select their last epoch, the share and whether it is within the pre-registered limit."""
    runs = rep.runs.assign(group=rep.runs["phase"].replace({"extension": "tuning"}),
                           what=rep.runs["condition"].where(rep.runs["phase"] == "optimizer", rep.runs["loss"]),
                           last=rep.runs["best_epoch"] == rep.runs["epochs"])
    out = runs.groupby(["group", "setting", "what"], sort=False).agg(runs=("last", "size"), last=("last", "sum"))
    out = out.reset_index()
    out.insert(3, "label", [w if g == "optimizer" else registry.label(w) for g, w in zip(out["group"], out["what"])])
    out["share"] = out["last"] / out["runs"]
    out["ok"] = out["share"] <= rep.prereg.max_last_epoch_share
    return out


def recorded_and_again(epochs: int | None = None, seed: int | None = None) -> tuple[list[float], list[float]]:
    """The record's per-epoch validation rsums of its checked run -- NT-Xent's final run on heads on features at
    its chosen point, the first final seed -- and the same run re-trained from scratch on the CPU (its first
    `epochs`; the learning rate still decays at the record's epoch)."""
    prereg = P.load()
    rep = recorded(prereg)
    if rep is None:
        raise FileNotFoundError(f"no record of the replication matches the code: {REMAKE}")
    seed = prereg.seeds[0] if seed is None else seed
    runs = rep.runs
    row = runs[(runs["phase"] == "final") & (runs["setting"] == "features") & (runs["loss"] == "info_nce")
               & (runs["seed"] == seed)].iloc[0]
    history = rep.epochs[rep.epochs["key"] == row["key"]].sort_values("epoch")["rsum"].astype(float).tolist()
    spec = replace(spec_of(prereg, "features", False, device="cpu"), lr=float(row["lr"]))
    if epochs is not None:
        spec, history = replace(spec, epochs=epochs), history[:epochs]
    grid = prereg.grid_of("info_nce")
    again = S.retrain(spec, "info_nce", seed, loss_kwargs={**dict(grid.fixed), grid.parameter: float(row["value"])})
    return history, [r["rsum"] for r in again.history]


# --------------------------------------------------------------------------- what the chapter and docs/results.md show


def _interval(delta: float, low: float, high: float) -> str:
    return f"{delta:+.1f} [{low:+.1f}, {high:+.1f}]"


def verdict_table(rep: Replication) -> pd.DataFrame:
    """The family as text: claim, setting, a − b with its uncorrected 95% interval, the Holm-adjusted p, the
    corrected verdict and the word the uncorrected interval alone would give."""
    v = verdicts(rep)
    return pd.DataFrame({"comparison": v["name"], "claim": v["claim"],
                         "a − b [95% CI, uncorrected]": [_interval(*r) for r in zip(v["delta"], v["low"], v["high"])],
                         "p (Holm)": [f"{p:.3f}" for p in v["p_holm"]], "verdict (Holm)": v["verdict"],
                         "uncorrected alone": v["uncorrected"]})


def tuning_table(rep: Replication) -> pd.DataFrame:
    """Each loss's choice per setting, as text: lr, value, mean validation rsum, edge, runs spent."""
    c = choices(rep)
    return pd.DataFrame({"setting": c["setting"], "loss": c["label"],
                         "chosen lr": [f"{x:g}" for x in c["lr"]],
                         "chosen value": [f"{p} {x:g}" for p, x in zip(c["parameter"], c["value"])],
                         "validation rsum": [f"{x:.1f}" for x in c["val_mean"]],
                         "on an edge after the extension": [e or "no" for e in c["edge"]],
                         "validation runs": c["runs"]})


def grid_table(rep: Replication, setting: str) -> pd.DataFrame:
    """Every loss's tuning in `setting` as text: one column per learning rate of the grid, each cell its main
    hyperparameter's values with their mean validation rsum ("*" the choice), then the extension runs."""
    sel = selection(rep, setting)
    lrs = lr_axis(rep.prereg, setting, bool(rep.meta.get("fast")))[0]
    rows = []
    for loss, part in sel.groupby("loss", sort=False):
        cell = lambda r: f"{r.value:g}: {r.val_mean:.1f}{'*' if r.chosen else ''}"
        row = {"loss": part["label"].iloc[0], "parameter": part["parameter"].iloc[0]}
        for lr in lrs:
            row[f"lr {lr:g}"] = ", ".join(cell(r) for r in part[(part["kind"] == "grid") & (part["lr"] == lr)]
                                          .itertuples())
        row["extension"] = ", ".join(f"lr {r.lr:g}, {cell(r)}" for r in part[part["kind"] == "extension"]
                                     .itertuples()) or "none"
        rows.append(row)
    return pd.DataFrame(rows)


def finals_table(rep: Replication) -> pd.DataFrame:
    """Test rsum of the final runs per loss (rows) and setting (columns): mean ± std over the seeds."""
    f = finals(rep)
    f["text"] = [f"{m:.1f} ± {s:.1f}" for m, s in zip(f["mean"], f["std"])]
    return f.pivot(index="label", columns="setting", values="text").reindex(
        [registry.label(g.loss) for g in rep.prereg.losses])


def reading(rep: Replication) -> list[str]:
    """One sentence per declared comparison, its words read from the corrected verdict (never more than it)."""
    out = []
    for r in verdicts(rep).itertuples():
        interval = _interval(r.delta, r.low, r.high)
        word = f"**{r.verdict}**"
        if r.verdict in ("cannot tell", "not told apart") and r.uncorrected != r.verdict:
            word += " (the uncorrected interval alone excludes 0: a lead, not a finding)"
        out.append(f"- {r.name} ({r.claim}): {word}; a − b = {interval} rsum over {r.n} seeds, Holm p = "
                   f"{r.p_holm:.3f}.")
    return out


def beside_untuned(rep: Replication, lesson_table: pd.DataFrame) -> pd.DataFrame:
    """The declared comparisons chapter 12 also made (experiment (d): heads on features, the VSE++ setting), its
    untuned, exploratory interval and verdict (``report.lessons.lesson_table``: defaults, seeds 0-4, Holm over chapter 12's
    family) beside the replication's (tuned, seeds 8-15, Holm over the declared family)."""
    from .lessons import SETTING_NAMES

    mine = verdicts(rep)
    rows = []
    for r in mine.itertuples():
        found = lesson_table[(lesson_table["experiment"] == "setting")
                             & (lesson_table["condition"] == SETTING_NAMES.get(r.setting))
                             & (lesson_table["a"] == r.a) & (lesson_table["b"] == r.b)]
        if found.empty:
            continue
        u = found.iloc[0]
        rows.append({"comparison": r.name,
                     "chapter 12 (untuned, exploratory)": f"{_interval(u['delta'], u['ci_low'], u['ci_high'])} "
                                                          f"{u['verdict']}",
                     "replication (tuned, pre-registered)": f"{_interval(r.delta, r.low, r.high)} {r.verdict}"})
    return pd.DataFrame(rows, columns=["comparison", "chapter 12 (untuned, exploratory)",
                                       "replication (tuned, pre-registered)"])


def provenance(meta: dict) -> str:
    """The opening of a pre-registered record's Markdown: its file, sha256 and commit, then the runs' dates and
    hardware (the caller goes on with what its runs were)."""
    p = meta["preregistration"]
    return (f"Pre-registration `{p['path']}` (sha256 `{p['sha256'][:12]}…`, committed in `{str(p['file_commit'])[:10]}` "
            f"on {str(p['file_commit_date'])[:10]}); runs from {meta['run_dates'][0]} to {meta['run_dates'][1]} on "
            f"{meta['hardware']}; ")


def markdown(rep: Replication) -> str:
    """The replication as Markdown (docs/results.md's section): provenance, choices, finals, verdicts, convergence."""
    m = rep.meta
    conv = convergence(rep)
    over = conv[~conv["ok"]]
    lines = [(provenance(m) + f"{m['n_runs']} rows ({rep.runs['key'].nunique()} distinct runs). Final seeds "
             f"{list(rep.prereg.seeds)}, tuning seed {list(rep.prereg.tuning_seeds)}."), "",
             "Each loss's choice on validation:", "", *_markdown_table(tuning_table(rep)), "",
             "Test rsum of the final runs at the chosen points (mean ± std over the seeds):", "",
             *_markdown_table(finals_table(rep).reset_index().rename(columns={"label": "loss"})), "",
             (f"The declared family ({len(rep.prereg.family)} comparisons, Holm's correction; "
              "`replication.verdicts`):"), "", *_markdown_table(verdict_table(rep)), "",
             *reading(rep), "",
             (f"Convergence: at most {rep.prereg.max_last_epoch_share:.0%} of each loss's runs may select their last "
              "epoch; " + ("every loss in every setting and phase is within it." if over.empty else
                           "over the limit: " + "; ".join(f"{r.label} ({r.group}, {r.setting}): {r.last} of {r.runs}"
                                                          for r in over.itertuples()) + "."))]
    return "\n".join(lines)


def _markdown_table(frame: pd.DataFrame) -> list[str]:
    lines = ["| " + " | ".join(str(c) for c in frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return lines + ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
