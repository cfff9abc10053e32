"""Every recorded experiment of the workbook, one entry each, and the one check a chapter calls.

An experiment is what a chapter (notebooks 09-13, and 03 for its batch-size experiment) opens from a shipped record
and checks: its record's name, the chapter, its ``make record`` step and the command that makes it, how far a run re-trained from scratch may land
from the record (its measured tolerance), the run that checks it (``vlr_lib.experiments.recheck``) and how
``make record`` makes it. :data:`EXPERIMENTS` holds them; the command line's steps (``python -m vlr_lib record``),
the book's recorded chapters (``vlr_lib.book``) and the drift benchmark read them from here.

A chapter opens its record in one call -- ``showdown.run``, ``tuned.run``, ``lessons.run`` (their modules know
their spec and key) or ``record.open_or_train`` / ``record.grid_or_train`` (notebooks 09 and 11, whose settings
cell is the key) -- and checks it in one: :func:`check`, which compares the chapter's own run of the checked
configuration when it trained it at the record's settings (`trained`), else re-trains it on the CPU, and returns
the gap and the sentence to print. Beyond the tolerance: an error under the tests and the book, a
``RecordDriftWarning`` in full mode (``record.check_reproduced``).

Tolerances are sized by measurement, not by a guess: with the shipped shapes encoder every machine computes the
same features up to inference rounding, and benchmarks/record_drift.py re-trains each record's checked run (on the
CPU) under torch's portable, AVX2 and AVX-512 kernels with 1, 2 and 4 threads, on the machine that made the records
and on a second one (another torch version). The largest gap measured was 0.8 (the VSE++ showdown under the
portable kernels); most were 0.0. Each tolerance is the record's largest gap x 1.5 + 1, at least 2 (room for CPU
families not measured), rounded up to half a point; the smallest change measured to matter, notebook 09's margin
0.2 -> 0.3, moves its first 3 epochs by 2.9 (docs/results.md, "How far a record drifts"). On an AMD EPYC
(2026-11-27) the VSE++ showdown's checked cell landed 14.0 from its then Intel-made record at epoch 4 (12.6 under
the portable kernels), back within 3.8 from epoch 8: its tolerance is 22, the rule applied to that gap, so its
check catches only large changes; the other records were re-measured there too (docs/results.md). Both showdown
records were made again on that AMD EPYC the same day (issue 36's two contestants): an Intel CPU now sits on the
far side of the same gap, which the tolerance measured in the other direction.
"""
from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import recheck
from . import record as R

Pair = tuple[list[float], list[float]]
#: The first epochs a chapter's check re-trains when it did not train the record's checked run itself (fast mode).
CHECK_EPOCHS = 3


@dataclass(frozen=True)
class Experiment:
    """One recorded experiment (module docstring)."""

    name: str  #: the record's name, ``vlr_lib/recorded/<name>``
    chapter: str  #: the notebook that opens it
    step: str  #: its ``make record`` step (``python -m vlr_lib record --only <step>``)
    command: str  #: what that step runs
    tolerance: float  #: rsum points a re-trained run may land from the record, at every epoch compared
    checked: str  #: which run checks it, in words
    again: Callable[[int | None], Pair]  #: (recorded, re-trained) rsums of the checked run, its first epochs or all
    make: Callable[[], None]  #: make record's step
    #: (recorded, trained) rsums of the checked run from what the chapter itself trained, for chapters that train it
    #: at the record's settings (09 and 11); None for the others
    mine: Callable[[R.Record, Any], Pair] | None = None
    #: the parts of the step that train apart (``make record --jobs``), and how one part trains; () for most
    parts: Callable[[], tuple[str, ...]] = lambda: ()
    train_part: Callable[[str], None] | None = None


# --------------------------------------------------------------------------- make record's steps


def _showdown(setting: str) -> Callable[[], None]:
    def step() -> None:
        from . import showdown
        from .cells import spec_for

        spec = spec_for("shapes", False, setting)
        showdown.run(spec, command=f"python -m vlr_lib showdown --setting {setting}", progress=True)
    return step


def _tuned() -> None:
    from . import tuned

    tuned.run(tuned.spec_for(), command="python -m vlr_lib tuned", progress=True)


