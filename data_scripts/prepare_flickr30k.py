"""Download Flickr30K (Karpathy split) from the Hugging Face Hub and save it in the workbook schema.

    python data_scripts/prepare_flickr30k.py --out data/flickr30k
    python data_scripts/prepare_flickr30k.py --out data/flickr30k --path /copies/flickr30k-parquet

Needs network on first use (about 4.4 GB); the download is cached under HF_HOME.
The saved folder loads offline with `vlr_lib.data.load_flickr30k(path=...)`.
Repo id and revision: --repo-id / --revision, or env VLR_FLICKR_REPO /
VLR_FLICKR_REVISION (see vlr_lib/data/flickr30k.py for what is verified).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    import vlr_lib  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="output folder for save_to_disk")
    p.add_argument("--path", type=Path, default=None,
                   help="read a local copy instead of the Hub (Parquet folder in the Hub layout, or Parquet file)")
    p.add_argument("--repo-id", default=None, help="Hub dataset id (default: VLR_FLICKR_REPO or nlphuji/flickr30k)")
    p.add_argument("--revision", default=None,
                   help="Hub revision (default: VLR_FLICKR_REVISION or refs/convert/parquet)")
    p.add_argument("--no-size-check", action="store_true",
                   help="accept split sizes other than Karpathy's 29,000 / 1,014 / 1,000")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from vlr_lib.data.flickr30k import KARPATHY_SIZES, DatasetUnavailableError, load_flickr30k

    try:
        dd = load_flickr30k(args.path, repo_id=args.repo_id, revision=args.revision,
                            expected_sizes=None if args.no_size_check else KARPATHY_SIZES)
    except DatasetUnavailableError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    dd.save_to_disk(str(args.out))
    print(f"wrote {args.out}: " + ", ".join(f"{k}={len(v)}" for k, v in dd.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
