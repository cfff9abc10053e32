"""How far each shipped record's checked run drifts under other CPU kernels and thread counts, and what a real change does.

    python benchmarks/record_drift.py                        # kernels default,avx2,avx512 x threads 1,2,4
    python benchmarks/record_drift.py --kernels default,avx2 --threads 1 --json drift.json

For every kernel set (``ATEN_CPU_CAPABILITY``: torch's portable kernels, AVX2, AVX-512 where the CPU
has it; the same values another CPU's torch picks) and thread count, a fresh process re-trains each
record's checked run (``vlr_lib.experiments.recheck``: the run the notebooks and tests re-train) at full
length with the shipped shapes encoder, and prints the largest gap to the record over the epochs the
checks compare: every epoch, and the first 3 (what fast mode re-trains for 09 and 11). Then, under this
CPU's own kernels, the same run with ONE thing changed -- the margin 0.2 -> 0.3, the learning rate x2, or
another loss -- must land farther from the record than the tolerance: those gaps say what the check
catches. It prints a table and the tolerance each record would get (the largest drift x 1.5 + 1,
at least 2, rounded up to half a point); ``vlr_lib.experiments.protocol`` holds the values chosen (docs/results.md).

A record's run pinned to one thread by the code (the showdown's and the lessons' cells; fast mode
pins every notebook to one) cannot depend on the thread count: the rows with 2 and 4 threads show it.
Takes about 2 minutes per kernel set and thread count on the project's 2-core CPU.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAST_EPOCHS = 3  # what fast mode re-trains of notebooks 09 and 11
MARK = "record_drift rows: "


def _gaps(recorded: list[float], again: list[float]) -> dict[str, float]:
    every = [abs(a - b) for a, b in zip(recorded, again)]
    return {"every": max(every), "first3": max(every[:FAST_EPOCHS]), "epochs": len(every)}


def one(threads: int, changes: bool, names: list[str] | None = None) -> list[dict]:
    """In this process: each record's checked run (of `names`, default all), re-trained; with `changes`, the
    changed runs instead."""
    import torch

    from vlr_lib.experiments import protocol

    torch.set_num_threads(threads)
    rows = []
    checks = _changed() if changes else {n: protocol.get(n).again for n in names or protocol.EXPERIMENTS}
    for name, pair in checks.items():
        t0 = time.perf_counter()
        recorded, again = pair(None)
        rows.append({"record": name, **_gaps(recorded, again), "seconds": round(time.perf_counter() - t0, 1),
                     "threads": torch.get_num_threads()})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _changed() -> dict:
    """The record 09's and the showdown's checked runs with one setting changed (what the check exists to catch)."""
    from vlr_lib.experiments import recheck
    from vlr_lib.experiments import record as R

    lr = R.read("09_training-shapes-full", None).manifest["settings"]["lr"]
    race = recheck.showdown("features")
    return {"09 Unified, margin 0.3": lambda e: recheck.training(e, loss=("unified", {"margin": 0.3, "gamma": 60.0})),
            "09 Unified, lr x2": lambda e: recheck.training(e, lr=2 * lr),
            "09 Unified -> NT-Xent": lambda e: recheck.training(e, loss=("info_nce", {"temperature": 0.1})),
            "showdown Triplet-SH, margin 0.3": lambda e: race(e, margin=0.3),
            "showdown Triplet-SH -> Triplet (all)": lambda e: race(e, loss="triplet_all")}


def _child(kernels: str, threads: int, changes: bool = False, names: list[str] | None = None) -> list[dict]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=path)
    if kernels != "native":
        env["ATEN_CPU_CAPABILITY"] = kernels
    else:
        env.pop("ATEN_CPU_CAPABILITY", None)
    cmd = [sys.executable, __file__, "--one", str(threads)] + (["--changes"] if changes else []) \
        + (["--records", ",".join(names)] if names else [])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"record_drift: the child for kernels={kernels} threads={threads} failed:\n{out.stderr[-2000:]}")
    line = next(x for x in reversed(out.stdout.splitlines()) if x.startswith(MARK))
    return [dict(r, kernels=kernels) for r in json.loads(line[len(MARK):])]


def tolerance(drift: float) -> float:
    """The tolerance a measured drift gives: x 1.5 + 1 rsum point, at least 2 (room for the CPUs not measured),
    rounded up to half a point."""
    return max(2.0, math.ceil((1.5 * round(drift, 2) + 1.0) * 2 - 1e-9) / 2)  # round(): CSV round trips ~1e-13


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", default="default,avx2,avx512", help="ATEN_CPU_CAPABILITY values (native: unset)")
    p.add_argument("--threads", default="1,2,4", help="torch thread counts")
    p.add_argument("--records", default=None, help="comma-separated record names (default: every shipped record)")
    p.add_argument("--no-changes", action="store_true", help="skip the runs with one setting changed")
    p.add_argument("--only-changes", action="store_true", help="only the runs with one setting changed")
    p.add_argument("--json", type=Path, default=None, help="also write every row here")
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--changes", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = args.records.split(",") if args.records else None
    if args.one is not None:
        print(MARK + json.dumps(one(args.one, args.changes, names)))
        return 0
    rows = []
    for kernels in [] if args.only_changes else args.kernels.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            t0 = time.perf_counter()
            rows += _child(kernels, threads, names=names)
            print(f"kernels={kernels} threads={threads}: {time.perf_counter() - t0:.0f} s", flush=True)
    changed = [] if args.no_changes else _child("native", 1, changes=True)
    _report(rows, changed)
    if args.json:
        args.json.write_text(json.dumps({"drift": rows, "changed": changed}, indent=1) + "\n")
    return 0


def _report(rows: list[dict], changed: list[dict]) -> None:
    from vlr_lib.experiments import protocol

    print("\n| record | kernels | threads | largest gap, every epoch | first 3 epochs |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['record']} | {r['kernels']} | {r['threads']} | {r['every']:.2f} | {r['first3']:.2f} |")
    print("\n| record | largest drift | tolerance it gives (x1.5 + 1, at least 2) | protocol tolerance |\n|---|---|---|---|")
    for name in dict.fromkeys(r["record"] for r in rows):
        drift = max(r["every"] for r in rows if r["record"] == name)
        print(f"| {name} | {drift:.2f} | {tolerance(drift)} | {protocol.tolerance(name)} |")
    if changed:
        print("\n| one thing changed | gap, every epoch | first 3 epochs |\n|---|---|---|")
        for r in changed:
            print(f"| {r['record']} | {r['every']:.2f} | {r['first3']:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
