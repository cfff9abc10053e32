"""``python -m vlr_lib losses``: every registered loss, its names, hyperparameters and notebook (the glossary).

    python -m vlr_lib losses              # the glossary as a Markdown table
    python -m vlr_lib losses --loss goal:cir,sig-ms   # one loss: its label, parameters and defaults

The papers name the same losses differently; the workbook uses one name each (the label of the loss's entry in
``vlr_lib.registry``) and this lists the others. Any name form is accepted (``<loss>``, ``goal:<t>,<p>``,
``warmup:<first>:<n>:<then>``); an unknown one is a usage error that lists the near matches.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import args as A


def parser(prog: str = "python -m vlr_lib losses") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--loss", default=None, help="one loss name of any form: its label, parameters and their defaults")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib losses") -> int:
    return A.run(parser(prog), argv, _losses)


def _losses(args: argparse.Namespace) -> int:
    from .. import registry

    if args.loss is None:
        rows = registry.glossary()
        columns = list(rows[0])
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join(row[c] for c in columns) + " |")
        return 0
    try:
        label = registry.label(args.loss)
        values = registry.resolved(args.loss)
    except (TypeError, ValueError) as err:
        raise A.UsageError("--loss", str(err)) from None
    print(f"{args.loss}: {label}")
    print(f"hyperparameters (defaults resolved): {values}")
    return 0
