"""A pre-registration: the file that declares a replication before its runs, read and checked here.

The file (TOML, ``vlr_lib/preregistration/replication.toml`` for chapter 13) declares the settings, the final
seeds and the tuning seeds, the metric, each loss's tuning grid (learning rate x its main hyperparameter, with
one extension value beyond each edge) and its budget, the comparisons (a named pair of losses with the sign
a claim gives their difference) and so the family of Holm's correction (every comparison), the convergence
limit and the optimizer experiment. :func:`load` reads it once into a frozen :class:`Preregistration`, with the
file's sha256: a record stores that hash, and ``replication`` refuses a record whose hash is another (stale).

The optimizer experiment has its own, later file (``optimizer.toml``: one loss schedule in one setting, each
declared handling of the optimizer at the switch x each budget, on declared seeds, and its own family), read by
:func:`load_optimizer` into an :class:`OptimizerPreregistration`, and kept by ``vlr_lib.experiments.optimizer``.

Every check runs here, before anything trains, and an error names the file and the field.
"""
from __future__ import annotations

import functools
import hashlib
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import tomllib

from .. import registry
from ..train import TrainSettings, check_setting

#: The shipped pre-registrations of chapter 13: the replication, and the later one of the optimizer experiment.
REPLICATION = Path(__file__).resolve().parents[1] / "preregistration" / "replication.toml"
OPTIMIZER = REPLICATION.with_name("optimizer.toml")
#: The records made from these pre-registrations: they train the declared seeds, so the check that a declared seed
#: is unseen (:func:`check_unseen`) leaves them out.
PREREGISTERED = ("replication-shapes-full", "replication-optimizer-shapes-full")


class PreregistrationError(ValueError):
    """A pre-registration file that cannot be used: the message names the file and the field."""


@dataclass(frozen=True)
class LossGrid:
    """One loss's tuning: its main hyperparameter's three values, the two extension values, its fixed parameters."""

    loss: str
    parameter: str
    values: tuple[float, ...]
    extension: tuple[float, float]
    fixed: tuple[tuple[str, float], ...] = ()
    same_as: str | None = None  #: another declared loss whose runs are this one's (the same gradient, bit for bit)


@dataclass(frozen=True)
class Declared:
    """One declared comparison: a - b in `setting` (for the optimizer experiment, a and b are conditions)."""

    name: str  #: unique in the family: the claim's name and its setting
    claim: str
    a: str
    b: str
    expected: int | None
    setting: str


@dataclass(frozen=True)
class Condition:
    """One condition of the optimizer experiment."""

    name: str
    label: str
    optimizer_at_switch: str
    grad_clip: float | None
    length: int  #: epochs in units of the schedule's


@dataclass(frozen=True)
class Preregistration:
    """A checked pre-registration file (module docstring)."""

    path: Path
    sha256: str
    text: str
    title: str
    data: str
    settings: tuple[str, ...]
    seeds: tuple[int, ...]
    tuning_seeds: tuple[int, ...]
    metric: str
    alpha: float
    max_last_epoch_share: float
    budget: int
    lr: tuple[tuple[str, tuple[float, ...], tuple[float, float]], ...]  #: (setting, values, extension)
    losses: tuple[LossGrid, ...]
    comparisons: tuple[Declared, ...]
    optimizer_setting: str | None  #: None: no optimizer experiment declared
    optimizer_loss: str | None
    conditions: tuple[Condition, ...]

    @property
    def family(self) -> tuple[str, ...]:
        """The names of every declared comparison: the family of Holm's correction."""
        return tuple(c.name for c in self.comparisons)

    def lr_grid(self, setting: str) -> tuple[tuple[float, ...], tuple[float, float]]:
        """(the three learning rates, the extension below and above) of `setting`."""
        return next((values, ext) for s, values, ext in self.lr if s == setting)

    def grid_of(self, loss: str) -> LossGrid:
        return next(g for g in self.losses if g.loss == loss)

    def condition(self, name: str) -> Condition:
        return next(c for c in self.conditions if c.name == name)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load(path: str | Path = REPLICATION) -> Preregistration:
    """The pre-registration at `path`, checked (a :class:`PreregistrationError` names the file and the field)."""
    return _read(Path(path), _checked)


