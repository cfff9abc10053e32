"""The one parser module of every command line: argument types, one-line errors, Ctrl-C, ``--debug``.

Used by ``vlr-train`` / ``vlr-grid`` / ``python -m vlr_lib ...`` and by the scripts in
``data_scripts/``. The contract, for every command:

- every value is checked where it is parsed (argparse ``type=`` functions below: positive
  ints and floats, fractions, probabilities, devices, existing inputs, writable outputs); a
  number is never replaced by a default because it is 0;
- every user error is ONE line on stderr, ``<prog>: error: argument --flag: ...``, exit code 2,
  before any long work starts (errors found while loading data too: a batch larger than the
  split, a missing cache, an unreadable checkpoint);
- Ctrl-C exits 130 and SIGTERM 143, each with one line saying what happened and how to resume; nothing
  is half-written (every file goes through ``vlr_lib._io.atomic_write``);
- output to a closed pipe (``python -m vlr_lib --help | head -1``) ends the command quietly, exit code 141
  (128 + SIGPIPE) as a program killed by SIGPIPE (:func:`exit_quietly`);
- a GPU that runs out of memory (training or feature extraction) is one line naming
  ``--batch-size`` and its value, exit code 1;
- ``--debug`` shows the traceback instead of the one line;
- under torchrun every rank finds a bad value alike, before the process group starts: rank 0
  alone prints the line and every rank exits 2. torchrun then adds its own report of the failed
  children (``ChildFailedError``: a traceback of the launcher and one block per rank saying
  ``exitcode : 2``, about 40 lines) and exits 1 itself; that part is torchrun's, out of the ranks' reach.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130


class UsageError(Exception):
    """A bad value found after parsing (e.g. while loading data); reported as ``argument <flag>: <message>``."""

    def __init__(self, flag: str | None, message: str):
        super().__init__(message)
        self.flag = flag


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block) and the ``--debug`` flag every command has."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument("--debug", action="store_true", help="show the Python traceback of an error")

    def error(self, message: str):  # argparse's own errors: unknown flags, bad choices, our type= checks
        if not first_rank():
            wait_for_rank_0()
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n" if first_rank() else None)


def first_rank() -> bool:
    """This process is rank 0 of a torchrun job, or not under torchrun: the one that prints a usage error.

    Read from the environment: a usage error is found before the process group starts, on every rank alike.
    """
    return os.environ.get("RANK", "0").strip() in ("", "0")


#: Seconds a rank other than 0 waits before it exits on a usage error. torchrun stops every rank as soon as one
#: exits; had rank 1 exited first, rank 0 would be stopped before it printed the job's one line (seen under load).
OTHER_RANKS_WAIT_S = 3.0


def wait_for_rank_0() -> None:
    """On a rank other than 0: give rank 0 the time to print the usage error and exit first. torchrun then stops
    this rank with SIGTERM: it still exits with the usage error's code, as every rank of the job does."""
    previous = signal.signal(signal.SIGTERM, lambda *_: os._exit(EXIT_USAGE))  # nothing of ours to flush
    try:
        time.sleep(OTHER_RANKS_WAIT_S)
    finally:
        signal.signal(signal.SIGTERM, previous)


def one_line(message: str) -> str:
    """A message on one line: the lines of a multi-line library message joined with '; ' (after a colon, ' ')."""
    out = ""
    for line in (line.strip() for line in str(message).splitlines()):
        if line:
            out += ("" if not out else " " if out.endswith(":") else "; ") + line
    return out


# --------------------------------------------------------------------------- argument types


def _fail(message: str):
    raise argparse.ArgumentTypeError(message)


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        _fail(f"must be an integer, got {text!r}")


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer >= `low` (``--epochs 0`` is an error, never the default), and <= `high` when given."""

    def parse(text: str) -> int:
        value = _int(text)
        if value < low:
            _fail(f"must be an integer >= {low}, got {value}")
        if high is not None and value > high:
            _fail(f"must be an integer <= {high}, got {value}")
        return value

    parse.__name__ = f"int>={low}"
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)
#: The most epochs a run may ask for: the presets train 4 to 40, so more than this is a typo (10**21 failed after
#: the data had loaded, inside the progress bar's integer arithmetic).
EPOCHS_MAX = 100_000
epochs = int_at_least(1, EPOCHS_MAX)
epoch_or_zero = int_at_least(0, EPOCHS_MAX)
#: numpy and torch seed generators with a signed 64-bit integer: a larger seed fails deep inside them.
SEED_MAX = 2**63 - 1
seed = int_at_least(0, SEED_MAX)


def memory_bytes() -> int:
    """This machine's physical memory in bytes (a large number where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**50


