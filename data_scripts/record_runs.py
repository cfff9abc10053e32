"""Regenerate the recorded runs that notebooks 09-13 open in full mode: the same as ``python -m vlr_lib record``.

    python data_scripts/record_runs.py                  # every record (``make record``)
    python data_scripts/record_runs.py --only 10-vsepp

See ``python -m vlr_lib record --help`` (vlr_lib/cli/record.py) for every option.
"""
from __future__ import annotations

import sys
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib.cli import record

if __name__ == "__main__":
    sys.exit(record.main(prog="record_runs.py"))