def _read(path: Path, check):
    """`check(path, raw, doc)` of the TOML file at `path`; every error a :class:`PreregistrationError` naming it."""
    try:
        raw = path.read_bytes()
        doc = tomllib.loads(raw.decode())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise PreregistrationError(f"{path}: cannot be read as TOML ({err})") from None
    try:
        return check(path, raw, doc)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, PreregistrationError):
            raise
        raise PreregistrationError(f"{path}: {err.args[0] if err.args else err}") from None


def _need(doc: Mapping, field: str, kind: type | tuple[type, ...], where: str = ""):
    if field not in doc:
        raise KeyError(f"{where}{field} is missing")
    value = doc[field]
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise TypeError(f"{where}{field} must be {kind}, got {value!r}")
    return value


def _numbers(values, field: str, n: int | None = None) -> tuple[float, ...]:
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise TypeError(f"{field} must be a list of numbers, got {values!r}")
    if n is not None and len(values) != n:
        raise ValueError(f"{field} must hold {n} numbers, got {len(values)}")
    return tuple(float(v) for v in values)


def _seeds(values, field: str) -> tuple[int, ...]:
    if not isinstance(values, list) or not values or not all(type(v) is int and v >= 0 for v in values):
        raise TypeError(f"{field} must be a non-empty list of integers >= 0, got {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{field} must be distinct, got {values!r}")
    return tuple(values)


def _ordered(values: tuple[float, ...], extension: tuple[float, float], field: str) -> None:
    if list(values) != sorted(set(values)):
        raise ValueError(f"{field}.values must be distinct and increasing, got {list(values)}")
    if not extension[0] < values[0] or not extension[1] > values[-1]:
        raise ValueError(f"{field}.extension must be one value below the values and one above, got {list(extension)}")


