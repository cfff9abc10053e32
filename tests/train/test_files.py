"""vlr_lib._io: atomic writes with the umask's permissions, through symlinks; reading back with a named fix."""
from __future__ import annotations

import errno
import io
import os
import shutil
import stat

import pytest
import torch

from vlr_lib._io import (NoSpaceError, UnreadableFileError, atomic_dir, atomic_write,
                          atomic_write_text, read_back, read_json)
from vlr_lib.train import checkpoint as ck


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_files_get_the_permissions_of_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        with atomic_dir(tmp_path / "d") as d:
            (d / "f").write_text("y")
    finally:
        os.umask(old)
    assert mode(tmp_path / "a.txt") == 0o666 & ~umask  # was 0600 whatever the umask
    assert mode(tmp_path / "d") == 0o777 & ~umask


def test_replacing_a_file_keeps_its_mode(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old")
    path.chmod(0o640)
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and mode(path) == 0o640


def test_writing_to_a_symlink_writes_its_target(tmp_path):
    target = tmp_path / "real" / "h.csv"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "h.csv"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "later.csv"
    dangling.symlink_to(tmp_path / "real" / "later.csv")
    atomic_write_text(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "later.csv").read_text() == "made"


def test_a_failed_folder_write_keeps_the_previous_folder(tmp_path):
    out = tmp_path / "data"
    with atomic_dir(out) as d:
        (d / "v").write_text("1")
    with pytest.raises(OSError, match="disk full"):
        with atomic_dir(out) as d:
            (d / "v").write_text("2")
            raise OSError("disk full")
    assert (out / "v").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "x.bin"
    atomic_write(path, lambda f: f.write(b"good"))

    def crash(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, crash)
    assert path.read_bytes() == b"good" and os.listdir(tmp_path) == ["x.bin"]


def test_read_back_names_the_file_and_the_fix_and_keeps_permission_errors_apart(tmp_path):
    bad = tmp_path / "cell.json"
    bad.write_text('{"a": ')
    with pytest.raises(UnreadableFileError, match=r"the grid cell .*cell.json cannot be read.*delete it"):
        read_json(bad, "grid cell", "delete it")
    bad.write_text("[1]")
    with pytest.raises(UnreadableFileError, match="expected a JSON dict, found a list"):
        read_json(bad, "grid cell", "delete it")

    def denied(path):
        raise PermissionError(13, "Permission denied")

    with pytest.raises(PermissionError, match=r"cell.json: permission denied.*not damaged"):
        read_back(bad, denied, "grid cell", "delete it")
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json", "grid cell", "delete it")


def test_a_truncated_checkpoint_says_delete_or_no_resume(tmp_path):
    path = tmp_path / ck.CHECKPOINT_NAME
    ck.save_checkpoint(path, {"epoch": 1, "w": torch.ones(3)})
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(UnreadableFileError, match=r"checkpoint .*last.pt.*truncated or damaged.*--no-resume"):
        ck.load_checkpoint(path)


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("write", [
    lambda f: _full(),  # the writer itself
    lambda f: torch.save({"w": torch.zeros(3)}, _FullFile()),  # torch.save hitting a full disk
])
def test_a_full_disk_is_one_error_naming_the_folder(tmp_path, write):
    """Issue 23: was "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos ..."."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "last.pt").write_text("old")
    with pytest.raises(NoSpaceError) as err:
        atomic_write(tmp_path / "ck" / "last.pt", write)
    assert str(err.value) == f"no space left on {tmp_path / 'ck'}" and err.value.errno == errno.ENOSPC
    assert [p.name for p in (tmp_path / "ck").iterdir()] == ["last.pt"]  # the old file, no temp file
    assert (tmp_path / "ck" / "last.pt").read_text() == "old"


class _FullFile(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        _full()


def test_a_short_write_of_torch_is_a_full_disk_only_when_the_disk_is_full(tmp_path, monkeypatch):
    """torch's zip writer drops the OSError of a short write ("unexpected pos"): the free space decides."""
    def short(f):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    usage = shutil.disk_usage(tmp_path)
    with pytest.raises(RuntimeError, match="unexpected pos"):
        atomic_write(tmp_path / "a.pt", short)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=4096))
    with pytest.raises(NoSpaceError, match=f"^no space left on {tmp_path}$"):
        atomic_write(tmp_path / "a.pt", short)