def sized(low: int, bytes_of: Callable[[int], float], what: str) -> Callable[[str], int]:
    """An integer >= `low` whose memory, at least ``bytes_of(value)``, fits this machine (checked before allocating).

    The estimate is a lower bound of what the run holds at once (`what` says of what), so a value refused
    here could never have run; one accepted may still run out later, which is reported as such.
    """
    at_least = int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        need, have = bytes_of(value), memory_bytes()
        if need > have:
            _fail(f"{value} needs at least {need / 2**30:.3g} GiB of memory ({what}); this machine has "
                  f"{have / 2**30:.3g} GiB")
        return value

    return parse


def finite_float(text: str) -> float:
    """A number whose float32 value is finite and, unless 0, not rounded to 0 (the trainer computes in float32)."""
    try:
        value = float(text)
    except ValueError:
        _fail(f"must be a number, got {text!r}")
    if not math.isfinite(value):
        _fail(f"must be a finite number, got {text!r}")
    if abs(value) > FLOAT32_MAX:
        _fail(f"must be at most {FLOAT32_MAX:.4g} in size (float32 overflows to inf), got {text}")
    if value != 0 and abs(value) < FLOAT32_TINY:
        _fail(f"must be 0 or at least {FLOAT32_TINY:.4g} in size (float32 rounds it to 0), got {text}")
    return value


FLOAT32_MAX, FLOAT32_TINY = 3.4028234663852886e38, 1.1754943508222875e-38


