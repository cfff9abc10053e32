"""A GPU that runs out of memory: one line naming --batch-size (the exception is simulated; no GPU here)."""
from __future__ import annotations

import pytest
import torch

from tests.cli.helpers import TINY, call
from tests.cli.test_errors import load_script
from vlr_lib.cli import showdown, train

OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
       "1.20 GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch")


def _raise_oom(*args, **kwargs):
    raise torch.OutOfMemoryError(OOM)  # = torch.cuda.OutOfMemoryError


def _one_line(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_training_oom_names_the_batch_size(monkeypatch, tmp_path, capsys):
    import vlr_lib.train

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(vlr_lib.train, "trainer", lambda setting: _raise_oom)  # the CLI trains through trainer()
    line = _one_line(*call(train.main, [*TINY, "--batch-size", "8"], capsys)[::2])
    assert line.startswith("vlr-train: error: argument --batch-size: the device ran out of memory")
    assert "(Tried to allocate 2.00 GiB)" in line and "(now 8)" in line


def test_extraction_oom_names_the_batch_size(monkeypatch, tmp_path, capsys):
    import vlr_lib.features

    monkeypatch.setattr(vlr_lib.features, "build_encoder", lambda *a, **k: None)  # no model: it fails first
    monkeypatch.setattr(vlr_lib.features, "extract_features", _raise_oom)
    script = load_script("extract_features")
    line = _one_line(*call(script.main, ["--data", "shapes", "--cache-root", str(tmp_path), "--weights", "none"],
                           capsys)[::2])
    assert "argument --batch-size" in line and "(the default)" in line


def test_a_command_without_the_flag_still_says_what_to_do(monkeypatch, tmp_path, capsys):
    from vlr_lib.experiments import showdown as sd

    monkeypatch.setattr(sd, "run", _raise_oom)
    line = _one_line(*call(showdown.main, ["--fast", "--out", str(tmp_path / "sd")], capsys)[::2])
    assert "ran out of memory" in line and "smaller batch" in line and "--batch-size:" not in line


@pytest.mark.parametrize("error", [RuntimeError("MPS backend out of memory (MPS allocated: 9 GB)"),
                                   torch.cuda.OutOfMemoryError(OOM)])
def test_every_out_of_memory_error_is_recognised(error):
    from vlr_lib.cli.args import out_of_memory

    assert out_of_memory(error) and not out_of_memory(RuntimeError("shape mismatch"))
