"""Running the command lines in-process (fast) and as real processes (the one-line contract end to end)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: A run that takes a second: heads on shapes features, small sizes.
TINY = ["--mode", "features", "--n-train", "40", "--n-val", "20", "--dim", "16", "--batch-size", "16",
        "--epochs", "2", "--no-progress"]


def call(main: Callable[[Sequence[str]], int], argv: Sequence[str], capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``main(argv)``; argparse's own exits become codes too."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@contextlib.contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail with TimeoutError instead of hanging (a read of a FIFO blocks until someone writes to it)."""
    def hung(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a read blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file (and folder) under `folder` with its size and mtime: nothing may change on a user error."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def env(**extra: str) -> dict[str, str]:
    """The environment of a child process: this checkout importable, one torch thread, no inherited VLR_* switch."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("VLR_")}
    return {**base, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra}


def run(args: Sequence[str], cwd: Path, timeout: float = 180, **extra: str) -> subprocess.CompletedProcess:
    """``python -m vlr_lib <args>`` in a real process."""
    return subprocess.run([sys.executable, "-m", "vlr_lib", *args], capture_output=True, text=True, cwd=cwd,
                          env=env(**extra), timeout=timeout)


def torchrun(nproc: int, target: Sequence[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc-per-node <nproc> <target>`` on the CPU (gloo)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *target]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env(CUDA_VISIBLE_DEVICES=""),
                          timeout=timeout)
