"""``python -m vlr_lib check --data flickr30k``: a dry run before hours of work on a GPU.

    python -m vlr_lib check --data flickr30k
    python -m vlr_lib check --data flickr30k --data-path data/flickr30k --device cuda --batch-size 256
    python data_scripts/prepare_flickr30k.py --check

Nothing is downloaded, encoded or trained. One line per finding:

- data: which copy is read (``vlr_lib.data.flickr30k.resolve_source``) and, from its text columns
  and file metadata only, its schema, split sizes (29,000 / 1,014 / 1,000) and 5 captions per
  image; for the Hub: that the revision resolves to a commit, and whether that commit is already
  in the Hugging Face cache (else the run downloads it);
- cache: the feature cache root (exists or can be created, writable), the Flickr30K feature sets
  it holds, and whether the requested one (backbone, weights, dtype, commit) is complete;
- device: what it is (GPU name and memory, native bf16);
- disk: free space where the run writes (the download and `datasets`' Arrow copy, the features);
- memory: host and GPU memory of the encoding (the encoder's weights, one batch; on a GPU the
  peak measured on that batch) and of training (the features in memory) against what is free.

Then the plan and how long it should take, *measured here*: one batch of images (4 on a CPU) and
four captions per image through a randomly initialised encoder of the same architecture (same
cost as the pretrained one, no download) gives images/s and captions/s; 10 training steps of the
heads on random features of Flickr30K's dimension give seconds per step, and one evaluation of
the validation split's size its cost. JPEG decoding (parallel DataLoader workers) and downloads are not in the
estimate. Exit code 0 when nothing blocks the run; 2, with one line per problem on stderr, when
something does.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import args as A
from . import common

#: Images and captions of the Karpathy split (29,000 + 1,014 + 1,000 images, 5 captions each).
N_IMAGES, N_CAPTIONS = 31_014, 155_070
DOWNLOAD_BYTES = 4.4e9  # the Parquet export on the Hub; datasets keeps an Arrow copy of about the same size
EMBED_DIM = {"clip-vit-b32": (512, 512), "vsepp-resnet50": (2048, 2048)}
SHOWDOWN_RUNS, SHOWDOWN_EPOCHS = 72, 15  # 24 configurations x 3 seeds, vlr_lib.experiments.cells.spec_for("flickr30k")
GB = 1e9


@dataclass
class Finding:
    topic: str
    ok: bool
    text: str


def parser(prog: str = "python -m vlr_lib check") -> A.Parser:
    p = A.Parser(prog=prog, description=__doc__)
    p.add_argument("--data", choices=("shapes", "flickr30k"), default="flickr30k")
    common.add_flickr_options(p, cache_root=lambda text: Path(text).expanduser())  # unwritable: a finding
    p.add_argument("--device", type=A.device, default=None, help="cpu, cuda, cuda:N or mps (default: cuda if available)")
    p.add_argument("--batch-size", type=A.positive_int, default=None,
                   help="extraction batch (default 256 on CUDA, 64 else)")
    return p


def main(argv: Sequence[str] | None = None, prog: str = "python -m vlr_lib check") -> int:
    return A.run(parser(prog), argv, _check)


def _pin(source) -> str:
    """The full commit of a source from the Hub, to pin it (empty for a local copy of unknown origin)."""
    from ..data.flickr30k import _COMMIT

    if not _COMMIT.fullmatch(source.revision):
        return ""
    return f"; commit {source.revision} (--revision / VLR_FLICKR_REVISION pins it)"


def _check(args: argparse.Namespace) -> int:
    from ..data.flickr30k import DatasetUnavailableError, resolve_source
    from ..paths import feature_cache_root
    from ..train.device import default_device

    if args.data == "shapes":
        print("shapes: generated in memory, no download, no cache, no GPU needed: nothing to check")
        return 0
    device = default_device(args.device)
    root = args.cache_root or feature_cache_root()
    backbone = args.backbone or "clip-vit-b32"
    with A.quiet_datasets():
        try:
            source = resolve_source(args.data_path, revision=args.revision)
        except (DatasetUnavailableError, ValueError, FileNotFoundError) as err:
            source, data = None, Finding("data", False, A.one_line(err))
        else:
            data = _inspect(source)
    cache, missing = _cache(root, source, backbone, args)
    needs = {_existing(root): _feature_bytes(backbone, args.dtype or "float32", missing)}
    needs = _add(needs, _download_needs(source))
    findings = [data, *cache, _device(device), _disk(needs)]
    estimate = None if any(not f.ok for f in findings) else _measure(backbone, device, args.batch_size)
    if estimate is not None:
        findings.append(_memory(estimate, backbone))
    return _report(findings, _plan(source, backbone, device, missing, estimate, args))


# --------------------------------------------------------------------------- the findings


def _inspect(source) -> Finding:
    """The copy the run reads: its schema, split sizes and captions (the Hub: the HF cache's copy, if any)."""
    from ..data.flickr30k import inspect_copy

    folder = source.path if source.path is not None else _hub_snapshot(source)
    if folder is None:
        return Finding("data", True, f"{source.describe()}: not downloaded yet; the run downloads it (about "
                                     f"{DOWNLOAD_BYTES / GB:.1f} GB) and checks the Karpathy split sizes then"
                                     f"{_pin(source)}")
    report = inspect_copy(folder)
    if report.problems:
        return Finding("data", False, f"{source.describe()}: " + "; ".join(report.problems))
    sizes = ", ".join(f"{k} {n:,}" for k, n in report.sizes.items())
    where = "" if source.path is not None else f" (in the Hugging Face cache: {folder})"
    return Finding("data", True, f"{source.describe()}{where}: {sizes} images x 5 captions, schema ok{_pin(source)}")


def _hub_snapshot(source) -> Path | None:
    """The HF cache's folder of the source's commit, when it was downloaded before."""
    from ..data.flickr30k import _hub_cache

    folder = _hub_cache() / f"datasets--{source.dataset_id.replace('/', '--')}" / "snapshots" / source.revision
    return folder if folder.is_dir() else None


def _cache(root: Path, source, backbone: str, args: argparse.Namespace) -> tuple[list[Finding], tuple[str, ...]]:
    """Findings on the cache root and the requested feature set; the splits the run must encode."""
    from ..features import FLICKR_SPLITS, FeatureSetChoiceError, cached_feature_sets, flickr30k_cache_request

    writable = _writable(root)
    held = "; ".join(s.describe() for s in cached_feature_sets(root)) or "no Flickr30K feature set"
    out = [Finding("cache", writable is None, f"{root}: {writable or 'writable'}; holds {held}")]
    if source is None:
        return out, FLICKR_SPLITS
    try:  # the lookup of the run itself, without building anything
        request = flickr30k_cache_request(source, root, splits=FLICKR_SPLITS, backbone=backbone,
                                          weights=args.weights, dtype=args.dtype)
    except FeatureSetChoiceError as err:
        return [*out, Finding("features", False, A.one_line(err))], FLICKR_SPLITS
    what = f"{backbone} weights={request.pretrained} dtype={request.dtype}"
    text = (f"{what}: complete, nothing to encode" if not request.missing
            else f"{what}: to encode {', '.join(request.missing)}")
    return [*out, Finding("features", True, text)], request.missing


def _writable(root: Path) -> str | None:
    """None when `root` can hold new files (created if missing), else why not."""
    parent = _existing(root)
    if not parent.is_dir():
        return f"cannot be created: {parent} is a file; point --cache-root or VLR_CACHE at a folder"
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        return f"not writable ({err.strerror}); point --cache-root or VLR_CACHE at a writable folder"
    return None


def _existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (where a new folder would be created)."""
    while not path.exists():
        path = path.parent
    return path


def _device(device) -> Finding:
    import torch

    from ..train.evaluate import autocast_dtype

    if device.type != "cuda":
        return Finding("device", True, f"{device}: no GPU; encoding Flickr30K here takes hours (the estimate below "
                                       "says how many); training heads on cached features works")
    props = torch.cuda.get_device_properties(device)
    bf16 = "bf16 autocast" if autocast_dtype(device) else "float32 (no native bf16)"
    return Finding("device", True, f"{device}: {props.name}, {props.total_memory / GB:.1f} GB, {bf16}")


def _feature_bytes(backbone: str, dtype: str, splits: Sequence[str]) -> float:
    """Bytes of the caches of `splits` (images and captions, each at the backbone's dimension)."""
    from ..data.flickr30k import KARPATHY_SIZES

    size = {"float32": 4, "float16": 2, "bfloat16": 2}[dtype]
    img_dim, txt_dim = EMBED_DIM[backbone]
    return sum(KARPATHY_SIZES[s] * (img_dim + 5 * txt_dim) * size for s in splits)


def _download_needs(source) -> dict[Path, float]:
    """The Hugging Face cache's share when the source is the Hub and not downloaded yet (Parquet + Arrow copy)."""
    from ..data.flickr30k import _hub_cache

    if source is None or source.path is not None or _hub_snapshot(source) is not None:
        return {}
    return {_existing(_hub_cache()): 2 * DOWNLOAD_BYTES}


def _add(a: dict[Path, float], b: dict[Path, float]) -> dict[Path, float]:
    return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in {**a, **b}}


def _disk(needs: dict[Path, float]) -> Finding:
    """Free space against what the run writes, per file system folder."""
    parts, short = [], False
    for where, need in needs.items():
        free = shutil.disk_usage(where).free
        short |= free < need * 1.1
        parts.append(f"{where}: {free / GB:.1f} GB free, the run writes about {need / GB:.2f} GB")
    return Finding("disk", not short, ("not enough free disk: " if short else "") + "; ".join(parts))


def _available_ram() -> float:
    """Bytes of memory available to a new process (MemAvailable on Linux, else free pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def _memory(est: dict, backbone: str) -> Finding:
    """Host and GPU memory: encoding (weights + one batch; the GPU's measured peak) or training (the features)."""
    img_dim, txt_dim = EMBED_DIM[backbone]
    train_feats = (29_000 * img_dim + 145_000 * txt_dim) * 4  # read as float32 for training
    host = max(est["weights_bytes"] + est["batch_bytes"], train_feats) * 1.5  # + Python, torch and datasets
    ram = _available_ram()
    parts, problems = [f"host: about {host / GB:.1f} GB needed, {ram / GB:.1f} GB available"], []
    if host > ram:
        problems.append("host memory")
    if est["gpu_free"] is not None:
        gpu = max(est["gpu_peak"], train_feats * 1.2)
        parts.append(f"GPU: about {gpu / GB:.1f} GB needed (the peak of one batch, measured), "
                     f"{est['gpu_free'] / GB:.1f} GB free")
        if gpu > est["gpu_free"]:
            problems.append("GPU memory: lower --batch-size")
    return Finding("memory", not problems, "; ".join(parts) + (f"; too little {', '.join(problems)}" if problems
                                                                 else ""))


# --------------------------------------------------------------------------- the estimate


def _measure(backbone: str, device, batch_size: int | None) -> dict:
    """Throughput of this device, measured on a randomly initialised encoder and on the training step."""
    import torch

    from ..features import build_encoder, loader_settings

    batch = loader_settings(device, batch_size)["batch_size"]
    n = batch if device.type == "cuda" else min(batch, 4)  # a CPU batch of 4 is enough to time, and quick
    logging.disable(logging.WARNING)  # open_clip warns that random weights are random
    try:
        encoder = build_encoder(backbone, pretrained=None, device=device)
    finally:
        logging.disable(logging.NOTSET)
    pixels = torch.randn(n, 3, encoder.image_size, encoder.image_size)
    captions = ["a man in a red shirt climbs a rock wall while two friends watch from below"] * (4 * n)

    def timed(fn) -> float:
        fn()  # warm-up (kernels, allocator)
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        return time.perf_counter() - start

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t_img = timed(lambda: encoder.encode_images(pixels))
    t_txt = timed(lambda: encoder.encode_texts(captions))
    params = sum(p.numel() * p.element_size() for p in encoder.model.parameters())
    out = {"images_per_s": n / t_img, "captions_per_s": len(captions) / t_txt, "weights_bytes": params,
           "batch_bytes": pixels.numel() * 4 * batch / n, "gpu_peak": None, "gpu_free": None}
    if device.type == "cuda":
        out["gpu_peak"] = torch.cuda.max_memory_allocated(device) * batch / n
        out["gpu_free"] = torch.cuda.mem_get_info(device)[0]
    del encoder
    out.update(_measure_training(backbone, device))
    return out


def _measure_training(backbone: str, device) -> dict:
    """Seconds per training step (linear heads, batch 128, the unified loss; 10 steps) and per evaluation of
    the validation split's size."""
    import torch

    from ..train import fit
    from ..train.evaluate import evaluate

    img_dim, txt_dim = EMBED_DIM[backbone]
    g = torch.Generator().manual_seed(0)
    n = 128 * 10 // 5
    c2i = torch.arange(n).repeat_interleave(5)
    img, txt = torch.randn(n, img_dim, generator=g), torch.randn(5 * n, txt_dim, generator=g)
    result = fit(img, txt, c2i, "unified", epochs=1, batch_size=128, dim=512, device=device, progress=False,
                 probe_batch=0)
    step = result.history[0]["train_seconds"] / result.history[0]["steps"]
    val_c2i = torch.arange(1_014).repeat_interleave(5)
    val = (torch.randn(1_014, img_dim), torch.randn(5_070, txt_dim), val_c2i)
    start = time.perf_counter()
    evaluate(result.img_head, result.txt_head, *(t.to(device) for t in val))
    _sync(device)
    return {"step_s": step, "eval_s": time.perf_counter() - start}


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _plan(source, backbone: str, device, missing: Sequence[str], est: dict | None,
          args: argparse.Namespace) -> list[str]:
    from ..data.flickr30k import KARPATHY_SIZES

    steps = 145_000 // 128  # an epoch visits every training caption (VSE++), batches of 128
    lines = []
    if _download_needs(source):
        lines.append(f"download {source.describe()} into the Hugging Face cache (about {DOWNLOAD_BYTES / GB:.1f} GB)")
    if missing:
        n_img = sum(KARPATHY_SIZES[s] for s in missing)
        took = f": about {_duration(n_img / est['images_per_s'] + 5 * n_img / est['captions_per_s'])}" if est else ""
        lines.append(f"encode {', '.join(missing)} ({n_img:,} images, {5 * n_img:,} captions) with {backbone} "
                     f"({args.weights or 'default weights'}) on {device}{took}")
    epoch = est and steps * est["step_s"] + est["eval_s"]
    lines.append(f"train heads on the cached features: one epoch = {steps:,} steps of 128 captions"
                 + (f", about {_duration(epoch)} with its validation" if est else ""))
    total = est and SHOWDOWN_RUNS * SHOWDOWN_EPOCHS * (epoch + est["eval_s"])  # + the test split's evaluation
    lines.append(f"the loss showdown: {SHOWDOWN_RUNS} runs x {SHOWDOWN_EPOCHS} epochs, epochs selected on validation, "
                 "test reported" + (f": about {_duration(total)}" if est else ""))
    if est:
        lines.append(f"(measured here: {est['images_per_s']:.1f} images/s and {est['captions_per_s']:.1f} captions/s "
                     f"through a randomly initialised {backbone}, {est['step_s'] * 1e3:.1f} ms per training step, "
                     f"{est['eval_s']:.2f} s per evaluation of the 1,014 validation images; JPEG decoding and "
                     "downloads not included)")
    else:
        lines.append("(no time estimate until the problems above are fixed)")
    return lines


def _report(findings: list[Finding], plan: list[str]) -> int:
    """The findings and the plan on stdout; one line per problem on stderr; exit code 2 when there is one."""
    width = max(len(f.topic) for f in findings)
    for f in findings:
        print(f"{f.topic:<{width}}  {'ok     ' if f.ok else 'PROBLEM'}  {f.text}")
    print("plan:")
    for i, line in enumerate(plan, 1):
        print(f"     {line}" if line.startswith("(") else f"  {i}. {line}")
    problems = [f for f in findings if not f.ok]
    for f in problems:
        print(f"check: problem: {f.topic}: {f.text}", file=sys.stderr)
    return A.EXIT_USAGE if problems else 0


# --------------------------------------------------------------------------- prepare_flickr30k.py --check


def check_prepare(path: Path | None, repo_id: str | None, revision: str | None, out: Path) -> int:
    """What ``prepare_flickr30k.py`` would do: its source (reachable or readable, complete), --out, free disk."""
    from ..data.flickr30k import DatasetUnavailableError, hub_source, resolve_source

    with A.quiet_datasets():
        try:
            source = hub_source(repo_id, revision) if path is None else resolve_source(path)
        except (DatasetUnavailableError, ValueError) as err:
            source, data = None, Finding("data", False, A.one_line(err))
        else:
            data = _inspect(source)
    writable = _writable(out)
    needs = _add({_existing(out): DOWNLOAD_BYTES}, _download_needs(source))
    findings = [data, Finding("out", writable is None, f"{out}: {writable or 'writable'}"), _disk(needs)]
    plan = [f"read {source.describe() if source else 'the source (see the problem above)'}",
            f"save the Karpathy splits and their provenance to {out}, where every command and notebook looks "
            "(or set VLR_DATA_PATH to it)"]
    return _report(findings, plan)
