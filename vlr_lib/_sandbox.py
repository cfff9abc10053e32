"""What keeps a graded answer from changing its own score (``vlr_lib.grading``): one call of it, guarded.

:func:`call` runs a student's function once with four guards and returns an :class:`Outcome` that holds
only a small summary of what happened (never the answer's big tensors or its exception's frames):

- **the library is put back**: a :class:`Snapshot` taken when ``vlr_lib.grading`` is imported holds every
  attribute of the loaded ``vlr_lib`` modules (public ones; private functions and classes too) and the
  contents of their public dicts; ``Snapshot(library=False)``, taken when a check starts, the public names
  of ``torch``, ``torch.nn.functional``, ``torch.linalg``, ``math`` and ``builtins`` and every attribute of
  the ``Tensor`` classes (those change on their own: a Jupyter kernel swaps ``builtins.input`` for every
  cell, ``import torch._dynamo`` wraps ``torch.manual_seed``). Whatever the answer rebinds there is
  restored right after it returns (and reported), so a replaced ``losses.triplet_hardest``,
  ``grading.grade`` or ``torch.allclose`` never outlives the call;
- **calls are traced**: a ``sys.setprofile`` hook records calls to the functions an exercise forbids (by
  code object, so ``from vlr_lib.losses import triplet_hardest as th`` is caught too) and whether the
  answer switched the hook off;
- **a time limit**: ``signal.setitimer`` raises :class:`Timeout` (a ``BaseException``, so an answer's
  ``except Exception`` cannot swallow it) after `seconds`. It needs SIGALRM and the main thread (a
  Jupyter kernel runs cells there); on Windows or off the main thread there is no limit, and the
  Outcome says so (``limited`` is False);
- **one summary per failure**: an exception becomes its type name and message; ``NotImplementedError``
  counts as "not implemented" only when the answer's own body raised it (the unfilled stub), never when it
  came from a helper the answer calls.

Everything :func:`call` uses after the answer has run is bound when this module is imported (default
arguments), so patching this module's globals from inside an answer changes nothing. This guards the
practice checks in a student's kernel; it is no sandbox: code that sets out to, can still reach the
process. Marks come from ``python -m vlr_lib grade``, which runs each notebook in a fresh process.
"""
from __future__ import annotations

import signal
import sys
import threading
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

#: An answer's result bigger than this many elements is described, never kept (the expected ones are tiny).
MAX_ELEMENTS = 100_000


class Timeout(BaseException):
    """An answer ran past its time limit (a BaseException: an answer's ``except Exception`` does not catch it)."""


class WrongType(Exception):
    """An answer returned something that is not a tensor or a number; the message says what it returned."""


@dataclass(frozen=True)
class Outcome:
    """One guarded call: the answer as a plain CPU tensor, or why there is none; what it called and changed."""

    value: torch.Tensor | None
    failure: str | None  # "raised ValueError: ...", "returned None ...", "ran past 2 s", ...
    kind: str  # "ok", "not-implemented", "timeout", "exit", "error", "wrong-type"
    forbidden: tuple[str, ...]  # the forbidden functions it called, by qualified name
    changed: tuple[str, ...]  # what of the library it changed (restored since)
    untraced: bool  # it switched the call tracing off
    limited: bool  # a time limit was in force


# --------------------------------------------------------------------------- the library, snapshot and restored

#: What the references and the comparison rely on besides vlr_lib (their public names).
_PUBLIC_OF = ("torch", "torch.nn.functional", "torch.linalg", "math", "builtins")
#: Attributes Python adds to a class as a cache (copyreg, on the first deepcopy or pickle of a tensor): no change.
_CACHES = frozenset({"__slotnames__"})


def _watched_modules(library: bool) -> list[tuple[str, types.ModuleType, bool]]:
    """(name, module, is ours): every loaded vlr_lib module (`library`), or the others a reference relies on."""
    if not library:
        return [(n, sys.modules[n], False) for n in _PUBLIC_OF if n in sys.modules]
    return [(n, m, True) for n, m in list(sys.modules.items())
            if isinstance(m, types.ModuleType) and (n == "vlr_lib" or n.startswith("vlr_lib."))]


def _kept(name: str, value: object, ours: bool) -> bool:
    """The module attributes a snapshot holds: public ones, and in vlr_lib private functions, classes and modules."""
    if name.startswith("__"):
        return False
    if not name.startswith("_"):
        return True
    return ours and isinstance(value, (types.FunctionType, type, types.ModuleType))


