"""``python -m vlr_lib train|grid|showdown|lessons|check|record|encoder|losses|grade ...``: the command lines, also under torchrun.

    python -m vlr_lib check --data flickr30k      # a dry run: data, cache, device, disk, memory, time
    python -m vlr_lib train --loss unified --epochs 5
    python -m vlr_lib grid --losses info_nce,unified --seeds 0,1,2
    python -m vlr_lib showdown --fast
    python -m vlr_lib tuned --fast                # six losses (the learned-temperature two too), each tuned on validation
    python -m vlr_lib lessons --fast
    python -m vlr_lib record --only 10-features
    python -m vlr_lib encoder --retrain           # re-train the shipped shapes encoder (on purpose only)
    python -m vlr_lib losses                      # the glossary: every registered loss, its names and defaults
    python -m vlr_lib grade submissions/ --seed 81723645 --out grades.csv   # regrade collected notebooks
    torchrun --standalone --nproc-per-node 2 -m vlr_lib train --setting features --batch-size 128

``train`` and ``grid`` take the options of ``vlr-train`` and ``vlr-grid``; ``showdown`` those of
``data_scripts/run_showdown.py``; ``tuned`` gives Triplet, Triplet-SH, NT-Xent and Unified an equal
validation budget for their main hyperparameter (notebook 11); ``lessons`` runs notebook 12's experiments; ``check`` verifies a Flickr30K run
before it starts (``vlr_lib.cli.check``); ``record`` regenerates the recorded runs (``make record``);
``encoder`` checks (or, with ``--retrain``, re-trains) the pretrained shapes encoder that ships with the package;
``losses`` prints the glossary of ``vlr_lib.registry``; ``grade`` regrades the graded exercises of collected
notebooks for marks (``vlr_lib.cli.grade``).
``python -m vlr_lib <command> --help`` lists them.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = ("train", "grid", "showdown", "tuned", "lessons", "check", "record", "encoder", "losses", "grade")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):  # asked for: stdout, exit 0; no command: an error, stderr, exit 2
        print(__doc__.strip(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"python -m vlr_lib: error: unknown command {command!r}; choose one of {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    from .cli import check, encoder, grade, grid, lessons, losses, record, showdown, train, tuned

    module = {"train": train, "grid": grid, "showdown": showdown, "tuned": tuned, "lessons": lessons, "check": check,
              "record": record, "encoder": encoder, "losses": losses, "grade": grade}[command]
    return module.main(rest, prog=f"python -m vlr_lib {command}")


if __name__ == "__main__":
    from .cli.args import exit_quietly

    sys.exit(exit_quietly(main))
