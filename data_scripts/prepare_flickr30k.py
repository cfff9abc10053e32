"""Download Flickr30K (Karpathy split) from the Hugging Face Hub and save it in the workbook schema.

    python data_scripts/prepare_flickr30k.py --out data/flickr30k
    python data_scripts/prepare_flickr30k.py --out data/flickr30k --path /copies/flickr30k-parquet

Needs network on first use (about 4.4 GB); the download is cached under HF_HOME.
The saved folder loads offline with `vlr_lib.data.load_flickr30k(path=...)`.
Repo id and revision: --repo-id / --revision, or env VLR_FLICKR_REPO /
VLR_FLICKR_REVISION (see vlr_lib/data/flickr30k.py for what is verified).
The folder is written next to --out and moved into place when complete.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vlr_lib.cli import args as A


def parser() -> A.Parser:
    p = A.Parser(prog="prepare_flickr30k.py", description=__doc__)
    p.add_argument("--out", required=True, type=A.output_dir, help="output folder for save_to_disk")
    p.add_argument("--path", type=A.existing_path, default=None,
                   help="read a local copy instead of the Hub (Parquet folder in the Hub layout, or Parquet file)")
    p.add_argument("--repo-id", default=None, help="Hub dataset id (default: VLR_FLICKR_REPO or nlphuji/flickr30k)")
    p.add_argument("--revision", default=None,
                   help="Hub revision (default: VLR_FLICKR_REVISION or refs/convert/parquet)")
    p.add_argument("--no-size-check", action="store_true",
                   help="accept split sizes other than Karpathy's 29,000 / 1,014 / 1,000")
    return p


def _prepare(args) -> int:
    from vlr_lib._io import atomic_dir
    from vlr_lib.data.flickr30k import KARPATHY_SIZES, load_flickr30k

    if args.path is not None and (args.repo_id or args.revision):
        raise A.UsageError("--path", "reads a local copy; --repo-id and --revision are for the Hub")
    A.check_replaceable(args.out)
    with A.quiet_datasets():
        try:
            dd = load_flickr30k(args.path, repo_id=args.repo_id, revision=args.revision,
                                expected_sizes=None if args.no_size_check else KARPATHY_SIZES)
        except ValueError as err:
            raise A.UsageError("--path" if args.path is not None else None, str(err)) from None
    with atomic_dir(args.out) as tmp:
        dd.save_to_disk(str(tmp))
    print(f"wrote {args.out}: " + ", ".join(f"{k}={len(v)}" for k, v in dd.items()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return A.run(parser(), argv, _prepare)


if __name__ == "__main__":
    sys.exit(main())