def positive_float(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        _fail(f"must be a number > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        _fail(f"must be a number >= 0, got {text}")
    return value


def clip_norm(text: str) -> float | str:
    """A gradient-clipping norm > 0, or "off" (no clipping)."""
    return "off" if text.strip().lower() == "off" else positive_float(text)


def positive_float_at_most(high: float, why: str) -> Callable[[str], float]:
    """A number in (0, `high`]; `why` says where the bound comes from."""

    def parse(text: str) -> float:
        value = positive_float(text)
        if value > high:
            _fail(f"must be at most {high:g} ({why}), got {text}")
        return value

    return parse


def probability(text: str) -> float:
    """A number in [0, 1] (e.g. the shapes difficulty)."""
    value = finite_float(text)
    if not 0.0 <= value <= 1.0:
        _fail(f"must be a number in [0, 1], got {text}")
    return value


def topk(text: str) -> int | float:
    """The one meaning of topk: an integer literal ("1", "50") is a count >= 1; any other number
    ("1.0", "0.5", "5e-1") a fraction in (0, 1] of the available negatives (1.0 = all)."""
    if re.fullmatch(r"\s*[+-]?\d+\s*", text):
        value = int(text)
        if value < 1:
            _fail(f"a count of negatives must be >= 1, got {value} (a fraction is written 0.5, 1.0)")
        return value
    value = finite_float(text)
    if not 0.0 < value <= 1.0:
        _fail(f"a fraction of the negatives must be in (0, 1], got {text} (a count is an integer: 1, 50)")
    return value


def device(text: str) -> str:
    """cpu, cuda, cuda:N or mps, present on this machine."""
    from ..train.device import parse_device

    try:
        return str(parse_device(text, "the device"))
    except ValueError as err:
        _fail(str(err))


def seeds(text: str) -> list[int]:
    """Comma-separated distinct integer seeds >= 0 ("0,1,2")."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        _fail("needs at least one seed, e.g. 0,1,2")
    out = [seed(p) for p in parts]
    repeated = sorted({s for s in out if out.count(s) > 1})
    if repeated:
        _fail(f"seeds must be distinct, got {text!r} ({', '.join(map(str, repeated))} repeated)")
    return out


#: The longest file name (one path component) and path, in bytes, that Linux and macOS file systems take.
NAME_MAX, PATH_MAX = 255, 4096


def _path(text: str) -> Path:
    """`text` as a path, refused when no file system would take it (a 300-byte name raised OSError, not a line)."""
    path = Path(text).expanduser()
    long = next((part for part in path.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        _fail(f"has a name of {len(os.fsencode(long))} bytes ({long[:16]!r}...); a file or folder name is at most "
              f"{NAME_MAX} bytes")
    if len(os.fsencode(str(path))) >= PATH_MAX:
        _fail(f"is {len(os.fsencode(str(path)))} bytes long; a path is at most {PATH_MAX - 1} bytes")
    return path


def _os_checked(check: Callable[[Path, str], Path]) -> Callable[[str], Path]:
    """A path type whose file system errors (a name too long, a loop of links) are one line naming the flag."""

    def parse(text: str) -> Path:
        path = _path(text)
        try:
            return check(path, text)
        except OSError as err:
            _fail(f"cannot use {text!r}: {err.strerror or err}")

    parse.__name__ = check.__name__
    return parse


@_os_checked
def existing_path(path: Path, text: str) -> Path:
    """An input file or folder that exists."""
    if not path.exists():
        _fail(f"{text!r} does not exist")
    if not os.access(path, os.R_OK):
        _fail(f"{text!r} is not readable (permission denied)")
    return path


def _writable(path: Path, text: str, folder: bool) -> Path:
    if not text.strip():  # Path("") is the current folder: never written into by accident
        _fail("is an empty path; name a folder or file, e.g. runs/mine")
    if path.exists() or path.is_symlink():
        target = path.resolve()
        if folder != target.is_dir() and target.exists():
            _fail(f"{text!r} is {'a file, not a folder' if folder else 'a folder, not a file'}")
        if target.exists() and not os.access(target, os.W_OK | (os.X_OK if folder else 0)):
            _fail(f"{text!r} is not writable (permission denied)")
        parent = target if folder and target.is_dir() else target.parent  # an existing folder is written into
    else:
        parent = path.parent
    while not parent.exists():  # the nearest existing ancestor must be a writable folder: the rest is created
        parent = parent.parent
    if not parent.is_dir():
        _fail(f"cannot create {text!r}: {str(parent)!r} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        _fail(f"cannot write {text!r}: {str(parent)!r} is not writable (permission denied)")
    try:  # a real write (an anonymous temp file): read-only and special file systems say no only here
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        _fail(f"cannot write {text!r}: {str(parent)!r} does not take new files ({err.strerror})")
    return path


@_os_checked
def output_file(path: Path, text: str) -> Path:
    """A file to write: not a folder, and its folder exists and is writable or can be created."""
    return _writable(path, text, folder=False)


@_os_checked
def output_dir(path: Path, text: str) -> Path:
    """A folder to write into: not a file, writable or creatable."""
    return _writable(path, text, folder=True)


@_os_checked
def run_dir(path: Path, text: str) -> Path:
    """A run folder to write into (grid, showdown, lessons ``--out``): writable, and missing, empty or a run folder
    already (``vlr_lib._io.RUN_MARKER``), never a folder of the user's other files."""
    from .._io import run_folder_problem

    if text.strip() and (problem := run_folder_problem(path)):
        _fail(problem)
    return _writable(path, text, folder=True)


def check_replaceable(path: Path, flag: str = "--out") -> None:
    """A folder a script may replace as a whole: missing, empty, or a saved dataset (never another folder)."""
    if path.is_dir() and any(path.iterdir()) and not (path / "dataset_dict.json").exists():
        raise UsageError(flag, f"{str(path)!r} exists and is not a saved dataset; choose a new folder")


def suffix(*allowed: str) -> Callable[[str], Path]:
    """An output file whose name ends in one of `allowed` (e.g. ".csv", ".json")."""

    def parse(text: str) -> Path:
        path = output_file(text)
        if path.suffix not in allowed:
            _fail(f"must end in {' or '.join(allowed)}, got {text!r}")
        return path

    return parse


def default_checked(parse: Callable[[str], object], text: str, flag: str) -> object:
    """A default value (e.g. a folder under $VLR_RUNS) checked like the flag's own values: a UsageError naming it."""
    try:
        return parse(text)
    except argparse.ArgumentTypeError as err:
        raise UsageError(flag, f"the default {text!r}: {err}") from None


def env(read: Callable[..., object], *args) -> object:
    """An environment variable read by ``vlr_lib.env`` (``env(env.flag, "VLR_FAST")``): as the notebooks read it,
    a bad value a usage error naming it."""
    try:
        return read(*args)
    except ValueError as err:
        raise UsageError(None, f"environment variable {err}") from None


# --------------------------------------------------------------------------- running a command


@contextlib.contextmanager
def quiet_datasets():
    """Hugging Face `datasets` logs errors before raising them; the command line reports them once, itself."""
    import datasets

    before = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        yield
    finally:
        datasets.logging.set_verbosity(before)


def _flag_of(message: str, parser: argparse.ArgumentParser) -> str | None:
    """``--batch-size`` when a library message starts with ``batch_size``, the name of one of our flags."""
    first = re.match(r"[A-Za-z_][A-Za-z0-9_]*", message)
    if not first:
        return None
    for action in parser._actions:
        if action.dest == first.group(0) and action.option_strings:
            return action.option_strings[-1]
    return None


def _user_errors() -> tuple[type[BaseException], ...]:
    from .._io import UnreadableFileError
    from ..data.flickr30k import DatasetUnavailableError
    from ..features import FeatureCacheError

    return (UsageError, ValueError, TypeError, FileNotFoundError, PermissionError, IsADirectoryError,
            NotADirectoryError, UnreadableFileError, DatasetUnavailableError, FeatureCacheError)


class Terminated(Exception):
    """SIGTERM: someone stopped the run (kill, a job scheduler), or torchrun stopping the other ranks when one fails."""


def _on_sigterm(signum, frame):
    raise Terminated()


def run(parser: Parser, argv: Sequence[str] | None, body: Callable[[argparse.Namespace], int],
        interrupted: Callable[[argparse.Namespace], str] = lambda args: "") -> int:
    """Parse `argv` and call ``body(args)``; turn every error into the contract of the module docstring.

    `interrupted(args)` says, after Ctrl-C, what was kept and how to resume.
    """
    args = parser.parse_args(argv)
    prog = parser.prog
    if args.debug:
        return body(args)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return body(args)
    except KeyboardInterrupt:
        hint = interrupted(args)
        print(f"{prog}: interrupted" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"{prog}: {_terminated_line(interrupted(args))}", file=sys.stderr)
        return 128 + signal.SIGTERM
    except BrokenPipeError:
        raise  # the reader of our output went away: exit_quietly's, not a failure of the run
    except _user_errors() as err:
        where = err.flag if isinstance(err, UsageError) else _flag_of(str(err), parser)
        text = one_line(err)
        if first_rank():  # every rank finds the same bad value: one line, not one per process
            print(f"{prog}: error: " + (f"argument {where}: " if where else "") + text, file=sys.stderr)
        else:
            wait_for_rank_0()
        return EXIT_USAGE
    except Exception as err:  # noqa: BLE001 - a failure of the run itself: one line, the traceback on --debug
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            print(f"{prog}: error: {_no_space_line(err)}; free some space and run the same command again "
                  "(finished work is kept)", file=sys.stderr)
            return EXIT_FAILED
        if out_of_memory(err):
            print(f"{prog}: error: {_oom_message(err, parser, args)}", file=sys.stderr)
            return EXIT_FAILED
        print(f"{prog}: error: {_failure(err)} (rerun with --debug for the traceback)", file=sys.stderr)
        return EXIT_FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminated_line(hint: str) -> str:
    """What SIGTERM did and how to resume: under torchrun it is most often the launcher stopping this rank because
    another one failed; outside it, someone or something (kill, a job scheduler) terminated the run."""
    from ..train import distributed as D

    cause = ("stopped by SIGTERM (under torchrun: most often another process of the job failed; its error is above)"
             if D.env_world_size() > 1 else "terminated by a signal (SIGTERM)")
    return cause + (f"; {hint}" if hint else "")


def exit_quietly(main: Callable[[], int | None]) -> int | str | None:
    """``main()``'s exit code, its output flushed; when the reader of stdout has gone (``python -m vlr_lib --help |
    head -1``), no traceback: stdout is pointed at /dev/null (so the interpreter's last flush is quiet too) and the
    exit code is 128 + SIGPIPE, as a program killed by SIGPIPE exits."""
    try:
        try:
            code = main()
        except SystemExit as exit_:  # argparse's --help and errors
            code = exit_.code
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _no_space_line(err: OSError) -> str:
    """"no space left on <folder>" (``_io.NoSpaceError`` says it; a raw ENOSPC names its file)."""
    from .._io import NoSpaceError

    if isinstance(err, NoSpaceError):
        return str(err)
    return f"no space left on {Path(err.filename).parent}" if err.filename else "no space left on the device"


def out_of_memory(err: BaseException) -> bool:
    """A GPU out-of-memory error (``torch.cuda.OutOfMemoryError``, alias ``torch.OutOfMemoryError``; MPS says so)."""
    import torch

    return isinstance(err, torch.cuda.OutOfMemoryError) or (isinstance(err, RuntimeError) and "out of memory" in str(err))


def _oom_message(err: BaseException, parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """One line: what ran out, the allocation that failed, and the flag that fixes it."""
    found = re.search(r"Tried to allocate \d+(\.\d+)? \w+", str(err))
    detail = f" ({found.group(0).strip()})" if found else ""
    flag = next((a for a in parser._actions if "--batch-size" in a.option_strings), None)
    if flag is None:
        return (f"the device ran out of memory{detail}; free it (other processes on the GPU) or use a smaller batch "
                "size (rerun with --debug for the traceback)")
    value = getattr(args, flag.dest, None)
    now = f" (now {value})" if value is not None else " (the default)"
    return (f"argument --batch-size: the device ran out of memory{detail}; lower --batch-size{now}, e.g. halve it, "
            "or free the GPU from other processes")


def _failure(err: Exception) -> str:
    from ..train import distributed as D
    from ..train.engine import TrainingDivergedError

    if isinstance(err, TrainingDivergedError):
        return one_line(err)
    text = f"{type(err).__name__}: {one_line(err)}"
    if D.env_world_size() > 1 and isinstance(err, RuntimeError):  # a collective failed: a peer died or hung
        rank = os.environ.get("RANK", "?")
        return f"rank {rank} of {D.env_world_size()}: another process of the job failed or timed out ({text})"
    return text