def _checked(path: Path, raw: bytes, doc: dict) -> Preregistration:
    settings = tuple(_need(doc, "settings", list))
    for s in settings:
        check_setting(s, "settings")
    seeds, tuning = _seeds(doc.get("seeds"), "seeds"), _seeds(doc.get("tuning_seeds"), "tuning_seeds")
    if len(seeds) < 2:
        raise ValueError(f"seeds must hold at least 2 seeds (a paired interval needs pairs), got {list(seeds)}")
    if set(seeds) & set(tuning):
        raise ValueError(f"tuning_seeds {list(tuning)} must not be final seeds {list(seeds)}: a final run would "
                         "have been selected on itself")
    tuning_doc = _need(doc, "tuning", dict)
    lr_doc = _need(tuning_doc, "lr", dict, "tuning.")
    lr = []
    for s in settings:
        spec = _need(lr_doc, s, dict, "tuning.lr.")
        values = _numbers(spec.get("values"), f"tuning.lr.{s}.values", 3)
        ext = _numbers(spec.get("extension"), f"tuning.lr.{s}.extension", 2)
        _ordered(values, ext, f"tuning.lr.{s}")
        if ext[0] <= 0:
            raise ValueError(f"tuning.lr.{s}.extension must be > 0, got {list(ext)}")
        lr.append((s, values, ext))
    losses = tuple(_loss_grid(name, spec) for name, spec in _need(doc, "losses", dict).items())
    _check_aliases(losses)
    budget = _need(tuning_doc, "budget", int, "tuning.")
    if budget != 3 * 3 + 2:
        raise ValueError(f"tuning.budget must be 11 (3 x 3 points and at most one extension per axis), got {budget}")
    names = {g.loss for g in losses}
    comparisons = []
    for i, c in enumerate(_need(doc, "comparisons", list)):
        for s in _need(c, "settings", list, f"comparisons[{i}]."):
            if s not in settings:
                raise ValueError(f"comparisons[{i}].settings: {s!r} is not one of the settings {list(settings)}")
            comparisons.append(_declared(c, i, s, names, "comparisons"))
    setting, loss, conditions = None, None, ()
    if "optimizer" in doc:  # optional: the optimizer experiment
        opt = _need(doc, "optimizer", dict)
        setting = _need(opt, "setting", str, "optimizer.")
        check_setting(setting, "optimizer.setting")
        loss = _need(opt, "loss", str, "optimizer.")
        if not registry.is_schedule(loss):
            raise ValueError(f"optimizer.loss must be a loss schedule (warmup:<first>:<n>:<then>), got {loss!r}")
        conditions = tuple(_condition(n, c) for n, c in _need(opt, "conditions", dict).items())
        for i, c in enumerate(_need(opt, "comparisons", list)):
            comparisons.append(_declared(c, i, setting, {c.name for c in conditions}, "optimizer.comparisons"))
    family = [c.name for c in comparisons]
    if len(set(family)) != len(family):
        raise ValueError(f"comparison names must be distinct: {sorted({n for n in family if family.count(n) > 1})}")
    share = _need(doc, "max_last_epoch_share", float)
    alpha = _need(doc, "alpha", float)
    if not 0 < share <= 1 or not 0 < alpha < 1:
        raise ValueError(f"max_last_epoch_share must lie in (0, 1] and alpha in (0, 1), got {share} and {alpha}")
    metric = _need(doc, "metric", str)
    if metric != "sel_rsum":
        raise ValueError(f"metric must be 'sel_rsum' (test rsum at the best validation epoch), got {metric!r}")
    return Preregistration(
        path=path, sha256=hashlib.sha256(raw).hexdigest(), text=raw.decode(), title=_need(doc, "title", str),
        data=_need(doc, "data", str), settings=settings, seeds=seeds, tuning_seeds=tuning, metric=metric,
        alpha=alpha, max_last_epoch_share=share, budget=budget, lr=tuple(lr), losses=losses,
        comparisons=tuple(comparisons), optimizer_setting=setting, optimizer_loss=loss, conditions=conditions)


def _loss_grid(loss: str, spec: dict) -> LossGrid:
    registry.check(loss)
    where = f"losses.{loss!r}."
    param = _need(spec, "parameter", str, where)
    entry = registry.entry(loss)
    if param not in entry.hyper or entry.hyper[param].kind != "float" or entry.hyper[param].learned:
        raise ValueError(f"{where}parameter: {loss} has no tunable hyperparameter {param!r}")
    values = _numbers(spec.get("values"), f"{where}values", 3)
    ext = _numbers(spec.get("extension"), f"{where}extension", 2)
    _ordered(values, ext, where.rstrip("."))
    h = entry.hyper[param]
    for v in (*values, *ext):
        if (h.low is not None and v < h.low) or (h.high is not None and v > h.high):
            raise ValueError(f"{where}: {param} = {v:g} lies outside its sensible range [{h.low}, {h.high}]")
    fixed = spec.get("fixed", {})
    if not isinstance(fixed, dict) or param in fixed or not set(fixed) <= set(entry.hyper):
        raise ValueError(f"{where}fixed must map other parameters of {loss} to values, got {fixed!r}")
    same_as = spec.get("same_as")
    if same_as is not None and not isinstance(same_as, str):
        raise TypeError(f"{where}same_as must be a loss name, got {same_as!r}")
    return LossGrid(loss, param, values, ext, tuple(sorted((k, float(v)) for k, v in fixed.items())), same_as)


def _check_aliases(losses: tuple[LossGrid, ...]) -> None:
    """A loss declared ``same_as`` another takes that loss's runs: the other is declared, trained itself, and
    tuned over the same grid."""
    by_name = {g.loss: g for g in losses}
    for g in losses:
        if g.same_as is None:
            continue
        other = by_name.get(g.same_as)
        if other is None or other.same_as is not None:
            raise ValueError(f"losses.{g.loss!r}.same_as must name a declared loss that is trained itself, "
                             f"got {g.same_as!r}")
        if (g.parameter, g.values, g.extension, g.fixed) != (other.parameter, other.values, other.extension,
                                                             other.fixed):
            raise ValueError(f"losses.{g.loss!r}.same_as: its grid must be {g.same_as}'s (parameter, values, "
                             "extension, fixed)")


