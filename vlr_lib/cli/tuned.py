"""``python -m vlr_lib tuned``: notebook 11's tuned comparison of the four headline losses and the two that learn
their temperature.

    python -m vlr_lib tuned                       # shapes, full size: 6 losses x 5 values x 5 seeds (CPU, ~1.5 h)
    python -m vlr_lib tuned --fast                # the CI size of VLR_FAST=1 (seconds)
    python -m vlr_lib tuned --values triplet_hardest:margin=0.1,0.2,0.4 --values info_nce:temperature=0.05,0.1
    python -m vlr_lib tuned --markdown tuned.md

Triplet, Triplet-SH, NT-Xent, Unified, NT-Xent with a learned temperature and SigLIP each get the same number of
values of their main hyperparameter (the margin, the temperature, the scale gamma; of a learned one, its initial
value: CLIP's t' = log(1/tau), SigLIP's bias b), trained at the showdown's features budget; the value is chosen on validation and the test split reports it beside the default
(the untuned row). --values replaces a loss's list, or adds a loss (LOSS:PARAMETER=v1,v2,..., once per
loss; PARAMETER one of the loss's numeric hyperparameters; the values are checked as grid --param checks
them, distinct in float32 too, within the loss registry's range, and must hold the loss's default); the text then says which losses' values
were given and whether the budget is still equal. A loss none of whose values learns (every run above
chance on validation) is an error naming --values. Results go to <runs>/tuned-shapes-features-<fast|full>/
(cells cached, an interrupted run resumes). --fast defaults to VLR_FAST; $VLR_RECORD is checked before
anything trains. Under torchrun rank 0 alone prints. The experiment is vlr_lib.experiments.tuned.
"""
from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import replace

from .. import env
from . import args as A
from . import common


def values_flag(text: str) -> tuple[str, tuple[str, tuple[float, ...]]]:
    """LOSS:PARAMETER=v1,v2,... -> (loss, (parameter, values)); each value parsed as ``grid --param`` parses it
    (``common.loss_params()``: finite, no float32 overflow, not rounded to 0)."""
    loss, sep, rest = text.partition(":")
    param, sep2, numbers = rest.partition("=")
    loss, param = loss.strip(), param.strip()
    if not (sep and sep2 and loss and param and numbers.strip()):
        raise argparse.ArgumentTypeError(f"expected LOSS:PARAMETER=v1,v2,..., got {text!r}")
    parse = common.loss_params().get(param, A.finite_float)
    try:
        values = tuple(parse(v.strip()) for v in numbers.split(","))
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{loss}:{param}: {err}") from None
    return loss, (param, values)


def parser(prog: str = "python -m vlr_lib tuned") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--fast", action="store_true", default=None, help="the CI size (default: VLR_FAST)")
    p.add_argument("--seeds", type=A.seeds, default=None, help="comma-separated distinct seeds, at least 2 "
                                                               "(default 0,1,2,3,4; fast 0,1)")
    p.add_argument("--values", type=values_flag, action="append", default=None,
                   help="LOSS:PARAMETER=v1,v2,... replaces that loss's values (repeatable)")
    p.add_argument("--device", type=A.device, default=None,
                   help="cpu, cuda, cuda:N or mps (default: cuda if available)")
    p.add_argument("--dist-timeout", type=common.dist_timeout, default=600.0,
                   help="under torchrun: seconds a rank waits for the others before failing (default 600)")
    common.add_run_outputs(p, "tuned-shapes-features-<size>", force=False)
    return p


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib tuned") -> int:
    return A.run(parser(prog), argv, _tuned, lambda args: "finished cells are kept; run the same command again")


def _grid(args: argparse.Namespace) -> dict:
    from ..experiments import tuned

    grid = tuned.grid_for(args.fast)
    given: set[str] = set()
    for loss, spec in args.values or []:
        if loss in given:
            raise A.UsageError("--values", f"{loss} is given twice; give each loss once, with all its values")
        given.add(loss)
        grid[loss] = spec
    try:
        return tuned.check_grid(grid)
    except ValueError as e:
        raise A.UsageError("--values", str(e)) from None


def _tuned(args: argparse.Namespace) -> int:
    from ..experiments import tuned
    from ..train import distributed as D

    if args.fast is None:
        args.fast = A.env(env.flag, "VLR_FAST")
    if args.seeds is not None and len(args.seeds) < 2:
        raise A.UsageError("--seeds", "needs at least 2 seeds: a paired interval needs pairs")
    grid = _grid(args)
    common.check_record_env()
    spec = tuned.spec_for("shapes", args.fast, args.seeds)
    command = " ".join(shlex.quote(a) for a in ["python", "-m", "vlr_lib", "tuned", *(["--fast"] if args.fast else [])])
    with D.process_group(args.device, args.dist_timeout) as device:
        spec = replace(spec, device=str(device))
        race = tuned.run(spec, grid, command=command, out=args.out, progress=args.progress)
        if D.rank_and_world()[0] != 0:  # every rank trains; rank 0 alone writes and prints
            return 0
        try:
            text = tuned.markdown(race, grid)
        except tuned.NoConfigurationLeft as e:
            raise A.UsageError("--values", str(e)) from None
        common.print_table(text, race, "delete the folder to retrain", args.markdown)
    return 0
