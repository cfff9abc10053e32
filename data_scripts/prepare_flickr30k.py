"""Download Flickr30K (Karpathy split) from the Hugging Face Hub and save it in the workbook schema.

    python data_scripts/prepare_flickr30k.py                    # -> ~/.cache/vlr-workbook/data/flickr30k
    python data_scripts/prepare_flickr30k.py --revision <commit> --out data/flickr30k
    python data_scripts/prepare_flickr30k.py --path /copies/flickr30k-parquet
    python data_scripts/prepare_flickr30k.py --check            # what it would do, nothing downloaded

Needs network on first use (about 4.4 GB of Parquet, plus about as much for the Arrow copy
`datasets` keeps under HF_HOME). The default --out, <cache root>/data/flickr30k
($VLR_CACHE, else ~/.cache/vlr-workbook), is where every command and notebook looks for a
copy when VLR_DATA_PATH and --data-path are not given. The revision (--revision, or env
VLR_FLICKR_REVISION, else refs/convert/parquet) is resolved to a commit hash; the saved
folder records the repo id and that commit (vlr_source.json), so its feature caches are
those of a Hub download of the same commit. --repo-id: env VLR_FLICKR_REPO, else
nlphuji/flickr30k (see vlr_lib/data/flickr30k.py for what is verified). The folder is
written next to --out and moved into place when complete.
"""
from __future__ import annotations

import json
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
    p.add_argument("--out", type=A.output_dir, default=None,
                   help="output folder for save_to_disk (default <cache root>/data/flickr30k)")
    p.add_argument("--path", type=A.existing_path, default=None,
                   help="read a local copy instead of the Hub (Parquet folder in the Hub layout, or Parquet file)")
    p.add_argument("--repo-id", default=None, help="Hub dataset id (default: VLR_FLICKR_REPO or nlphuji/flickr30k)")
    p.add_argument("--revision", default=None,
                   help="Hub branch, tag or commit (default: VLR_FLICKR_REVISION or refs/convert/parquet)")
    p.add_argument("--no-size-check", action="store_true",
                   help="accept split sizes other than Karpathy's 29,000 / 1,014 / 1,000")
    p.add_argument("--check", action="store_true",
                   help="dry run: check the source, --out and free disk, say what would be done; download nothing")
    return p


def _prepare(args) -> int:
    from vlr_lib._io import atomic_dir, atomic_write_text
    from vlr_lib.data.flickr30k import KARPATHY_SIZES, SOURCE_FILE, hub_source, load_flickr30k, resolve_source
    from vlr_lib.paths import flickr30k_dir

    if args.path is not None and (args.repo_id or args.revision):
        raise A.UsageError("--path", "reads a local copy; --repo-id and --revision are for the Hub")
    out = args.out or flickr30k_dir()
    A.check_replaceable(out)
    if args.check:
        from vlr_lib.cli.check import check_prepare

        return check_prepare(args.path, args.repo_id, args.revision, out)
    with A.quiet_datasets():
        try:
            source = (hub_source(args.repo_id, args.revision) if args.path is None  # never the default copy itself
                      else resolve_source(args.path))
            dd = load_flickr30k(source, expected_sizes=None if args.no_size_check else KARPATHY_SIZES)
        except ValueError as err:
            flag = "--revision" if str(err).startswith("revision") else "--path" if args.path is not None else None
            raise A.UsageError(flag, str(err)) from None
    record = ({"repo_id": source.dataset_id, "commit": source.revision, "requested_revision": source.requested}
              if not source.dataset_id.startswith("flickr30k:") else {"source_path": str(source.path)})
    with atomic_dir(out) as tmp:
        dd.save_to_disk(str(tmp))
        atomic_write_text(tmp / SOURCE_FILE, json.dumps(record, indent=2) + "\n")
    print(f"wrote {out} ({source.describe()}): " + ", ".join(f"{k}={len(v)}" for k, v in dd.items()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return A.run(parser(), argv, _prepare)


if __name__ == "__main__":
    sys.exit(main())