def _lessons() -> None:
    from . import lessons

    lessons.run(lessons.LessonsSpec(), command="python -m vlr_lib lessons", progress=True)


def _batch_size() -> None:
    from . import batch_size

    batch_size.run(command="python -m vlr_lib record --only 03-batch", progress=True)


def _difficulty() -> None:
    from . import difficulty

    difficulty.run(command="python -m vlr_lib record --only 03-difficulty", progress=True)


def _replication() -> None:
    from . import replication

    replication.run(record=False, command="python -m vlr_lib record --only 13", progress=True)


def _replication_parts() -> tuple[str, ...]:
    from . import preregistration, replication

    return replication.parts(preregistration.load())


def _replication_part(part: str) -> None:
    from . import preregistration, replication

    replication.train_part(preregistration.load(), part, fast=False, progress=True)


def _optimizer() -> None:
    from . import optimizer

    optimizer.run(record=False, command="python -m vlr_lib record --only 13-optimizer", progress=True)


def _notebook(stem: str) -> Callable[[], None]:
    """A chapter whose settings cell is its record's key: executed in full mode (make record sets VLR_RERUN=1)."""
    def step() -> None:
        import jupytext
        from nbclient import NotebookClient

        from ..paths import repo_root

        source = next((repo_root() / "notebooks").glob(f"{stem}_*.py"))
        client = NotebookClient(jupytext.read(source), timeout=None, kernel_name="python3",
                                resources={"metadata": {"path": str(source.parent)}})
        try:
            client.execute()
        finally:
            _stop_kernel(client)
    return step


def _stop_kernel(client: Any) -> None:
    """The kernel of a step stopped early (Ctrl-C, SIGTERM, an error) goes with it. nbclient starts it in a session
    of its own, out of reach of the signals that stop the step, and a stop inside its event loop can skip its
    cleanup: the kernel would train on, an orphan."""
    import signal

    provisioner = getattr(getattr(client, "km", None), "provisioner", None)
    pid = getattr(provisioner, "pid", None)
    if pid is None or not getattr(provisioner, "has_process", False):
        return  # never started, or shut down by nbclient
    try:
        os.killpg(pid, signal.SIGKILL)  # the kernel leads its own session: its group is its pid
    except (ProcessLookupError, PermissionError):
        pass


# --------------------------------------------------------------------------- the experiments


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment("showdown-shapes-features-full", "10_showdown", "10-features", "python -m vlr_lib showdown", 2.0,
               "Triplet-SH cell, seed 0", recheck.showdown("features"), _showdown("features")),
    # the VSE++ setting trains a GRU from scratch, whose first epochs amplify rounding: 14.0 on an AMD EPYC
    Experiment("showdown-shapes-vsepp-full", "10_showdown", "10-vsepp", "python -m vlr_lib showdown --setting vsepp",
               22.0, "Triplet-SH cell, seed 0", recheck.showdown("vsepp"), _showdown("vsepp")),
    Experiment("09_training-shapes-full", "09_training", "09", "notebook 09, executed in full mode", 2.0,
               "Unified run, seed 0", recheck.training, _notebook("09"), recheck.training_mine),
    Experiment("11_hyperparameters-shapes-full", "11_hyperparameters", "11", "notebook 11, executed in full mode",
               2.0, "Triplet-SH cell, seed 0", recheck.sweeps, _notebook("11"), recheck.sweeps_mine),
    Experiment("tuned-shapes-features-full", "11_hyperparameters", "11-tuned", "python -m vlr_lib tuned", 2.0,
               "NT-Xent cell at temperature 0.05, seed 0", recheck.tuned, _tuned),
    Experiment("lessons-shapes-full", "12_lessons", "12", "python -m vlr_lib lessons", 2.0,
               "Triplet-SH run on the pretrained encoder, seed 0 (its last and best rsum)", recheck.lessons, _lessons),
    # not measured on a second machine yet: the rule's minimum (the features showdown's runs, the same budget, drift
    # 0.0 to 0.8)
    Experiment("batch-size-shapes-features-full", "03_contrastive", "03-batch",
               "python -m vlr_lib record --only 03-batch", 2.0, "SigLIP cell at batch size 32, seed 0",
               recheck.batch_size, _batch_size),
    # measured 2026-11-27: the checked cell re-trained on the machine that made the record (AMD EPYC, 1 thread)
    # lands 0.0 from it at every epoch; the rule's minimum (not yet measured on a second machine)
    Experiment("difficulty-shapes-features-full", "03_contrastive", "03-difficulty",
               "python -m vlr_lib record --only 03-difficulty", 2.0, "SigLIP cell at difficulty 1, seed 0",
               recheck.difficulty, _difficulty),
    Experiment("replication-shapes-full", "13_replication", "13", "python -m vlr_lib record --only 13", 2.0,
               "NT-Xent final run on heads on features at its chosen point, seed 8", recheck.replication,
               _replication, parts=_replication_parts, train_part=_replication_part),
    # the rule's minimum: heads on features at the showdown's budget, whose records drift 0.0 to 0.8
    Experiment("replication-optimizer-shapes-full", "13_replication", "13-optimizer",
               "python -m vlr_lib record --only 13-optimizer", 2.0,
               "VSE∞'s recipe (AdamW carried over, clipped) at 20 epochs, seed 8", recheck.optimizer, _optimizer),
)}
#: ``make record``'s steps, in the order it runs them.
STEPS: tuple[str, ...] = tuple(e.step for e in EXPERIMENTS.values())


