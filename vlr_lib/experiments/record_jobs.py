"""``make record`` on several cores: its steps (and the parts of a step that train apart) as processes, longest first.

A record's runs train on one thread each (the records were made that way, ``OMP_NUM_THREADS=1``), so a machine with
`jobs` cores makes them `jobs` at a time: each :class:`Unit` is one ``python -m vlr_lib record --only <step>`` process
(``--part <part>`` for a part), with its output in a log file. A step with parts (the replication: one per setting)
trains them as separate units first; the step itself then writes its record from their cached cells in seconds.

Order: longest first (the longest-processing-time rule: the last unit to finish is a short one), by what each step's
shipped record says its training took (``train_seconds`` of its manifest, split evenly over its parts). A step
without a record runs first: its length is unknown.

Failure: a unit that exits non-zero stops the schedule; the units already running finish (their cells are kept), and
the error names the step and its log. Ctrl-C stops every unit; finished cells and records are kept, so the same
command continues.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: How often the scheduler looks at its processes, in seconds.
POLL = 0.5


@dataclass(frozen=True)
class Unit:
    """One process of the schedule: ``argv``, its expected minutes, and the units it must wait for."""

    name: str
    argv: tuple[str, ...]
    minutes: float | None  #: None: unknown (no record to measure it by), run first
    after: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


class UnitFailed(RuntimeError):
    """A unit of the schedule exited non-zero."""


def order(units: Sequence[Unit]) -> list[Unit]:
    """Longest first; unknown lengths before every known one; ties in the given order."""
    rank = {u.name: i for i, u in enumerate(units)}
    return sorted(units, key=lambda u: (u.minutes is not None, -(u.minutes or 0.0), rank[u.name]))


def run(units: Sequence[Unit], jobs: int, logs: Path, say: Callable[[str], None] = print) -> None:
    """Run `units`, at most `jobs` at a time, each unit's output in ``logs/<name>.log``; raise :class:`UnitFailed`
    after the running units finish when one fails."""
    if jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    _check_dependencies(units)
    logs.mkdir(parents=True, exist_ok=True)
    waiting, running, done, failed = order(units), {}, set(), []
    start = time.perf_counter()
    try:
        while waiting or running:
            for name, (proc, began) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[name]
                minutes = (time.perf_counter() - began) / 60
                if proc.returncode == 0:
                    done.add(name)
                    say(f"  {name} done in {minutes:.1f} min")
                else:
                    failed.append(name)
                    say(f"  {name} FAILED (exit {proc.returncode}) after {minutes:.1f} min: see {logs / name}.log")
            ready = [u for u in waiting if set(u.after) <= done] if not failed else []
            for unit in ready[: jobs - len(running)]:
                waiting.remove(unit)
                running[unit.name] = (_start(unit, logs), time.perf_counter())
                say(f"  {unit.name} started ({_expected(unit)}; log {logs / unit.name}.log)")
            if failed and not running:
                break
            time.sleep(POLL)
    except BaseException:
        _stop(proc for proc, _ in running.values())
        raise
    say(f"{len(done)} of {len(units)} unit(s) in {(time.perf_counter() - start) / 60:.1f} min with {jobs} job(s)")
    if failed:
        raise UnitFailed(f"make record step(s) {', '.join(failed)} failed; their logs are in {logs}; finished cells "
                         "and records are kept, so the same command continues")


def _check_dependencies(units: Sequence[Unit]) -> None:
    names = [u.name for u in units]
    if len(set(names)) != len(names):
        raise ValueError(f"unit names must be unique, got {names}")
    unknown = sorted({a for u in units for a in u.after} - set(names))
    if unknown:
        raise ValueError(f"units wait for units that are not scheduled: {unknown}")


def _expected(unit: Unit) -> str:
    return "length unknown" if unit.minutes is None else f"about {unit.minutes:.0f} min on one core"


def _start(unit: Unit, logs: Path) -> subprocess.Popen:
    with open(logs / f"{unit.name}.log", "ab") as log:  # appended: a resumed run keeps the first try's output
        return subprocess.Popen(unit.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **unit.env}, start_new_session=True)


def _stop(procs) -> None:
    """Stop every unit's whole process group (a unit may run a notebook kernel), then wait for them.

    SIGTERM, not SIGINT: a process started from a background shell ignores SIGINT, and Python then never turns it
    into KeyboardInterrupt; ``python -m vlr_lib record`` handles SIGTERM itself (its cells and records are kept)."""
    procs = list(procs)
    for proc in procs:
        _signal(proc, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            proc.wait()


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:  # already gone
        pass


def command(step: str, part: str | None, to: Path) -> tuple[str, ...]:
    """The process of one unit: this Python, ``-m vlr_lib record`` for one step (or one part of it)."""
    return (sys.executable, "-m", "vlr_lib", "record", "--only", step, "--to", str(to),
            *(("--part", part) if part else ()))


__all__ = ["Unit", "UnitFailed", "order", "run", "command"]
