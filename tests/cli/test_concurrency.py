"""Two runs writing one folder (issue 23): they take turns under the folder's lock, and no row is lost.

Real processes: the first grid pauses between reading the cells and writing runs.csv (the window
in which, without a lock, the second grid's row was overwritten), the second says that it waits.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pandas as pd

from tests.cli.helpers import TINY, env

#: A grid whose table rebuild pauses after reading the cells, until the file "go" appears.
PAUSED_GRID = """
import sys, time
from pathlib import Path
from vlr_lib.cli import grid
from vlr_lib.experiments import grid_search as gs

read = gs.union_runs

def paused(out):
    frame = read(out)
    Path("paused").touch()
    deadline = time.monotonic() + 120
    while not Path("go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return frame

gs.union_runs = paused
sys.exit(grid.main(sys.argv[1:]))
"""


def wait_for(path, child, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), child.communicate(timeout=10)


def test_two_grids_into_one_folder_take_turns_and_lose_no_row(tmp_path):
    (tmp_path / "paused_grid.py").write_text(PAUSED_GRID)
    argv = [*TINY, "--losses", "info_nce", "--out", "g"]
    popen = dict(cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = subprocess.Popen([sys.executable, "paused_grid.py", *argv, "--seeds", "0"], **popen)
    second = None
    try:
        wait_for(tmp_path / "paused", first)
        second = subprocess.Popen([sys.executable, "-m", "vlr_lib", "grid", *argv, "--seeds", "1"], **popen)
        waiting = ""
        while "waiting for" not in waiting:  # "" when the second ends without waiting: the test fails
            line = second.stderr.readline()
            assert line, f"the second grid did not wait for the first: {second.communicate(timeout=60)}"
            waiting = line
        assert waiting.startswith("vlr_lib: waiting for g: another run is writing there")
    finally:
        (tmp_path / "go").touch()
        out_a, err_a = first.communicate(timeout=300)
        out_b, err_b = second.communicate(timeout=300) if second else ("", "")
    assert first.returncode == 0 and second.returncode == 0, (err_a, err_b)
    assert err_b == ""  # the waiting line was the only one
    runs = pd.read_csv(tmp_path / "g" / "runs.csv")
    assert sorted(runs["seed"]) == [0, 1]  # was: 1 row for 2 cells
    assert len(list((tmp_path / "g" / "cells").glob("*.json"))) == 2
    assert not list((tmp_path / "g" / "cells").glob("*.partial"))
