"""Server-side cost of one slider move in every explorer, against the 150 ms target.

    python benchmarks/bench_widgets.py             # (make bench-widgets)
    python benchmarks/bench_widgets.py --repeats 3

For each explorer of the notebooks (tests/widgets/cases.py: notebook-sized inputs, fast mode), the
control the case names is moved to its value and back, `--repeats` times; each move is timed from
the new value to the figure's notebook output being ready to send (the viz builder, plotly's
validation and the JSON the browser receives: ``Explorer.redraw``). Printed per explorer: the
median and the worst move (wall clock), the median's ratio to the target, the median CPU time of
the process (what the move costs when the machine is shared), and the size of the output sent. The
browser's side (release to redrawn figure) is measured by the JupyterLab test
(tests/browser/test_jupyterlab.py), which prints it per explorer.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.widgets.cases: the explorers on the notebooks' inputs

from tests.widgets.cases import cases  # noqa: E402

TARGET_MS = 150.0


def time_moves(case, repeats: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU milliseconds of each move (there and back, `repeats` times), bytes of the output sent."""
    box = case.build()
    control = box.controls[case.control]
    start = control.value
    if control.disabled or case.value == start:
        raise ValueError(f"{case.name}: moving {case.control!r} to {case.value!r} would not redraw")
    wall, cpu = [], []
    for _ in range(repeats):
        for value in (case.value, start):
            t0, c0 = time.perf_counter(), time.process_time()
            control.value = value  # observers redraw synchronously
            wall.append(1e3 * (time.perf_counter() - t0))
            cpu.append(1e3 * (time.process_time() - c0))
    size = sum(len(json.dumps(out.outputs[0]["data"], default=str)) for out in box._outputs)
    return wall, cpu, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="moves there and back per explorer (default 5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    torch.set_num_threads(1)  # as the notebooks in fast mode
    print(f"{'nb':<3} {'explorer':<18} {'control':<24} {'median ms':>9} {'worst ms':>9} {'median/150':>10} "
          f"{'CPU ms':>7} {'output KB':>9}")
    over = []
    for case in cases():
        wall, cpu, size = time_moves(case, args.repeats)
        median, worst = statistics.median(wall), max(wall)
        print(f"{case.notebook:<3} {case.name:<18} {case.control[:24]:<24} {median:9.1f} {worst:9.1f} "
              f"{median / TARGET_MS:10.2f} {statistics.median(cpu):7.1f} {size / 1024:9.0f}")
        if median > TARGET_MS:
            over.append(case.name)
    print(f"\n{len(cases()) - len(over)} of {len(cases())} explorers redraw under {TARGET_MS:.0f} ms (median)"
          + (f"; over: {', '.join(over)}" if over else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