def _declared(c: dict, i: int, setting: str, known: set[str], where: str) -> Declared:
    where = f"{where}[{i}]."
    a, b = _need(c, "a", str, where), _need(c, "b", str, where)
    for side, name in (("a", a), ("b", b)):
        if name not in known:
            raise ValueError(f"{where}{side}: {name!r} is not declared (one of {sorted(known)})")
    expected = c.get("expected")
    if expected not in (None, 1, -1) or isinstance(expected, bool):
        raise ValueError(f"{where}expected must be 1, -1 or left out (no claimed sign), got {expected!r}")
    name = _need(c, "name", str, where)
    return Declared(f"{name} ({setting})", _need(c, "claim", str, where), a, b, expected, setting)


def _condition(name: str, c: dict) -> Condition:
    where = f"optimizer.conditions.{name}."
    handling = _need(c, "optimizer_at_switch", str, where)
    try:
        TrainSettings(optimizer_at_switch=handling)  # the trainer's own check of the value
    except ValueError as err:
        raise ValueError(f"{where}{err}") from None
    clip = c.get("grad_clip")
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or clip <= 0):
        raise ValueError(f"{where}grad_clip must be a number > 0, got {clip!r}")
    length = c.get("length", 1)
    if type(length) is not int or length < 1:
        raise ValueError(f"{where}length must be an integer >= 1, got {length!r}")
    return Condition(name, _need(c, "label", str, where), handling, None if clip is None else float(clip), length)


# --------------------------------------------------------------------------- the optimizer experiment's file


@dataclass(frozen=True)
class Budget:
    """One training budget of the optimizer experiment: its epochs and the epoch the learning rate decays from."""

    name: str
    epochs: int
    lr_decay_epoch: int


@dataclass(frozen=True)
class Handling:
    """One handling of the optimizer at the switch: the TrainSettings fields it sets."""

    name: str
    label: str
    optimizer: str
    weight_decay: float
    optimizer_at_switch: str
    grad_clip: float | None

    def settings(self) -> dict:
        """The TrainSettings fields of this handling (a grid cell's config keys)."""
        return {"optimizer": self.optimizer, "weight_decay": self.weight_decay,
                "optimizer_at_switch": self.optimizer_at_switch, "grad_clip": self.grad_clip}


@dataclass(frozen=True)
class OptimizerPreregistration:
    """A checked pre-registration of the optimizer experiment (``vlr_lib/preregistration/optimizer.toml``): one
    loss schedule in one setting at one learning rate, every handling x budget a condition "<handling>@<budget>"
    trained on every seed; a comparison's side is a condition or the per-seed difference "c1 - c2" of two."""

    path: Path
    sha256: str
    text: str
    title: str
    data: str
    setting: str
    loss: str
    lr: float
    seeds: tuple[int, ...]
    metric: str
    alpha: float
    max_last_epoch_share: float
    budgets: tuple[Budget, ...]
    handlings: tuple[Handling, ...]
    comparisons: tuple[Declared, ...]

    @property
    def family(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.comparisons)

    @property
    def conditions(self) -> tuple[str, ...]:
        """Every condition's name, "<handling>@<budget>", handlings first."""
        return tuple(f"{h.name}@{b.name}" for h in self.handlings for b in self.budgets)

    def condition(self, name: str) -> tuple[Handling, Budget]:
        handling, budget = name.split("@")
        return (next(h for h in self.handlings if h.name == handling),
                next(b for b in self.budgets if b.name == budget))