class Snapshot:
    """The attributes of the watched modules and classes, as they were when it was taken; :meth:`restore` puts
    them back and names what had changed."""

    def __init__(self, library: bool = True) -> None:
        watched = _watched_modules(library)
        self._modules = {n: m for n, m, ours in watched if ours}
        self._attrs: list[tuple[object, str, str, object]] = []  # (owner, its name, attribute, value)
        self._dicts: list[tuple[dict, str, dict]] = []  # (a public dict, its name, a shallow copy)
        for name, module, ours in watched:
            for attr, value in list(vars(module).items()):
                if _kept(attr, value, ours):
                    self._attrs.append((module, name, attr, value))
                    if ours and isinstance(value, dict) and not attr.startswith("_"):
                        self._dicts.append((value, f"{name}.{attr}", dict(value)))
        classes = () if library else (torch.Tensor, torch._C.TensorBase)
        self._classes = [(cls, f"torch.{cls.__name__}", dict(vars(cls))) for cls in classes]

    def restore(self, _id=id, _getattr=getattr, _setattr=setattr, _delattr=delattr, _vars=vars, _list=list,
                _tuple=tuple, _missing=object(), _modules=sys.modules) -> tuple[str, ...]:
        """Put back every watched attribute that changed since the snapshot; the names of those that had."""
        changed = []
        for name, module in self._modules.items():
            if _modules.get(name, _missing) is not module:
                _modules[name] = module
                changed.append(f"sys.modules[{name!r}]")
        for owner, name, attr, value in self._attrs:
            if _vars(owner).get(attr, _missing) is not value:
                _setattr(owner, attr, value)
                changed.append(f"{name}.{attr}")
        for live, name, copy in self._dicts:
            if live != copy:
                live.clear()
                live.update(copy)
                changed.append(name)
        for cls, name, attrs in self._classes:
            now = _vars(cls)
            for attr in _list(now):
                if attr not in attrs and attr not in _CACHES:
                    _delattr(cls, attr)
                    changed.append(f"{name}.{attr}")
            for attr, value in attrs.items():
                if now.get(attr, _missing) is not value:
                    _setattr(cls, attr, value)
                    changed.append(f"{name}.{attr}")
        return _tuple(changed)


def codes_of(functions: Iterable[Callable]) -> dict[types.CodeType, str]:
    """The code objects of `functions` (decorators unwrapped), each with the name a message gives it."""
    import inspect

    out = {}
    for fn in functions:
        inner = inspect.unwrap(fn)
        out[inner.__code__] = f"{fn.__module__}.{fn.__qualname__}"
    return out


# --------------------------------------------------------------------------- one guarded call


def _describe(exc: BaseException, seconds: float | None) -> tuple[str, str]:
    """(kind, message) of an exception an answer raised; the traceback is dropped with the exception."""
    if isinstance(exc, Timeout):
        return "timeout", f"ran past the time limit of {seconds:g} s (an endless loop, or far too slow)"
    if isinstance(exc, SystemExit):
        return "exit", (f"called sys.exit({exc.code!r}) (raised SystemExit): a graded function must return its "
                        "result, never end the program")
    tb = exc.__traceback__
    own = tb is not None and tb.tb_next is not None and tb.tb_next.tb_next is None  # raised in the answer's body
    if isinstance(exc, NotImplementedError) and own:
        return "not-implemented", "not implemented"
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return "error", f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def _alarm(signum, frame):
    raise Timeout()


def call(fn: Callable, kwargs: dict, convert: Callable[[object], torch.Tensor], restore: Callable[[], tuple[str, ...]],
         codes: dict[types.CodeType, str], seconds: float | None, *,
         _setprofile=sys.setprofile, _getprofile=sys.getprofile, _signal=getattr(signal, "signal", None),
         _setitimer=getattr(signal, "setitimer", None), _sigalrm=getattr(signal, "SIGALRM", None),
         _itimer=getattr(signal, "ITIMER_REAL", None), _current=threading.current_thread,
         _main=threading.main_thread, _describe=_describe, _alarm=_alarm, _Timeout=Timeout, _WrongType=WrongType,
         _Outcome=Outcome, _tuple=tuple, _sorted=sorted, _str=str) -> Outcome:
    """``convert(fn(**kwargs))`` under the guards of the module docstring; KeyboardInterrupt still propagates
    (after the library is restored), so Ctrl-C stops the check."""
    hits: set[str] = set()

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            hits.add(codes[frame.f_code])

    limited = seconds is not None and _setitimer is not None and _current() is _main()
    kind, failure, value, changed, untraced = "ok", None, None, (), False
    previous_alarm = _signal(_sigalrm, _alarm) if limited else None
    previous_profile = _getprofile()
    try:
        try:
            if limited:
                _setitimer(_itimer, seconds)
            _setprofile(hook)
            try:
                raw = fn(**kwargs)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - every way an answer can fail is a summary
                kind, failure = _describe(exc, seconds)
                raw = None
                del exc
            changed = restore()  # before convert: it runs our code, which the answer may have patched
            if kind == "ok":
                try:
                    value = convert(raw)
                except _WrongType as err:
                    kind, failure = "wrong-type", _str(err)
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # noqa: BLE001 - a tensor subclass's or an object's own code failed
                    kind, failure = _describe(exc, seconds)
                    del exc
            del raw
        finally:
            untraced = _getprofile() is not hook
            _setprofile(previous_profile)
            if limited:
                _setitimer(_itimer, 0)
                _signal(_sigalrm, previous_alarm)
    except KeyboardInterrupt:
        restore()
        raise
    except _Timeout:  # the alarm went off in the last instants, after the answer itself
        kind, failure, value = "timeout", f"ran past the time limit of {seconds:g} s", None
    changed = _tuple(_sorted(set(changed) | set(restore())))
    return _Outcome(value, failure, kind, _tuple(_sorted(hits)), changed, untraced, limited)


def limit_available() -> bool:
    """A time limit can be enforced here: SIGALRM exists (not Windows) and this is the main thread."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()

