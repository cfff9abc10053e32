"""Markdown for docs/results.md: a table, a showdown's section (provenance, Table 1, the GOAL grids, the
reading) and the words for what it trained."""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .labels import METRIC_LABELS
from .layouts import goal_table, table1
from .readings import reading
from .summary import summarize

def to_markdown(df: pd.DataFrame, index: bool | None = None) -> str:
    """A GitHub-flavoured Markdown table (pandas' to_markdown needs tabulate, which we do not depend on)."""
    index = (not isinstance(df.index, pd.RangeIndex)) if index is None else index
    frame = df.reset_index() if index else df
    if index and frame.columns[0] == "index":
        frame = frame.rename(columns={"index": ""})
    cells = [[str(c) for c in frame.columns]] + [[str(v) for v in row] for row in frame.itertuples(index=False)]
    esc = [[c.replace("|", "\\|") for c in row] for row in cells]
    head, body = esc[0], esc[1:]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
                     + ["| " + " | ".join(row) + " |" for row in body])


def last_epoch_share(runs: pd.DataFrame) -> float:
    """The share of distinct runs (cells) whose best validation rsum is at their last epoch: still rising when they
    stopped. A table of such runs measures how fast each loss learns, not where it ends."""
    if not isinstance(runs, pd.DataFrame) or not {"best_epoch", "epoch"} <= set(runs):
        raise ValueError("runs must be a runs table with the columns best_epoch and epoch")
    cells = runs.drop_duplicates("key") if "key" in runs else runs
    return float((cells["best_epoch"] == cells["epoch"]).mean())


def training_line(spec: Mapping) -> str:
    """What a showdown trained, in words, from its stored spec (older specs without a setting were "features")."""
    setting = spec.get("setting", "features")
    if setting == "features":
        model = f"heads only on frozen features ({spec['head']}, {spec['dim']}-d)"
    elif setting == "vsepp":
        model = (f"VSE++ setting: a {spec['head']} image head on the frozen image features and a "
                 f"{spec.get('text_encoder', 'gru').upper()} text encoder from scratch (word embeddings "
                 f"{spec.get('word_dim') or 'default'}-d, hidden {spec.get('hidden') or 'default'}), {spec['dim']}-d")
    else:
        model = (f"end to end: TinyCNN (width {spec.get('width', 32)}) and a {spec.get('text_encoder', 'gru').upper()} "
                 f"text encoder from scratch, {spec['dim']}-d")
    decay = spec.get("lr_decay_epoch")
    after = "half the epochs" if decay is None else f"{decay} epochs"
    clip = f", the gradient's norm clipped at {spec['grad_clip']:g}" if spec.get("grad_clip") else ""
    return (f"{model}, {spec['epochs']} epochs, batch {spec['batch_size']}, Adam lr {spec['lr']} x0.1 after {after}"
            f"{clip}, sampling by {spec['sampling']}, seeds {', '.join(map(str, spec['seeds']))}; every loss at its "
            "library defaults unless its label names a parameter")


#: What :func:`markdown_block` reads of a showdown's metadata (``vlr_lib.experiments.showdown.run``), and of its spec.
META_KEYS = ("spec", "date", "command", "data", "n_test_images", "chance_rsum_test", "hardware", "wall_seconds",
             "n_runs", "epochs_trained_now")
META_SPEC_KEYS = ("data", "fast", "seeds")


def _check_meta(meta: object) -> Mapping:
    if not isinstance(meta, Mapping):
        raise TypeError(f"meta must be a showdown's metadata (a dict), got {type(meta).__name__}")
    missing = [k for k in META_KEYS if k not in meta]
    if not missing and isinstance(meta["spec"], Mapping):
        missing = [f"spec.{k}" for k in META_SPEC_KEYS if k not in meta["spec"]]
    elif not missing:
        missing = ["spec (a dict)"]
    if missing:
        raise ValueError(f"meta lacks {', '.join(missing)}: pass the metadata of vlr_lib.experiments.showdown.run")
    return meta


def markdown_block(runs: pd.DataFrame, meta: Mapping) -> str:
    """The docs/results.md section of one showdown: provenance, the Table 1 layout, the GOAL grids, the reading.

    `runs` and `meta` are a finished showdown's table and metadata (``vlr_lib.experiments.showdown.run``).
    """
    summary = summarize(runs, prefix="sel_")
    spec = _check_meta(meta)["spec"]
    lines = [
        f"### {spec['data']}, setting {spec.get('setting', 'features')} ({'fast' if spec['fast'] else 'full'} size), "
        f"{meta['date'][:10]}",
        "",
        f"- command: `{meta['command']}`",
        f"- data: {meta['data']}",
        f"- training: {training_line(spec)}",
        f"- reported: test split ({meta['n_test_images']} images) at the epoch with the best validation rsum; "
        f"mean ± std over {len(spec['seeds'])} seeds; chance rsum {meta['chance_rsum_test']:.1f}",
        f"- hardware: {meta['hardware']}; wall time {meta['wall_seconds'] / 60:.1f} min "
        f"({meta['n_runs']} runs, {meta['epochs_trained_now']} epochs trained in that call)",
        f"- converged: {last_epoch_share(runs):.0%} of the runs select their last epoch",
        "",
        to_markdown(table1(summary)),
        "",
    ]
    for metric in ("i2t_r1", "t2i_r1", "rsum"):
        lines += [f"GOAL grid, {METRIC_LABELS[metric]} (Xuan & Chen Tables 3-5 layout: pair weights down, "
                  "triplet weights across), mean ± std:", "", to_markdown(goal_table(summary, metric)), ""]
    lines += ["Reading (generated from the runs by `vlr_lib.report.readings.reading`: paired 95% t intervals over seeds, "
              "verdicts Holm-corrected over each declared family, `vlr_lib.stats`):", "", reading(runs)["text"], ""]
    return "\n".join(lines)
