"""``python -m vlr_lib encoder``: the pretrained shapes encoder that ships with the package.

    python -m vlr_lib encoder                         # check the shipped encoder, print what it is
    python -m vlr_lib encoder --retrain               # re-train it with the recipe, replacing the shipped one
    python -m vlr_lib encoder --retrain --to mine/    # re-train it into another folder

The encoder (``vlr_lib.shapes_encoder``, docs/shapes_encoder.md) is trained once, on purpose, by
``--retrain`` and never by a notebook, a command or a test: how well the recipe trains swings with the
CPU's arithmetic, so every machine loads the shipped weights. ``--retrain`` runs the recipe
single-threaded (about 2 minutes on 2 cores) and writes encoder.pt, then manifest.json, each
atomically. Run it under ``ATEN_CPU_CAPABILITY=default`` (torch's portable kernels, what the shipped
one was trained with) to reproduce the shipped bytes. A new encoder makes every record stale: run
``make record`` after replacing it.

Checked before the training starts: ``--to`` and ``--progress`` are for ``--retrain`` only; the destination must be
writable, and ``--to`` a new or empty folder or one holding an encoder this command wrote (encoder.pt and a sound
manifest.json, nothing else), never a folder of the user's own files.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from . import args as A


def parser(prog: str = "python -m vlr_lib encoder") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--retrain", action="store_true", help="re-train the encoder with its recipe and write it")
    p.add_argument("--to", type=A.output_dir, default=None,
                   help="with --retrain: the folder to write (default: the shipped vlr_lib/assets/shapes_encoder)")
    p.add_argument("--progress", action="store_true", help="with --retrain: a progress bar over epochs")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib encoder") -> int:
    p = parser(prog)
    return A.run(p, argv, _encoder, lambda args: "nothing was written; the shipped encoder is unchanged")


def _describe(manifest: dict, where: Path) -> str:
    """One line of what the encoder is, from a manifest checked whole (``shapes_encoder.manifest_problem``)."""
    acc, trained = manifest["pretrain_accuracy"], manifest["trained_with"]
    return (f"{where}: sha256 {manifest['sha256']}; held-out accuracy shape {acc['shape']}, "
            f"scene {acc['scene']}; trained with {trained['kernels']} kernels, "
            f"{trained['threads']} thread(s), torch {manifest['torch_version']}, "
            f"on {trained['cpu']} ({trained['date'][:10]})")


def _encoder(args: argparse.Namespace) -> int:
    from .. import shapes_encoder as E

    if not args.retrain:
        for flag, given, what in (("--to", args.to is not None, "the folder to write the re-trained encoder to"),
                                  ("--progress", args.progress, "a progress bar over its epochs")):
            if given:
                raise A.UsageError(flag, f"is for --retrain ({what}); without --retrain the command only checks "
                                         "the shipped encoder")
        encoder = E.shipped_encoder()
        print(_describe(encoder.manifest, E.SHIPPED_DIR / E.WEIGHTS_FILE))
        return 0
    folder = Path(args.to) if args.to is not None else E.SHIPPED_DIR
    _check_destination(folder, shipped=args.to is None or _same_folder(folder, E.SHIPPED_DIR))
    before = _previous_sha(folder)
    encoder = E.pretrain(progress=args.progress)
    manifest = E.write_encoder(folder, encoder, trained_with=trained_with())
    print(f"wrote {folder / E.WEIGHTS_FILE} and {folder / E.MANIFEST_FILE}")
    print(_describe(manifest, folder / E.WEIGHTS_FILE))
    if before == manifest["sha256"]:
        print("identical to the encoder that was there: nothing changed")
    elif folder.resolve() == E.SHIPPED_DIR.resolve():
        print("this replaces the shipped encoder: every record made with the old one is now stale (make record)")
    return 0


def _same_folder(a: Path, b: Path) -> bool:
    return a.exists() and b.exists() and os.path.samefile(a, b)


def _check_destination(folder: Path, shipped: bool) -> None:
    """Before the two minutes of training: the folder can be written, and (unless it is the shipped encoder's) it
    holds nothing but an encoder this command wrote."""
    from .. import shapes_encoder as E

    try:
        A.output_dir(str(folder))
    except argparse.ArgumentTypeError as err:
        where = "" if not shipped else " (the shipped encoder's folder; pass --to a folder you can write)"
        raise A.UsageError("--to", f"{err}{where}") from None
    if shipped or not folder.is_dir():
        return
    names = sorted(p.name for p in folder.iterdir())
    if not names or (set(names) <= {E.WEIGHTS_FILE, E.MANIFEST_FILE} and _ours(folder / E.MANIFEST_FILE)):
        return
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    raise A.UsageError("--to", f"{str(folder)!r} holds other files ({shown}), not an encoder written by --retrain "
                               "(encoder.pt and its sealed manifest.json); choose a new or empty folder, so that "
                               "nothing of yours is overwritten")


def _ours(manifest: Path) -> bool:
    """`manifest` is a regular file holding a sound, sealed encoder manifest (``shapes_encoder.manifest_problem``)."""
    from .. import shapes_encoder as E
    from .._io import read_regular

    try:
        return E.manifest_problem(json.loads(read_regular(manifest))) is None
    except (OSError, ValueError):
        return False


def _previous_sha(folder: Path) -> str | None:
    from .. import shapes_encoder as E

    try:
        return E.shipped_sha256(folder)
    except E.EncoderFileError:
        return None


def trained_with() -> dict:
    """What the encoder's bytes depend on besides the recipe: the kernels, the CPU, torch's threads, the date."""
    from ..experiments.record import cpu_model

    return {"kernels": os.environ.get("ATEN_CPU_CAPABILITY") or "native (this CPU's best)", "threads": 1,
            "cpu": cpu_model(), "machine": platform.machine(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
