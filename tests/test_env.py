"""vlr_lib.env: the one reader of the on/off and choice variables, shared by the notebooks and the command lines."""
from __future__ import annotations

import pytest
import torch

from vlr_lib import env, notebook
from vlr_lib.cli import args as A
from vlr_lib.cli import showdown as cli_showdown


@pytest.mark.parametrize("value, default, expected", [
    ("1", False, True), (" TRUE ", False, True), ("yes", False, True),
    ("0", True, False), ("false", True, False), ("No", True, False),
    ("", False, False), ("", True, True), ("  ", True, True),  # empty is unset: the default
    (None, False, False), (None, True, True),
])
def test_a_flag_is_on_off_and_empty_is_unset(monkeypatch, value, default, expected):
    if value is None:
        monkeypatch.delenv("VLR_TEST_FLAG", raising=False)
    else:
        monkeypatch.setenv("VLR_TEST_FLAG", value)
    assert env.flag("VLR_TEST_FLAG", default) is expected


def test_a_value_not_understood_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("VLR_FAST", "maybe")
    with pytest.raises(ValueError, match="^VLR_FAST must be 0 or 1, got 'maybe'"):
        env.flag("VLR_FAST")
    monkeypatch.setenv("VLR_DATA", "coco")
    with pytest.raises(ValueError, match="^VLR_DATA must be one of"):
        env.choice("VLR_DATA", ("shapes", "flickr30k"), "shapes")


def test_a_choice_is_case_insensitive_and_empty_is_its_default(monkeypatch):
    monkeypatch.setenv("VLR_DATA", " Flickr30K ")
    assert env.choice("VLR_DATA", ("shapes", "flickr30k"), "shapes") == "flickr30k"
    monkeypatch.setenv("VLR_DATA", "")
    assert env.choice("VLR_DATA", ("shapes", "flickr30k"), "shapes") == "shapes"


@pytest.mark.parametrize("value, fast", [("", False), ("1", True), ("0", False)])
def test_the_notebooks_and_the_command_lines_read_vlr_fast_alike(monkeypatch, value, fast):
    monkeypatch.setenv("VLR_FAST", value)
    monkeypatch.setenv("VLR_DATA", "")
    monkeypatch.setenv("VLR_DEVICE", "cpu")
    threads = torch.get_num_threads()
    try:
        assert notebook.setup(renderer=None).fast is fast
    finally:
        torch.set_num_threads(threads)  # fast mode runs single-threaded
    args = cli_showdown.resolve_env(cli_showdown.parser().parse_args([]))
    assert (args.fast, args.data) == (fast, "shapes")


def test_the_command_lines_turn_a_bad_value_into_a_usage_error(monkeypatch):
    monkeypatch.setenv("VLR_FAST", "maybe")
    with pytest.raises(A.UsageError, match="environment variable VLR_FAST must be 0 or 1"):
        A.env(env.flag, "VLR_FAST")