def get(name: str) -> Experiment:
    """The experiment whose record is `name`; a KeyError naming the known ones."""
    if name not in EXPERIMENTS:
        raise KeyError(f"no experiment records {name!r}; the recorded experiments are {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def by_step(step: str) -> Experiment:
    """The experiment ``make record --only <step>`` makes."""
    found = [e for e in EXPERIMENTS.values() if e.step == step]
    if not found:
        raise KeyError(f"no make record step {step!r}; the steps are {', '.join(STEPS)}")
    return found[0]


def chapters() -> tuple[str, ...]:
    """The chapters that open a record (the book runs them in full mode from their records)."""
    return tuple(sorted({e.chapter for e in EXPERIMENTS.values()}))


def tolerance(name: str | None) -> float:
    """The measured tolerance of the record `name`, else ``record.RSUM_TOLERANCE`` (a record made elsewhere)."""
    return EXPERIMENTS[name].tolerance if name in EXPERIMENTS else R.RSUM_TOLERANCE


@dataclass(frozen=True)
class Checked:
    """What :func:`check` found: the largest gap (None: no record to check), the tolerance, the sentence."""

    name: str
    gap: float | None
    tolerance: float
    text: str

    def __str__(self) -> str:
        return self.text


def check(name: str, trained: Any = None, *, on_cpu: bool = True, epochs: int | None = None,
          strict: bool | None = None) -> Checked:
    """A chapter's record check in one call, whatever the mode.

    `trained`: what the chapter trained of the checked configuration at the record's settings (notebook 09's run,
    notebook 11's grid), compared with the record on the CPU, where the records were made. Otherwise the checked
    run is re-trained from scratch on the CPU: its first `epochs` (None: all; the learning rate still decays at
    the record's epoch, so they are the record's first epochs). A name no experiment records, or a record that
    cannot be used, is no check: the sentence says so and `gap` is None."""
    entry = EXPERIMENTS.get(name)
    rec = R.read(name, None) if entry is not None else None  # its integrity checked, any settings
    if entry is None or rec is None:
        return Checked(name, None, tolerance(name), f"no usable record {name} in {R.record_root()}: nothing to check "
                                                    f"({R.REGENERATE} makes the shapes records)")
    if trained is not None and on_cpu and entry.mine is not None:
        (recorded, run), how = entry.mine(rec, trained), "trained here"
    else:
        recorded, run = entry.again(epochs)
        unit = "values" if name.startswith("lessons") else "epochs"  # the lessons record keeps last and best rsum
        how = f"re-trained at the record's settings on the CPU ({len(run)} {unit})"
    gap = R.check_reproduced(recorded[: len(run)], run, f"the record {name}, {entry.checked}",
                             tolerance=entry.tolerance, strict=strict)
    return Checked(name, gap, entry.tolerance, f"the record {name}'s {entry.checked}, {how}: validation rsum within "
                                               f"{gap:.2f} of the record (tolerance {entry.tolerance})")


def _record_env(to: str | os.PathLike | None) -> None:
    os.environ.update({R.RECORD_ENV: str(Path(to or R.RECORDED).resolve()), "VLR_FAST": "0", "VLR_RERUN": "1",
                       "VLR_DATA": "shapes"})


def make(steps: tuple[str, ...] = STEPS, to: str | os.PathLike | None = None, jobs: int = 1) -> None:
    """``make record``: the experiments of `steps`, full size, each written as a record into `to` (default the
    package's ``vlr_lib/recorded``); prints each step's time. `jobs` > 1 runs them as that many processes at once
    (``record_jobs``: longest first, a step's parts apart)."""
    import time

    print(expected(steps, jobs), flush=True)
    if jobs > 1:
        return _make_parallel(steps, to, jobs)
    _record_env(to)
    start = time.perf_counter()
    for i, step in enumerate(steps, 1):
        print(f"[{i}/{len(steps)}] {step} ...", flush=True)
        t0 = time.perf_counter()
        by_step(step).make()
        print(f"[{i}/{len(steps)}] {step} done in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    print(f"{len(steps)} record(s) written to {R.destination()} in {(time.perf_counter() - start) / 60:.1f} min")


def make_part(step: str, part: str, to: str | os.PathLike | None = None) -> None:
    """One part of a step (``make record --jobs``): its cells trained into the runs folder, no record written."""
    entry = by_step(step)
    if part not in entry.parts():
        raise ValueError(f"part must be one of step {step}'s parts {list(entry.parts()) or '(it has none)'}, "
                         f"got {part!r}")
    _record_env(to)
    entry.train_part(part)


def minutes(step: str) -> float | None:
    """One core's minutes of training the shipped record of `step` took (its manifest's), else None."""
    rec = R.read(by_step(step).name, None)
    seconds = rec.manifest.get("train_seconds") if rec is not None else None
    return None if not seconds else seconds / 60


def expected(steps: tuple[str, ...], jobs: int = 1) -> str:
    """How long `steps` should take, from their shipped records' training times (a line for the user)."""
    known = {s: minutes(s) for s in steps}
    total = sum(m for m in known.values() if m)
    unknown = [s for s, m in known.items() if not m]
    longest = max((m / max(1, len(by_step(s).parts())) for s, m in known.items() if m), default=0.0)
    line = (f"the shipped records of these steps took {total:.0f} min of training on one core; with {jobs} job(s) "
            f"expect at least {max(total / jobs, longest):.0f} min")
    return line + (f" (plus {', '.join(unknown)}: no record to measure by)" if unknown else "")


def units(steps: tuple[str, ...], to: str | os.PathLike | None = None) -> list:
    """``make record --jobs``'s processes: one per step, and one per part of a step with parts (the step then
    writes its record from their cells, after them)."""
    from .record_jobs import Unit, command

    to = Path(to or R.RECORDED).resolve()
    out = []
    for step in steps:
        parts, total = by_step(step).parts(), minutes(step)
        share = None if total is None else total / max(1, len(parts))
        out += [Unit(f"{step}-{p}", command(step, p, to), share) for p in parts]
        out.append(Unit(step, command(step, None, to), 0.0 if parts else total,
                        after=tuple(f"{step}-{p}" for p in parts)))
    return out


def _make_parallel(steps: tuple[str, ...], to: str | os.PathLike | None, jobs: int) -> None:
    from ..paths import runs_dir
    from .record_jobs import run

    logs = runs_dir() / "record-logs"
    print(f"{len(steps)} step(s) with {jobs} jobs at once; each step's output is in {logs}", flush=True)
    run([_one_thread(u) for u in units(steps, to)], jobs, logs, say=lambda line: print(line, flush=True))
    print(f"records written to {Path(to or R.RECORDED).resolve()}")


def _one_thread(unit):
    """Every unit on one thread, as the records were made (``hardware.torch_threads`` of their manifests)."""
    from dataclasses import replace

    return replace(unit, env={**unit.env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})


__all__ = ["CHECK_EPOCHS", "Experiment", "EXPERIMENTS", "STEPS", "get", "by_step", "chapters", "tolerance", "Checked", "check", "make", "make_part", "minutes", "expected", "units"]