def load_optimizer(path: str | Path = OPTIMIZER) -> OptimizerPreregistration:
    """The optimizer experiment's pre-registration at `path`, checked (errors name the file and the field)."""
    return _read(Path(path), _checked_optimizer)


def _checked_optimizer(path: Path, raw: bytes, doc: dict) -> OptimizerPreregistration:
    from ..train import preset

    data, setting = _need(doc, "data", str), _need(doc, "setting", str)
    check_setting(setting, "setting")
    loss = _need(doc, "loss", str)
    if not registry.is_schedule(loss):
        raise ValueError(f"loss must be a loss schedule (warmup:<first>:<n>:<then>), got {loss!r}")
    lr = float(_need(doc, "lr", (int, float)))
    wanted = preset(data, setting)["lr"]
    if lr != wanted:
        raise ValueError(f"lr must be the showdown's learning rate of the {setting} setting ({wanted:g}, "
                         f"vlr_lib.train.settings.PRESETS): the experiment tunes nothing, got {lr:g}")
    seeds = _seeds(doc.get("seeds"), "seeds")
    if len(seeds) < 2:
        raise ValueError(f"seeds must hold at least 2 seeds (a paired interval needs pairs), got {list(seeds)}")
    budgets = tuple(_budget(n, b) for n, b in _need(doc, "budgets", dict).items())
    handlings = tuple(_handling(n, h) for n, h in _need(doc, "handlings", dict).items())
    if not budgets or not handlings:
        raise ValueError("budgets and handlings must each declare at least one")
    for name in (*(b.name for b in budgets), *(h.name for h in handlings)):
        if not name.isidentifier():
            raise ValueError(f"budget and handling names must be identifiers (no '@' or '-'), got {name!r}")
    known = {f"{h.name}@{b.name}" for h in handlings for b in budgets}
    known |= {f"{x} - {y}" for x in known for y in known if x != y}
    comparisons = tuple(_declared(c, i, setting, known, "comparisons")
                        for i, c in enumerate(_need(doc, "comparisons", list)))
    family = [c.name for c in comparisons]
    if not family or len(set(family)) != len(family):
        raise ValueError(f"comparisons must be a non-empty list of distinct names, got {family}")
    share, alpha = _need(doc, "max_last_epoch_share", float), _need(doc, "alpha", float)
    if not 0 < share <= 1 or not 0 < alpha < 1:
        raise ValueError(f"max_last_epoch_share must lie in (0, 1] and alpha in (0, 1), got {share} and {alpha}")
    metric = _need(doc, "metric", str)
    if metric != "sel_rsum":
        raise ValueError(f"metric must be 'sel_rsum' (test rsum at the best validation epoch), got {metric!r}")
    return OptimizerPreregistration(
        path=path, sha256=hashlib.sha256(raw).hexdigest(), text=raw.decode(), title=_need(doc, "title", str),
        data=data, setting=setting, loss=loss, lr=lr, seeds=seeds, metric=metric, alpha=alpha,
        max_last_epoch_share=share, budgets=budgets, handlings=handlings, comparisons=comparisons)


def _budget(name: str, b: dict) -> Budget:
    where = f"budgets.{name}."
    epochs, decay = _need(b, "epochs", int, where), _need(b, "lr_decay_epoch", int, where)
    if not 1 <= decay < epochs:
        raise ValueError(f"{where}lr_decay_epoch must lie in [1, epochs), got {decay} of {epochs}")
    return Budget(name, epochs, decay)


def _handling(name: str, h: dict) -> Handling:
    where = f"handlings.{name}."
    known = {"label", "optimizer", "weight_decay", "optimizer_at_switch", "grad_clip"}
    if set(h) - known:
        raise ValueError(f"{where}{sorted(set(h) - known)[0]} is not a field of a handling (one of {sorted(known)})")
    out = Handling(name, _need(h, "label", str, where), _need(h, "optimizer", str, where),
                   float(h.get("weight_decay", 0.0)), _need(h, "optimizer_at_switch", str, where),
                   None if h.get("grad_clip") is None else h["grad_clip"])
    for field in ("weight_decay", "grad_clip"):
        if isinstance(h.get(field), bool) or not isinstance(h.get(field, 0.0), (int, float)):
            raise TypeError(f"{where}{field} must be a number, got {h[field]!r}")
    try:
        TrainSettings(**out.settings())  # the trainer's own checks of every value
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}{err}") from None
    return out


