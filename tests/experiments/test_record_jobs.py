"""``make record --jobs``: steps as processes, longest first, parts before the step that writes, failures named."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from vlr_lib.cli import record as cli_record
from vlr_lib.experiments import protocol, record_jobs
from vlr_lib.experiments.record_jobs import Unit, UnitFailed

from ..cli.helpers import call


def _unit(name: str, folder: Path, seconds: float = 0.0, minutes: float | None = 1.0, after=(), code: int = 0) -> Unit:
    """A process that notes when it starts and ends in folder/<name>.start and .end, then exits with `code`."""
    script = (f"import time, pathlib; f = pathlib.Path({str(folder)!r}); "
              f"(f / '{name}.start').write_text(repr(time.time())); time.sleep({seconds}); "
              f"(f / '{name}.end').write_text(repr(time.time())); raise SystemExit({code})")
    return Unit(name, (sys.executable, "-c", script), minutes, tuple(after))


def _times(folder: Path, name: str) -> tuple[float, float]:
    return float((folder / f"{name}.start").read_text()), float((folder / f"{name}.end").read_text())


def test_longest_first_and_unknown_lengths_before_known_ones(tmp_path):
    units = [_unit("a", tmp_path, minutes=5), _unit("b", tmp_path, minutes=40), _unit("c", tmp_path, minutes=None),
             _unit("d", tmp_path, minutes=40)]
    assert [u.name for u in record_jobs.order(units)] == ["c", "b", "d", "a"]


def test_units_run_at_once_and_a_step_waits_for_its_parts(tmp_path):
    units = [_unit("part-1", tmp_path, 1.0), _unit("part-2", tmp_path, 1.0),
             _unit("step", tmp_path, minutes=0.0, after=("part-1", "part-2"))]
    lines = []
    record_jobs.run(units, 2, tmp_path / "logs", say=lines.append)
    (s1, e1), (s2, e2), (s3, _) = (_times(tmp_path, n) for n in ("part-1", "part-2", "step"))
    assert s2 < e1 and s1 < e2  # the two parts overlapped
    assert s3 >= max(e1, e2)  # the step began after both
    assert lines[-1].startswith("3 of 3 unit(s)") and all((tmp_path / "logs" / f"{u.name}.log").exists() for u in units)


def test_one_job_runs_one_unit_at_a_time(tmp_path):
    units = [_unit("x", tmp_path, 0.3), _unit("y", tmp_path, 0.3)]
    record_jobs.run(units, 1, tmp_path / "logs", say=lambda line: None)
    (sx, ex), (sy, ey) = _times(tmp_path, "x"), _times(tmp_path, "y")
    assert ex <= sy or ey <= sx


def test_a_failed_unit_stops_the_schedule_and_is_named(tmp_path):
    units = [_unit("bad", tmp_path, 0.0, minutes=9, code=3), _unit("slow", tmp_path, 1.0, minutes=8),
             _unit("later", tmp_path, 0.0, minutes=1), _unit("writer", tmp_path, minutes=0, after=("bad",))]
    lines = []
    with pytest.raises(UnitFailed, match="step.*bad failed.*logs"):
        record_jobs.run(units, 2, tmp_path / "logs", say=lines.append)
    assert (tmp_path / "slow.end").exists()  # the unit already running finished: its cells are kept
    assert not (tmp_path / "later.start").exists() and not (tmp_path / "writer.start").exists()
    assert any("bad FAILED (exit 3)" in line for line in lines)


def test_ctrl_c_stops_every_running_unit(tmp_path):
    units = [_unit("long", tmp_path, 30.0)]

    def interrupt(line: str) -> None:
        if "started" in line:
            while not (tmp_path / "long.start").exists():
                time.sleep(0.05)
            raise KeyboardInterrupt

    began = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        record_jobs.run(units, 1, tmp_path / "logs", say=interrupt)
    assert time.perf_counter() - began < 20 and not (tmp_path / "long.end").exists()


@pytest.mark.parametrize("jobs", [0, -1])
def test_jobs_below_one_is_refused(tmp_path, jobs):
    with pytest.raises(ValueError, match="jobs must be an integer >= 1"):
        record_jobs.run([_unit("a", tmp_path)], jobs, tmp_path)


def test_waiting_for_an_unscheduled_unit_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not scheduled.*ghost"):
        record_jobs.run([_unit("a", tmp_path, after=("ghost",))], 2, tmp_path)


def test_the_replication_trains_its_settings_apart_then_writes(tmp_path):
    units = {u.name: u for u in protocol.units(("10-features", "13"), tmp_path)}
    assert set(units) == {"10-features", "13-features", "13-vsepp", "13"}
    assert units["13"].after == ("13-features", "13-vsepp")
    assert units["13-vsepp"].argv[-4:] == ("--to", str(tmp_path), "--part", "vsepp")
    assert units["13"].argv[-2:] == ("--to", str(tmp_path))
    # the lengths are the shipped records' training times, the replication's split over its two parts
    assert units["10-features"].minutes == pytest.approx(protocol.minutes("10-features"))
    assert units["13-features"].minutes == pytest.approx(protocol.minutes("13") / 2)


@pytest.mark.parametrize("argv, flag, words", [
    (["--jobs", "0"], "--jobs", "must be an integer >= 1"),
    (["--part", "features"], "--part", "exactly one step in --only"),
    (["--only", "10-features,13", "--part", "features"], "--part", "exactly one step"),
    (["--only", "13", "--part", "nope"], "--part", "must be one of step 13's parts features, vsepp"),
    (["--only", "10-features", "--part", "features"], "--part", "(none)"),
])
def test_bad_jobs_and_parts_are_one_line_errors(argv, flag, words, capsys):
    code, out, err = call(cli_record.main, argv, capsys)
    assert code == 2 and err.count("\n") == 1 and f"argument {flag}" in err and words in err, err


def test_make_record_runs_one_job_per_core():
    text = (Path(protocol.__file__).resolve().parents[2] / "Makefile").read_text()
    assert "RECORD_JOBS ?= $(shell nproc" in text and "-m vlr_lib record --jobs $(RECORD_JOBS)" in text


def test_the_expected_time_is_read_from_the_records():
    line = protocol.expected(("10-features", "13"), 2)
    total = protocol.minutes("10-features") + protocol.minutes("13")
    assert f"took {total:.0f} min of training on one core" in line
    assert f"at least {max(total / 2, protocol.minutes('13') / 2):.0f} min" in line


def test_a_stopped_notebook_step_takes_its_kernel_with_it():
    """nbclient starts the kernel in a session of its own: a step stopped early kills it (else it trains on)."""
    import subprocess
    import types

    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    client = types.SimpleNamespace(km=types.SimpleNamespace(
        provisioner=types.SimpleNamespace(pid=kernel.pid, has_process=True)))
    protocol._stop_kernel(client)
    assert kernel.wait(timeout=10) != 0
    protocol._stop_kernel(client)  # already gone: nothing to do
    protocol._stop_kernel(types.SimpleNamespace(km=None))  # never started
