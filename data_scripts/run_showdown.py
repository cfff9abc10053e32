"""The loss showdown of notebook 10 from the command line: the same as ``python -m vlr_lib showdown``.

    python data_scripts/run_showdown.py --fast
    python data_scripts/run_showdown.py --data flickr30k --device cuda

See ``python -m vlr_lib showdown --help`` (vlr_lib/cli/showdown.py) for every option.
"""
from __future__ import annotations

import sys
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib.cli import showdown

if __name__ == "__main__":
    sys.exit(showdown.main(prog="run_showdown.py"))
