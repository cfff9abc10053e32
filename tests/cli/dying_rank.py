"""``python -m vlr_lib`` with rank 1 of a torchrun job dying in its second epoch (tests/cli/test_processes.py).

The other rank must stop with a clear message instead of waiting forever for its peer.
"""
from __future__ import annotations

import os
import sys

from vlr_lib.__main__ import main
from vlr_lib.train import engine

_real_epoch = engine._train_epoch


def _dying_epoch(models, learned, opt, split, plan, epoch, last_good):
    if epoch == 1 and os.environ.get("RANK") == "1":
        os._exit(3)  # a crash: no exception, no cleanup, the peer just disappears
    return _real_epoch(models, learned, opt, split, plan, epoch, last_good)


engine._train_epoch = _dying_epoch

if __name__ == "__main__":
    sys.exit(main())