# --------------------------------------------------------------------------- where it came from


def _git(*args: str, cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def provenance(prereg: Preregistration) -> dict:
    """The git commit of the checkout (HEAD), the commit that last changed the file and its date, and whether
    the file differs from that commit (None each outside a git checkout)."""
    folder = prereg.path.parent
    last = _git("log", "-1", "--format=%H %cI", "--", prereg.path.name, cwd=folder)
    commit, date = (last.split(" ", 1) if last else (None, None))
    status = _git("status", "--porcelain", "--", prereg.path.name, cwd=folder)
    return {"head": _git("rev-parse", "HEAD", cwd=folder), "file_commit": commit, "file_commit_date": date,
            "file_committed": bool(commit) and status == ""}


def development_seeds(exclude: str | tuple[str, ...] = PREREGISTERED) -> dict[int, list[str]]:
    """{seed: the shipped records that trained it}: every seed of every record in ``vlr_lib/recorded`` but
    `exclude` (a name or names; their runs tables' "seed" column, and any "seeds" list of their settings)."""
    from . import record as R

    exclude = (exclude,) if isinstance(exclude, str) else tuple(exclude)
    manifests = sorted(R.RECORDED.glob(f"*/{R.MANIFEST}"))
    stamps = tuple((str(m), m.stat().st_mtime_ns, m.stat().st_size) for m in manifests)
    found: dict[int, set[str]] = {}
    for name, seeds in _record_seeds(stamps).items():
        if name not in exclude:
            for seed in seeds:
                found.setdefault(seed, set()).add(name)
    return {seed: sorted(names) for seed, names in sorted(found.items())}


@functools.lru_cache(maxsize=4)
def _record_seeds(stamps: tuple[tuple[str, int, int], ...]) -> dict[str, frozenset[int]]:
    """{record: its seeds}, read once per state of the records (`stamps`: each manifest's path, mtime and size; a
    record is rewritten whole, its manifest with it): reading every record is seconds, and each replication checks."""
    from . import record as R

    out = {}
    for path, _, _ in stamps:
        name = Path(path).parent.name
        rec = R.read(name, None, root=R.RECORDED)
        if rec is not None:
            seeds = {int(row["seed"]) for rows in rec.tables.values() for row in rows
                     if isinstance(row.get("seed"), int)}
            out[name] = frozenset(seeds | set(_seed_lists(rec.manifest.get("settings"))))
    return out


def _seed_lists(obj) -> list[int]:
    """The integers of every "seeds" list (and "seed" integer) nested in `obj`."""
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            if k in ("seeds", "seed") and isinstance(v, list):
                out += [s for s in v if type(s) is int]
            elif k == "seed" and type(v) is int:
                out.append(v)
            else:
                out += _seed_lists(v)
        return out
    if isinstance(obj, list):
        return [s for v in obj for s in _seed_lists(v)]
    return []


def check_unseen(prereg, exclude: str | tuple[str, ...] = PREREGISTERED) -> None:
    """A :class:`PreregistrationError` naming the file when a declared seed (final or tuning) of `prereg` (a
    :class:`Preregistration` or :class:`OptimizerPreregistration`) was trained by a shipped record other than
    `exclude`: a development seed reused in a replication."""
    used = development_seeds(exclude)
    reused = {s: used[s] for s in (*prereg.seeds, *getattr(prereg, "tuning_seeds", ())) if s in used}
    if reused:
        raise PreregistrationError(f"{prereg.path}: seeds {sorted(reused)} were used in development (by the records "
                                   f"{sorted({n for names in reused.values() for n in names})}): a replication "
                                   "runs on seeds never seen")
