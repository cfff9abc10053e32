"""The command lines as real processes: one-line errors, Ctrl-C and resume, torchrun on the CPU.

Each test starts Python (and torch) at least once, about 3 s, so there are few of them; the
bad values themselves are checked in-process in test_errors.py.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.cli.helpers import ROOT, TINY, call, env, run, torchrun
from vlr_lib import __main__ as entry
from vlr_lib.cli import train

TIME_KEYS = ("seconds", "train_seconds")


def strip_time(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in history]


@pytest.fixture
def one_thread():
    """Histories compared bit for bit: the same thread count as the child processes (OMP_NUM_THREADS=1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_a_bad_value_is_one_line_and_exit_2_in_a_real_process(tmp_path):
    done = run(["train", "--epochs", "0", "--history", "h.csv"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "python -m vlr_lib train: error: argument --epochs: must be an integer >= 1, got 0\n"
    assert done.stdout == "" and list(tmp_path.iterdir()) == []
    script = Path(sys.executable).with_name("vlr-grid")  # the console script pip installed
    if script.exists():
        done = subprocess.run([str(script), "--seeds", "0,0"], capture_output=True, text=True, cwd=tmp_path,
                              env=env(), timeout=120)
        assert done.returncode == 2 and done.stderr.startswith("vlr-grid: error: argument --seeds: ")
        assert len(done.stderr.splitlines()) == 1


def test_encoder_retrain_into_a_folder_of_the_users_files_is_one_line_at_once(tmp_path):
    """Issue 35: --retrain --to a folder holding the user's own manifest.json overwrote it after two minutes of
    training; now one line and exit 2 before any training (the timeout), the file untouched."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "manifest.json").write_text('{"mine": true}')
    done = run(["encoder", "--retrain", "--to", "mine"], cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("python -m vlr_lib encoder: error: argument --to: 'mine' holds other files")
    assert (tmp_path / "mine" / "manifest.json").read_text() == '{"mine": true}'


def test_module_entry_point_lists_and_dispatches_commands(capsys):
    assert entry.main([]) == 2 and "python -m vlr_lib train" in capsys.readouterr().err  # issue 23: was stdout
    assert entry.main(["--help"]) == 0 and "python -m vlr_lib train" in capsys.readouterr().out
    assert entry.main(["nope"]) == 2
    assert capsys.readouterr().err == ("python -m vlr_lib: error: unknown command 'nope'; "
                                       f"choose one of {', '.join(entry.COMMANDS)}\n")
    assert {"train", "grid", "showdown", "tuned", "lessons", "check", "record", "encoder", "losses"} <= set(entry.COMMANDS)
    for command, flag in (("train", "--loss"), ("grid", "--losses"), ("showdown", "--force"), ("tuned", "--values"),
                          ("lessons", "--force"),
                          ("record", "--only"), ("encoder", "--retrain"), ("losses", "--loss")):
        with pytest.raises(SystemExit) as exit_:
            entry.main([command, "--help"])
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: python -m vlr_lib {command}") and flag in out and "--debug" in out


def test_ctrl_c_exits_130_keeps_the_checkpoint_and_the_rerun_resumes(tmp_path, capsys, one_thread, monkeypatch):
    """SIGINT mid-run: exit 130, one line, no partial file; the same command again gives the uninterrupted history."""
    monkeypatch.chdir(tmp_path)
    argv = ["--mode", "features", "--n-train", "200", "--n-val", "20", "--dim", "16", "--batch-size", "16",
            "--epochs", "20", "--no-progress", "--checkpoint-dir", "ck", "--history", "h.json"]
    # 20 epochs of about 0.1 s: SIGINT comes within 20 ms of the first checkpoint, long before the last epoch
    # SIGINT as a terminal's Ctrl-C finds it: a test run started in the background of a non-interactive shell
    # (nohup make test &) passes SIGINT on ignored, and Python then installs no KeyboardInterrupt handler.
    child = subprocess.Popen([sys.executable, "-m", "vlr_lib", "train", *argv], cwd=tmp_path, env=env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (tmp_path / "ck" / "last.pt").exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130, (out, err)
    assert err == ("python -m vlr_lib train: interrupted; the last finished epoch is saved in ck; "
                   "run the same command again to resume\n")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["ck", "last.pt"]  # no history, no temp file
    done = torch.load(tmp_path / "ck" / "last.pt", weights_only=True)["epoch"]
    assert 1 <= done < 20

    assert call(train.main, argv, capsys)[0] == 0  # resumed in-process from epoch `done`
    resumed = json.loads((tmp_path / "h.json").read_text())
    shutil.rmtree(tmp_path / "ck")
    whole = [a if a != "h.json" else "whole.json" for a in argv]
    assert call(train.main, whole, capsys)[0] == 0
    assert strip_time(resumed) == strip_time(json.loads((tmp_path / "whole.json").read_text()))


SITECUSTOMIZE = '''
import os
import vlr_lib._io as io

_real = io.atomic_write


def _traced(path, write):
    with open(os.environ["VLR_TEST_WRITES"], "a") as log:
        log.write(f"{os.environ.get('RANK', '-')} {os.path.realpath(path)}\\n")
    return _real(path, write)


io.atomic_write = _traced
'''


def test_torchrun_two_ranks_match_one_process_and_write_each_file_once(tmp_path, capsys, one_thread, monkeypatch):
    """torchrun --nproc-per-node 2 -m vlr_lib train: the global batch is split, the history is one process's."""
    monkeypatch.chdir(tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)  # logs every atomic_write with the writer's rank
    log = tmp_path / "writes.log"
    argv = [*TINY, "--epochs", "3", "--checkpoint-dir", "ck", "--history", "two.json"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "vlr_lib", "train", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env=env(PYTHONPATH=f"{hook}:{ROOT}", VLR_TEST_WRITES=str(log), CUDA_VISIBLE_DEVICES=""))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("chance rsum") == 1  # rank 0 alone prints
    state = torch.load(tmp_path / "ck" / "last.pt", weights_only=True)
    assert json.loads(state["config"])["world_size"] == 2 and state["epoch"] == 3
    writes = log.read_text().splitlines()
    ck, hist = str((tmp_path / "ck" / "last.pt").resolve()), str((tmp_path / "two.json").resolve())
    assert sorted(writes) == sorted([f"0 {ck}"] * 3 + [f"0 {hist}"])  # one checkpoint per epoch, one history

    single = [a if a != "two.json" else "one.json" for a in argv if a not in ("--checkpoint-dir", "ck")]
    assert call(train.main, single, capsys)[0] == 0
    one, two = (json.loads((tmp_path / f).read_text()) for f in ("one.json", "two.json"))
    assert [r["epoch"] for r in two] == [1, 2, 3]
    for a, b in zip(one, two):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["rsum"] == pytest.approx(a["rsum"], abs=1e-6)
        assert b["steps"] == a["steps"]  # the same global batches, each split over the two ranks


def test_a_rank_that_dies_stops_the_others_with_a_message(tmp_path):
    start = time.monotonic()
    done = torchrun(2, [str(ROOT / "tests" / "cli" / "dying_rank.py"), "train", *TINY, "--epochs", "4",
                        "--dist-timeout", "30"], cwd=tmp_path)
    assert done.returncode != 0
    assert time.monotonic() - start < 120, "the surviving rank must not wait for its dead peer"
    text = done.stdout + done.stderr
    assert ("stopped by SIGTERM" in text) or ("another process of the job failed" in text), text[-3000:]


def test_a_bad_value_under_torchrun_is_one_line_from_rank_0_and_exit_2_on_every_rank(tmp_path):
    """Issue 23: the line came once per rank. torchrun itself then adds its own report of the failed children
    (ChildFailedError, about 40 lines naming each rank's exit code 2) and exits 1: that part is torchrun's."""
    for bad in (["--epochs", "0"], ["--loss", "nope"]):  # a parser error and one found after parsing
        done = torchrun(2, ["-m", "vlr_lib", "train", *TINY, *bad], cwd=tmp_path)
        ours = [line for line in done.stderr.splitlines() if line.startswith("python -m vlr_lib train: error:")]
        assert len(ours) == 1 and bad[0] in ours[0], done.stderr[-3000:]
        assert done.returncode != 0 and "exitcode  : 2" in done.stderr  # every rank's code, as torchrun reports it
        assert "exitcode  : 1" not in done.stderr and list(tmp_path.iterdir()) == []


def test_sigterm_outside_torchrun_says_what_happened_and_how_to_resume(tmp_path, capsys, monkeypatch):
    """Issue 35: SIGTERM to a plain grid blamed "another process of the job" and gave no resume hint."""
    import os

    from vlr_lib.cli import grid

    def terminated(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # the handler raises at the next bytecode; never reached
        pytest.fail("SIGTERM was not delivered")

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(grid, "_grid", terminated)
    code, out, err = call(grid.main, [*TINY, "--out", str(tmp_path / "g")], capsys)
    assert code == 128 + signal.SIGTERM and out == ""
    assert err == ("vlr-grid: terminated by a signal (SIGTERM); finished cells are kept under <out>/cells and the "
                   "current one resumes from its last epoch; run the same command again to continue\n")
    monkeypatch.setenv("WORLD_SIZE", "2")  # a rank of a torchrun job: torchrun stopping it is the likely cause
    code, out, err = call(grid.main, [*TINY, "--out", str(tmp_path / "g")], capsys)
    assert code == 128 + signal.SIGTERM and "another process of the job failed" in err and "same command" in err


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["tuned", "--help"]])
def test_output_to_a_closed_pipe_exits_quietly(argv, tmp_path):
    """Issue 35: `python -m vlr_lib --help | head -1` gave a BrokenPipeError traceback."""
    import os

    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first byte
    try:
        done = subprocess.run([sys.executable, "-m", "vlr_lib", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, env=env(), timeout=120)
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode in (0, 128 + signal.SIGPIPE), done.stderr
