"""Every file the workbook writes goes through :func:`atomic_write`; every file it reads back through :func:`read_back`.

Writing: a temp file next to the target, fsync, ``os.replace``: a crash or Ctrl-C leaves the
old file or the new one, never half of one. The new file gets the permissions a plain
``open(path, "w")`` would give (0666 minus the umask, or the mode of the file it replaces),
and writing to a symlink writes the file it points to (the link stays).

Reading: :func:`read_regular` reads a path only when it is a regular file (a FIFO in a file's place
would hang the read); a file that cannot be read back is reported with its path and the way out
(``--no-resume``, ``--force``, delete the cache, ...); a permission error is reported as one,
never as a damaged file, so nothing is rebuilt or retrained because of it.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")
_UMASK_LOCK = threading.Lock()


class UnreadableFileError(ValueError):
    """A file the workbook wrote cannot be read back: truncated, damaged, or not of the expected shape."""


class NoSpaceError(OSError):
    """The disk (or quota) is full while writing; ``str()`` is the one line "no space left on <folder>"."""

    def __init__(self, folder: Path):
        super().__init__(errno.ENOSPC, f"no space left on {folder}")
        self.folder = folder

    def __str__(self) -> str:
        return self.strerror


def _no_space(err: BaseException, folder: Path) -> bool:
    """`err` means a full disk: an ENOSPC / EDQUOT somewhere in its chain, or torch's zip writer failing on a
    short write ("unexpected pos", which drops the OSError) while under 1 MiB is free."""
    seen = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__ or seen.__context__
    if isinstance(err, RuntimeError):
        with contextlib.suppress(OSError):
            return shutil.disk_usage(folder).free < 2**20
    return False


def _umask() -> int:
    with _UMASK_LOCK:  # os.umask can only be read by setting it
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _target(path: str | os.PathLike) -> Path:
    """The file to replace: the end of a chain of symlinks (a dangling link's target is created)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(file_object)`` on a temp file next to `path`, fsync it, then ``os.replace`` it into place.

    A crash or interrupt at any point leaves either the old file or the new one, never a
    half-written file, and no temp file behind. Missing parent folders are created.
    """
    path = _target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:  # interrupts included
        full = isinstance(err, Exception) and _no_space(err, path.parent)  # measured before the temp file goes
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if full:
            raise NoSpaceError(path.parent) from err
        raise
    with contextlib.suppress(OSError):  # make the rename durable; not possible on every OS
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp folder next to `path` to fill; when the block succeeds it takes the place of `path`.

    For outputs that are folders (``DatasetDict.save_to_disk``): an interrupted write leaves the
    previous folder (or none), never half of one. An existing `path` is replaced.
    """
    path = _target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        if path.exists():
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            if old.exists() and not path.exists():
                os.replace(old, path)  # put the previous folder back
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write` of a UTF-8 text."""
    data = text.encode()
    atomic_write(path, lambda f: f.write(data))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """:func:`atomic_write` of ``obj`` as indented JSON (key order kept: it is the column order of tables)."""
    atomic_write_text(path, json.dumps(obj, indent=1))


# --------------------------------------------------------------------------- run folders

#: The file that marks a folder as a run folder (grid, showdown, lessons): only such a folder is written into.
RUN_MARKER = ".vlr-run"


def is_run_folder(path: str | os.PathLike) -> bool:
    """`path` holds the marker, or a ``cells/`` folder (run folders written before the marker existed)."""
    path = Path(path)
    return (path / RUN_MARKER).is_file() or (path / "cells").is_dir()


def run_folder_problem(path: str | os.PathLike) -> str | None:
    """Why the workbook may not write its runs into `path` (None when it may: missing, empty or a run folder)."""
    path = Path(path)
    if not path.is_dir() or is_run_folder(path):
        return None
    entries = sorted(p.name for p in path.iterdir() if p.name != LOCK_FILE)
    if not entries:
        return None
    shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    return (f"{str(path)!r} is a folder of other files ({shown}), not a run folder (no {RUN_MARKER}); "
            "choose a new or empty folder, so that nothing of yours is overwritten")


def claim_run_folder(path: str | os.PathLike, name: str = "out", mark: bool = True) -> Path:
    """Create and mark `path` as a run folder (unless not `mark`: under torchrun only rank 0 writes, every rank
    checks); a ValueError naming `name` when it holds other files."""
    problem = run_folder_problem(path)
    if problem:
        raise ValueError(f"{name} {problem}")
    path = Path(path)
    if mark and not (path / RUN_MARKER).is_file():
        atomic_write_text(path / RUN_MARKER, "a run folder of vlr_lib (grid, showdown, lessons): its cells and "
                                             "tables are rewritten by the runs\n")
    return path


LOCK_FILE = ".vlr-run.lock"


@contextlib.contextmanager
def locked(folder: str | os.PathLike, lock_file: str = LOCK_FILE) -> Iterator[None]:
    """Hold the write lock of `folder` (``folder/lock_file``) inside the block; a second writer waits for it.

    Two runs writing one folder would delete each other's partial checkpoints and rebuild its
    tables from different sets of cells; with the lock they take turns, and the one that waits
    says so in one line on stderr. Re-entrant in a process (showdown and lessons hold it around
    the grid that takes it too). The lock file stays after the block: deleting it would let a
    third writer lock a new file while a second one waits on the old.
    """
    from filelock import FileLock, Timeout

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / lock_file, is_singleton=True)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"vlr_lib: waiting for {folder}: another run is writing there (it goes on when that one ends; "
              "Ctrl-C stops waiting)", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


class NotRegularFileError(OSError):
    """A path to read is a FIFO, socket, device or folder, not a regular file: never read (a FIFO would hang)."""

    def __init__(self, path: Path, mode: int):
        self.kind = _kind(mode)  # "a FIFO (named pipe)", "a folder", ...
        super().__init__(errno.EINVAL, f"{path} is {self.kind}, not a regular file", str(path))

    def __str__(self) -> str:
        return self.strerror


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISLNK, "a symbolic link"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def read_regular(path: str | os.PathLike, follow_links: bool = True) -> bytes:
    """The bytes of `path`, which must be a regular file (with ``follow_links=False``, not a link to one either).

    Anything else is a :class:`NotRegularFileError` (an OSError) before it is opened: reading a FIFO blocks until
    someone writes to it, a device may never end. The open file is checked again (opened non-blocking), so one
    swapped in between is refused too. A missing file is FileNotFoundError, as usual.
    """
    path = Path(path)
    mode = (os.stat if follow_links else os.lstat)(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(path, mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(os.open(path, flags), "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, mode)
        return f.read()


def read_back(path: str | os.PathLike, read: Callable[[Path], T], what: str, fix: str) -> T:
    """``read(path)``, with every failure turned into an error that names the file and the fix.

    `what` names the file's role ("checkpoint", "grid cell"); `fix` says what to do when it
    is damaged ("rerun with --no-resume"). A missing file raises FileNotFoundError as usual; a
    permission error stays a PermissionError (with the path), because it is not damage and
    must not trigger a rebuild; anything else raises :class:`UnreadableFileError`.
    """
    path = Path(path)
    try:
        return read(path)
    except FileNotFoundError:
        raise
    except PermissionError as err:
        raise PermissionError(
            f"cannot read the {what} {path}: permission denied; fix the file's permissions "
            "(it is not damaged, so nothing was rebuilt)"
        ) from err
    except Exception as err:  # noqa: BLE001 - json, zip, pickle and EOF errors all mean "damaged"
        foreign = foreign_objects(err)
        if foreign is not None:
            raise UnreadableFileError(f"the {what} {path} {foreign}; {fix}") from None
        raise UnreadableFileError(
            f"the {what} {path} cannot be read, it is truncated or damaged ({type(err).__name__}: {err}); {fix}"
        ) from err


def foreign_objects(err: BaseException) -> str | None:
    """What to say when ``torch.load(weights_only=True)`` refused a pickle of Python objects (None for other errors).

    torch's own message suggests ``weights_only=False``, which would run the file's code: never shown.
    """
    import pickle

    text = str(err)
    if not isinstance(err, pickle.UnpicklingError) or "weights_only" not in text:
        return None
    found = re.search(r"GLOBAL ([\w.]+)", text)
    named = f" ({found.group(1)})" if found else ""
    return (f"holds pickled Python objects{named}, not only tensors: it was not written by vlr_lib and is never "
            "loaded (loading it could run code)")


def read_json(path: str | os.PathLike, what: str, fix: str, kind: type = dict) -> Any:
    """A JSON file of the given top-level `kind` (dict by default), read with :func:`read_back`."""

    def load(p: Path) -> Any:
        obj = json.loads(p.read_text())
        if not isinstance(obj, kind):
            raise TypeError(f"expected a JSON {kind.__name__}, found a {type(obj).__name__}")
        return obj

    return read_back(path, load, what, fix)
