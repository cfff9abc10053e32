# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 12 · When do the papers' lessons hold?
#
# Notebooks 02–08 derived what the papers found: the hardest negative beats the sum over all
# negatives (VSE++, Faghri et al.; Bleeker & de Rijke, Table 1: Triplet-SH rsum 353.8 against
# Triplet 309.4 on Flickr30K), Triplet-SH also beats NT-Xent (Bleeker & de Rijke, obs. 3), and the
# unified loss beats Triplet-SH (Li et al., Tables 1 and 7). Bleeker & de Rijke's title asks the
# question of this notebook: *do lessons from metric learning generalize to image-caption
# retrieval?* A lesson is an ordering measured under conditions. Here we change one condition at a
# time and measure the three orderings again:
#
# * **(a) feature quality** — frozen image features from a *random* vs a *pretrained* encoder;
# * **(b) false negatives** — how much the scenes of the data share, so how many captions in a batch
#   also fit another image;
# * **(c) hardest-negative warm-up** — Triplet (all) for the first epoch(s), then Triplet-SH, as VSE∞
#   trains;
# * **(d) the setting** — heads on frozen features vs the VSE++ setting (a GRU text encoder learned from
#   scratch) vs everything end to end;
# * **(e) the optimizer** — the warm-up of (c) with Adam's memory reset or carried over at the switch,
#   with and without clipping the gradient's norm. An ordering that moves here belongs to the training
#   recipe, not to the losses.
#
# Every experiment trains the four losses of those claims at the library's default hyperparameters
# (**untuned**: notebook 11 tunes them) with five seeds and one schedule, picks each run's epoch on
# validation and reports test rsum, exactly as the showdown of notebook 10 does. Runs are long enough to
# converge: few of them select their last epoch. Two losses trained with the same seed share their
# initialisation and their batches, so each difference is read **paired by seed**, from its 95% interval,
# and the chapter's comparisons are read together as one family: a verdict counts only when it survives
# Holm's correction over all of them (`vlr_lib.stats`). Every claim below is an `assert` on that corrected
# verdict. **How the settings were chosen**: not all before any run. This record's budgets, seeds, the
# difficulty grid and experiment (e) were chosen after earlier records of the chapter (docs/results.md,
# runs 5 and 6) had been read, test numbers included; its findings are therefore exploratory until a run
# with settings fixed in advance repeats them.
# **This chapter's results are untuned and exploratory; chapter 13 (`13_replication.py`) holds the
# pre-registered, tuned replication on new seeds.**
#
# **After this notebook you can**
# 1. tell what a pretrained frozen encoder adds (its pretraining accuracy, a linear probe, and how its
#    cosine ranks image pairs);
# 2. design a controlled experiment over losses: one condition changed, seeds and schedule fixed;
# 3. read a difference of two losses from its paired 95% interval, and a family of them with Holm's
#    correction — holds, reverses, or cannot tell;
# 4. train with a loss schedule (`"warmup:<first>:<epochs>:<then>"`) and in the three settings;
# 5. tell an ordering that belongs to a loss from one that belongs to the optimizer.
#
# **Time.** Fast mode (`VLR_FAST=1`) trains a small version of every experiment in about a minute on a
# laptop CPU. Full mode opens the chapter's record and re-trains one of its runs to check it; the
# record's line below says how long it took to make.

# %% tags=["remove-input"]
try:  # opened without the workbook installed (Colab, a JupyterHub, a copied notebook)?
    import vlr_lib  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "vlr_lib is not installed: in a cell run `%pip install -e "
        "/path/to/vlr-workbook` (the folder holding pyproject.toml), then restart the "
        "kernel"
    ) from None

import dataclasses

import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from vlr_lib import (
    feature_quality,
    metrics,
    registry,
    shapes_encoder,
    stats,
    viz,
    widgets,
)
from vlr_lib.report.lessons import (
    lesson_matrix,
    lesson_reading,
    lesson_table,
    role_matrix,
)
from vlr_lib.data import make_shapes
from vlr_lib.notebook import longer_exercise, setup
from vlr_lib.train import shapes_features
from vlr_lib.experiments import cells, lessons, protocol

cfg = setup(seed=0)

# %% [markdown]
# ## 1. Frozen image features: what pretraining adds
#
# VSE++ embeds an image with a linear map of a frozen ImageNet ResNet's features; Bleeker & de Rijke keep
# that ResNet frozen for the whole run (their appendix B.3). The shapes data's analogue is a small CNN
# pretrained once (its weights ship with the workbook) to *read* scenes — the number of objects and, per cell of the 3 × 3 grid, whether it
# is occupied and the colour, shape and size of its object — on a pool of 4,000 scenes that no split
# contains (`vlr_lib.shapes_encoder`; recipe and measurements in docs/shapes_encoder.md). It never sees
# a caption or a retrieval pair. Its frozen features are the default of `vlr_lib.train.shapes_features`;
# `image_encoder="random"` gives the same network never trained, with the same export, so the
# comparison isolates pretraining.
#
# First the pretraining accuracy on 1,000 held-out pool scenes, against the random encoder's (its
# heads are as untrained as its convolutions: chance level).

# %%
# ships with the workbook: every machine loads the same weights
encoder = shapes_encoder.shipped_encoder()
untrained = shapes_encoder.random_encoder()
accuracy = pd.DataFrame(
    {
        "pretrained": encoder.manifest["pretrain_accuracy"],
        "random (untrained)": untrained.manifest["pretrain_accuracy"],
    }
).T
accuracy

# %%
acc = encoder.manifest["pretrain_accuracy"]
assert min(acc["count"], acc["occupied"], acc["color"], acc["size"]) > 0.95, acc
# the hardest attribute for four conv layers at 64 px (docs/shapes_encoder.md)
assert acc["shape"] > 0.6, acc
assert all(
    acc[k] > untrained.manifest["pretrain_accuracy"][k] + 0.15
    for k in shapes_encoder.ATTRIBUTES
)

# %% [markdown]
# Held-out accuracy belongs to the encoder's own heads. What a *retrieval* head can use is what is
# linearly decodable from the frozen features of new scenes: a ridge **linear probe**
# (`feature_quality.linear_probe`; Alain & Bengio) fitted on the training split and scored on
# validation, for the same labels. And what the cosine of two images' features says about how much
# their captions share: Spearman's rank correlation, over all pairs of validation images, between the
# cosine and the Jaccard overlap of their captions' word sets (`feature_quality.overlap_spearman`).

# %%
data, scenes = make_shapes(
    n_train=cfg.pick(400, 2000), n_val=200, n_test=1, seed=cfg.seed, return_scenes=True
)
labels = {
    split: shapes_encoder.scene_labels(scenes[split])
    for split in ("train", "validation")
}
captions = data["validation"]["caption"]
quality = {}
for name in ("pretrained", "random"):
    feats = shapes_features(data, image_encoder=name)
    probe = feature_quality.linear_probe(
        feats["train"][0], labels["train"], feats["validation"][0], labels["validation"]
    )
    quality[name] = {
        **{k: probe[k] for k in shapes_encoder.ATTRIBUTES},
        "caption-overlap Spearman": feature_quality.overlap_spearman(
            feats["validation"][0], captions
        ),
    }
quality = pd.DataFrame(quality).T
quality.round(3)

# %%
# every attribute and the Spearman
assert (quality.loc["pretrained"] > quality.loc["random"]).all()
# their captions' overlap, ranked alike
assert quality.loc["pretrained", "caption-overlap Spearman"] >= 0.35

# %% [markdown]
# The pretrained features carry every attribute better than the random ones, linearly, and their
# cosine ranks image pairs much more as the captions do. That is the premise of the papers' lessons:
# the loss only *shapes* a joint space on top of features that already separate what captions talk
# about.
#
# ## 2. The experiments
#
# In full mode the chapter's table opens from its **record** (`vlr_lib.experiments.record`: the runs
# with the settings that produced them, the hardware and the date), used only when the sha256 of
# the spec equals the record's and its table matches its stored hash; `VLR_RERUN=1` or the one-line
# `lessons.run(spec)` trains instead, with a progress bar and an estimate of the time left. In
# full mode one recorded run is re-trained from scratch and must match the record within
# its measured tolerance (`protocol.EXPERIMENTS`, rsum points; the check after the table; in fast mode the tests make it).
#
# `lessons.conditions` lists every condition. Each runs through a showdown spec
# (`vlr_lib.experiments.cells.spec_for`) — the same data sizes, schedule, seeds and selection on validation
# as notebook 10 — and differs from the base condition (pretrained features, difficulty 0.5, heads on
# features) in one thing. Conditions with the same spec share their cells: the base is trained once.

# %%
# Fast mode leaves end to end out (four epochs from scratch on 200 scenes stay near
# chance; exercise 4 runs one) and trains three seeds, to stay quick: its verdicts are a
# smoke test, the record's five seeds are the result.
fast_only = dict(settings=("features", "vsepp"), seeds=(0, 1, 2))
spec = lessons.LessonsSpec(
    fast=cfg.fast, device=str(cfg.device), **cfg.pick(fast_only, {})
)
plan = pd.DataFrame(
    [
        {
            "experiment": lessons.EXPERIMENTS[c.experiment],
            "condition": c.label,
            "setting": c.spec.setting,
            "image encoder": c.spec.image_encoder
            if c.spec.setting != "e2e"
            else "(trained)",
            "difficulty": c.spec.difficulty,
            "Triplet-SH's loss": registry.label(c.hardest),
            "epochs": c.spec.epochs,
            "batch": c.spec.batch_size,
            "lr": c.spec.lr,
        }
        for c in lessons.conditions(spec)
    ]
)
# two tables, so each fits the book's column: what a condition changes, its schedule
changes = ["experiment", "condition", "setting", "image encoder", "difficulty"]
display(
    plan[changes], plan[["condition", "Triplet-SH's loss", "epochs", "batch", "lr"]]
)

# %%
done = lessons.run(
    spec,
    command=f"notebook 12 (VLR_FAST={int(cfg.fast)})",
    record=cfg.use_record,
    progress=not cfg.fast,
)
runs, meta = done.runs, done.meta
if done.record is not None:
    print(done.record.line())
origin = (
    "opened from the record"
    if done.record
    else "stored table reused"
    if done.reused
    else "trained just now"
)
display(
    Markdown(
        f"- **{origin}**; {meta['n_cells']} cells ({meta['epochs_trained_now']} epochs "
        f"trained in this call), {meta['wall_seconds']:.0f} s on {meta['hardware']}; "
        f"{meta['date']}"
    )
)

# %% [markdown]
# Before reading a number, check the design: every condition has the four losses with every seed; the
# conditions that share the base spec share its runs exactly; every run on frozen features beat the
# chance rsum of the test split by far. End to end is read apart (full mode only: in fast mode four
# epochs from scratch on 200 scenes stay near chance): Triplet, Unified and NT-Xent learn, and
# **Triplet-SH stays at chance on every seed** — with a random CNN and GRU the hardest negative of a
# batch is an arbitrary caption, and one such negative per query gives the encoders nothing to start
# from. That is the collapse the warm-up of (c) exists for (VSE∞ trains its first epoch on all
# negatives); exercise 4 tries it end to end.

# %%
n_seeds = len(spec.seeds)
per_condition = runs.groupby(["experiment", "condition"])
assert (per_condition.size() == 4 * n_seeds).all()
assert per_condition["role"].nunique().eq(4).all()
base = [
    runs[(runs["experiment"] == e) & (runs["condition"] == c)].set_index(
        ["role", "seed"]
    )["sel_rsum"]
    for e, c in (
        ("features", "pretrained encoder"),
        ("difficulty", "difficulty 0.5"),
        ("warmup", "no warm-up"),
        ("setting", "heads on features"),
    )
]
assert all(b.equals(base[0]) for b in base[1:]), "the base condition is one set of runs"
warm_c, warm_e = (
    runs[(runs["experiment"] == e) & (runs["condition"] == c)].set_index(
        ["role", "seed"]
    )["sel_rsum"]
    for e, c in (
        ("warmup", "1 epoch of Triplet first"),
        ("optimizer", "fresh Adam at the switch"),
    )
)
assert warm_c.equals(warm_e), "(e)'s first condition is (c)'s one-epoch warm-up"
n_test = lessons.conditions(spec)[0].spec.n_test
# a random ranking; five captions per image
chance = metrics.chance_rsum([i for i in range(n_test) for _ in range(5)])
end_to_end = runs["condition"] == lessons.SETTING_NAMES["e2e"]
judged = runs[~end_to_end]
assert (judged["sel_rsum"] > chance + 10).all(), judged.loc[
    judged["sel_rsum"] <= chance + 10, ["condition", "loss"]
]
# end to end at full size: Triplet-SH collapses on every seed, the other three learn
if not cfg.fast:
    e2e = runs[end_to_end].set_index("role")["sel_rsum"]
    assert (e2e.drop("triplet_hardest") > chance + 100).all(), e2e
    assert (abs(e2e["triplet_hardest"] - chance) < 5).all(), e2e["triplet_hardest"]
table = lesson_table(runs)
print(
    f"{len(runs)} rows, {meta['n_cells']} distinct runs; chance rsum on the test split "
    f"{chance:.1f}"
)

# The shipped record, checked in full mode: one of its runs re-trained from scratch at
# full size (fast mode leaves it to the tests, tests/experiments/test_lessons.py, which
# re-train the same run).
print(
    "the record's check runs in full mode"
    if cfg.fast
    else protocol.check("lessons-shapes-full")
)

# %% [markdown]
# Each experiment below shows three differences of test rsum per condition, as the papers order the
# losses: **Triplet-SH − Triplet** (VSE++ and Bleeker & de Rijke: > 0), **Unified − Triplet-SH**
# (Li et al.: > 0) and **NT-Xent − Triplet-SH** (Bleeker & de Rijke: < 0). Each difference is the mean
# over seeds of the per-seed difference (same seed: same initialisation, same batches), and its error
# bar is the half-width of the uncorrected paired 95% t interval (`vlr_lib.stats.paired_interval`). The
# chapter compares 33 distinct pairs (each experiment's base condition is one set of runs, counted once),
# so about one or two intervals would exclude 0 by chance alone if no loss differed: the verdicts are read
# from the paired t test **Holm-corrected over the 33** (`vlr_lib.stats.verdicts`). A filled marker: the
# papers' ordering holds; a cross: it reverses; an open marker: five seeds cannot tell. A cell of the
# tables says "uncorrected: ..." where the interval alone would read otherwise — a lead to re-run, not a
# finding. The numbers come from `report.lessons.lesson_table`; the figures only draw them.
#
# ## (a) Feature quality

# %%
viz.lessons.deltas_figure(table, "features", lessons.EXPERIMENTS["features"])

# %%
display(lesson_matrix(table, "features"), role_matrix(runs, "features"))

# %% [markdown]
# ## (b) False negatives
#
# `difficulty` sets how much the scenes of a group of four share; a caption of one scene then often fits
# another scene of the batch too — a false negative that Triplet-SH, which trains on the single hardest
# negative, is the most exposed to. `data.shapes.scene_overlap` measures it: for each test scene, the
# share of attributes it has in common with its most similar other scene (the x-axis labels show the
# mean).

# %%
viz.lessons.deltas_figure(table, "difficulty", lessons.EXPERIMENTS["difficulty"])

# %%
display(lesson_matrix(table, "difficulty"), role_matrix(runs, "difficulty"))

# %%
overlaps = (
    table.drop_duplicates("condition")
    .query("experiment == 'difficulty'")["overlap"]
    .to_numpy()
)
assert (np.diff(overlaps) > 0).all(), overlaps  # more sharing as difficulty grows

# %% [markdown]
# ## (c) Hardest-negative warm-up
#
# At the start of training the embeddings are random, so the hardest negative of a batch is an
# arbitrary one; Bleeker & de Rijke (sec. 5) argue that the all-negatives gradient is then dominated by
# uninformative negatives, while VSE∞ trains the first epoch with all negatives before switching to the
# hardest. The loss schedule `"warmup:triplet_all:<k>:triplet_hardest"` does that in the trainer (it is
# a loss name like any other: cached, resumable); it takes Triplet-SH's place in the three differences.

# %%
viz.lessons.deltas_figure(table, "warmup", lessons.EXPERIMENTS["warmup"])

# %%
display(lesson_matrix(table, "warmup"), role_matrix(runs, "warmup"))

# %% [markdown]
# ## (d) The setting
#
# *Heads on features* trains two linear maps on frozen features (the showdown's default). The *VSE++
# setting* keeps the frozen image features and learns a GRU text encoder from scratch over the training
# captions' words (`vlr_lib.train.fit_vsepp`; Bleeker & de Rijke's Table 1 setting, "no backbone
# fine-tuning"). *End to end* learns a CNN and a GRU from scratch. Each runs at its showdown schedule
# (`cells.spec_for(..., setting)`), so compare the orderings *within* a setting, not the rsums across.

# %%
viz.lessons.deltas_figure(table, "setting", lessons.EXPERIMENTS["setting"])

# %%
display(lesson_matrix(table, "setting"), role_matrix(runs, "setting"))

# %% [markdown]
# ## (e) The optimizer
#
# A loss hands the optimizer a gradient, and the optimizer decides how far to step. Adam divides every
# step by a running estimate of the gradient's scale — its second moment, averaged over about
# $1/(1-\beta_2) = 1000$ steps — and a run here has 780 steps in all. Triplet (all) sums a
# hinge over every negative, so in the first epoch its gradient is about forty times larger than Triplet-SH's (notebook
# 10 draws each loss's gradient norm per epoch). When a warm-up switches from one to the other and Adam's
# state is **carried over**, Triplet-SH inherits that large scale and trains with steps many
# times too small for the rest of the run. The trainer therefore gives the new loss a **fresh** Adam at
# the switch (`TrainSettings.optimizer_at_switch`, default `"fresh"`; `"carry"` keeps the old state). That
# default is this workbook's choice, not the papers': VSE∞ keeps one AdamW across its warm-up switch and
# **clips** the gradient's norm at 2 (`grad_clip=2.0`), which caps Triplet (all)'s scale before Adam sees
# it — "carried over, clipped at 2" below is close to the VSE∞ recipe (VSE∞'s optimizer is AdamW, with
# weight decay 10⁻⁴). Every condition here trains 20 epochs; what Adam's memory costs may depend on that
# budget (a longer run has more steps to forget it), which this record does not measure. This experiment
# stays **exploratory**: its conditions were chosen after earlier records had been read. Chapter 13
# (section 7) tests the question pre-registered, on new seeds, at 20 and 40 epochs, with VSE∞'s AdamW.
#
# This experiment trains the warm-up of (c) — one epoch of Triplet (all), then Triplet-SH — in the four
# combinations, with the other three losses trained under the same optimizer settings. Condition 1 is
# (c)'s own "1 epoch of Triplet first".

# %%
viz.lessons.deltas_figure(table, "optimizer", lessons.EXPERIMENTS["optimizer"])

# %%
display(lesson_matrix(table, "optimizer"), role_matrix(runs, "optimizer"))

# %% [markdown]
# The orderings above compare losses *within* a condition. What the optimizer does to the warmed-up
# Triplet-SH itself is a comparison *across* conditions, paired by seed as well (same seed: same heads
# and batches). These four comparisons are a family of their own, declared here and Holm-corrected
# together ("ahead" / "behind" / "not told apart": a's place):

# %%
warmed = runs[(runs["experiment"] == "optimizer") & (runs["role"] == "triplet_hardest")]
warmed = warmed.pivot_table(index="seed", columns="condition", values="sel_rsum")
warmed["Triplet-SH alone"] = (
    runs[(runs["condition"] == "no warm-up") & (runs["role"] == "triplet_hardest")]
    .set_index("seed")
    .loc[warmed.index, "sel_rsum"]
)
OPTIMIZER_FAMILY = (
    ("fresh Adam at the switch", "Adam carried over"),
    ("carried over, clipped at 2", "Adam carried over"),
    ("fresh Adam at the switch", "carried over, clipped at 2"),
    ("fresh Adam at the switch", "Triplet-SH alone"),
)
handling = stats.verdicts(
    [stats.Comparison(f"{a} − {b}", warmed[a], warmed[b]) for a, b in OPTIMIZER_FAMILY],
    family=[f"{a} − {b}" for a, b in OPTIMIZER_FAMILY],
).set_index("name")
display(
    handling[["delta", "low", "high", "p", "p_holm", "verdict", "uncorrected"]].round(3)
)
# the record (20 epochs): carried over, Adam's memory of Triplet (all)'s scale costs
# Triplet-SH
if not cfg.fast:
    assert list(handling["verdict"]) == [
        "ahead",
        "ahead",
        "not told apart",
        "not told apart",
    ], handling
    assert (warmed["fresh Adam at the switch"] > warmed["Adam carried over"]).all(), (
        warmed
    )

# %% [markdown]
# ## What the experiments say
#
# The reading below is generated from the table by `report.lessons.lesson_reading`: for each experiment and
# each paper's ordering, the conditions where it holds, where it reverses and where five seeds cannot
# tell after Holm's correction over the chapter's 33 comparisons, with the difference ± the half-width of
# its uncorrected paired 95% interval — when the per-seed differences all have one sign, that too, and
# where the uncorrected interval alone would read otherwise, that as well.

# %% tags=["remove-input"]
reading = lesson_reading(table, lessons.EXPERIMENTS)
display(Markdown(reading["text"]))

# %% [markdown]
# Every verdict is recomputed from the raw runs here, independently of `report`: the per-seed differences,
# their t statistic and p value, and Holm's step-down written out (reject the smallest p while it is below
# 0.05 / (number of comparisons not yet rejected), stop at the first that is not).

# %%
# one entry per distinct comparison: a condition sharing its runs with another counts
# once
distinct = {}
for _, row in table.iterrows():
    part = runs[
        (runs["experiment"] == row["experiment"])
        & (runs["condition"] == row["condition"])
    ]
    by_seed = part.pivot_table(index="seed", columns="role", values="sel_rsum")
    # paired: one difference per seed
    d = (by_seed[row["a"]] - by_seed[row["b"]]).to_numpy()
    assert abs(row["delta"] - d.mean()) < 1e-9
    key = (row["a"], row["b"], tuple(by_seed[row["a"]]), tuple(by_seed[row["b"]]))
    # one seed cannot tell; the same difference on every seed is certain
    if len(d) < 2 or d.std() == 0:
        p = 1.0 if len(d) < 2 or d.mean() == 0 else 0.0
    else:
        p = stats.t_two_sided_p(
            d.mean() / (d.std(ddof=1) / np.sqrt(len(d))), len(d) - 1
        )
    distinct.setdefault(key, (p, d.mean() * row["expected"]))
told, m = set(), len(distinct)
for k, key in enumerate(sorted(distinct, key=lambda key: distinct[key][0])):
    if distinct[key][0] >= 0.05 / (m - k):
        break
    told.add(key)
for (exp, comparison), found in reading["verdicts"].items():
    for _, row in table[
        (table["experiment"] == exp) & (table["comparison"] == comparison)
    ].iterrows():
        part = runs[
            (runs["experiment"] == exp) & (runs["condition"] == row["condition"])
        ]
        by_seed = part.pivot_table(index="seed", columns="role", values="sel_rsum")
        key = (row["a"], row["b"], tuple(by_seed[row["a"]]), tuple(by_seed[row["b"]]))
        verdict = (
            "cannot tell"
            if key not in told
            else "holds"
            if distinct[key][1] > 0
            else "reverses"
        )
        assert row["condition"] in found[verdict], (
            exp,
            comparison,
            row["condition"],
            verdict,
        )
n_raw = sum(p < 0.05 for p, _ in distinct.values())
print(
    f"{len(table)} differences checked: {m} distinct comparisons, {n_raw} with p < "
    f"0.05 alone, {len(told)} after Holm's correction"
)

# %%
viz.lessons.overview_figure(table, lessons.EXPERIMENTS)

# %% [markdown]
# ## Explorer: the seeds behind each difference
#
# Every point of the figures above is a mean over seeds. The explorer shows what it is made of: pick an
# experiment's condition and one of the three orderings, and see each seed's difference a − b, their
# mean with its paired 95% interval, and the wider interval at the level Holm's correction tested it.
# An interval that crosses 0 cannot tell; five seeds on one side of 0 are not yet a verdict when the
# Holm interval still crosses it. Nothing is retrained: the explorer reads `runs` and `table`.

# %%
explorer = widgets.lessons.paired_explorer(runs, table, lessons.EXPERIMENTS)
explorer

# %% [markdown]
# The explorer only calls `vlr_lib.viz.lessons.paired_figure`: its seeds are the per-seed differences
# whose mean is the table's difference.

# %%
c = explorer.controls
c["comparison"].value = "NT-Xent − Triplet-SH"
c["condition"].value = ("features", "random encoder")
row = table[
    (table["condition"] == "random encoder")
    & (table["comparison"] == "NT-Xent − Triplet-SH")
].iloc[0]
assert abs(np.mean(explorer.figure.data[0].y) - row["delta"]) < 1e-9

# %% [markdown]
# ## In short: what holds, where, and why
#
# The synthesis below is written from the table (in full mode, the record's five seeds); each of its
# statements is an `assert` on the Holm-corrected verdicts (and, where it names a lead, on the uncorrected
# one), so the prose cannot claim more than the corrected test. Fast mode trains a
# small version, whose verdicts are a smoke test and can differ: it prints where to read the findings.


# %% tags=["remove-input"]
def verdict_of(experiment: str, condition: str, a: str, b: str) -> pd.Series:
    rows = table[
        (table["experiment"] == experiment)
        & (table["condition"] == condition)
        & (table["a"] == a)
        & (table["b"] == b)
    ]
    return rows.iloc[0]


def said(row: pd.Series) -> str:
    return f"{row['delta']:+.1f} ± {row['half']:.1f}"


if cfg.fast:
    display(
        Markdown(
            "*Fast mode: the findings are those of the full-size record (full mode, or "
            "the book).*"
        )
    )
else:
    sh_t = {
        c: verdict_of(e, c, "triplet_hardest", "triplet_all")
        for e, c in (
            ("features", "pretrained encoder"),
            ("setting", "VSE++ setting"),
            ("difficulty", "difficulty 1"),
            ("features", "random encoder"),
            ("setting", "end to end"),
        )
    }
    uni = {
        c: verdict_of("setting", c, "unified", "triplet_hardest")
        for c in ("heads on features", "VSE++ setting")
    }
    ntx = {
        c: verdict_of("setting", c, "info_nce", "triplet_hardest")
        for c in ("heads on features", "VSE++ setting")
    }
    # the 33 distinct comparisons
    family = table.drop_duplicates(["a", "b", "mean_a", "mean_b", "delta"])
    n_told, n_raw = (
        int((family["verdict"] != "cannot tell").sum()),
        int((family["uncorrected"] != "cannot tell").sum()),
    )
    assert (len(family), n_raw, n_told) == (33, 19, 11), (len(family), n_raw, n_told)
    # Holm-corrected: the VSE++ setting's Triplet-SH lead and the end-to-end collapse;
    # the rest cannot be told
    assert [sh_t[c]["verdict"] for c in sh_t] == [
        "cannot tell",
        "holds",
        "cannot tell",
        "cannot tell",
        "reverses",
    ], sh_t
    # ... though each of those three intervals alone excludes 0: leads for the
    # replication, not findings
    assert [sh_t[c]["uncorrected"] for c in sh_t] == [
        "holds",
        "holds",
        "reverses",
        "reverses",
        "reverses",
    ], sh_t
    assert (
        {r["verdict"] for r in uni.values()}
        == {r["uncorrected"] for r in uni.values()}
        == {"cannot tell"}
    ), uni
    assert (ntx["heads on features"]["verdict"], ntx["VSE++ setting"]["verdict"]) == (
        "cannot tell",
        "cannot tell",
    )
    assert ntx["heads on features"]["uncorrected"] == "reverses"
    e2e_sh = runs[
        (runs["condition"] == "end to end") & (runs["role"] == "triplet_hardest")
    ]["sel_rsum"]
    assert (abs(e2e_sh - chance) < 5).all(), e2e_sh
    fresh, clip = (
        handling.loc["fresh Adam at the switch − Adam carried over"],
        handling.loc["carried over, clipped at 2 − Adam carried over"],
    )
    said_p = lambda row: (
        f"{said(row)}; p = {row['p']:.3f} alone, {row['p_holm']:.2f} corrected"
    )  # noqa: E731
    display(
        Markdown(
            f"**What survives the correction.** Of the chapter's {len(family)} "
            f"distinct comparisons, {n_raw} have an uncorrected 95% interval that "
            f"excludes 0 and {n_told} survive Holm's correction over all "
            f"{len(family)}. Among them: in the VSE++ setting Triplet-SH is ahead of "
            f"Triplet (all) ({said(sh_t['VSE++ setting'])} rsum), VSE++'s ordering; "
            "trained end to end from scratch Triplet-SH never leaves chance on any "
            f"seed ({e2e_sh.mean():.1f} against chance {chance:.1f}), the collapse a "
            "warm-up exists for.\n\n**Leads, not findings.** The reading of earlier "
            "versions of this chapter — the hardest negative helps where the "
            "negatives are informative and hurts where they are not — rests on "
            "intervals that exclude 0 alone but not after the correction: Triplet-SH "
            "ahead of Triplet (all) on pretrained features "
            f"({said_p(sh_t['pretrained encoder'])}), behind it with many false "
            f"negatives (difficulty 1: {said_p(sh_t['difficulty 1'])}) and with a "
            f"random encoder ({said_p(sh_t['random encoder'])}); and NT-Xent ahead of "
            "Triplet-SH on frozen pretrained features "
            f"({said_p(ntx['heads on features'])}), against Bleeker & de Rijke's "
            "observation 3. They point where the runs of docs/results.md pointed, and "
            "five seeds with this many comparisons cannot confirm them; a replication "
            "with settings fixed in advance can.\n\n**Li et al.'s unified loss, "
            "untuned, cannot be told from Triplet-SH here** (heads on features "
            f"{said(uni['heads on features'])}, VSE++ setting "
            f"{said(uni['VSE++ setting'])}), and neither can NT-Xent in the VSE++ "
            f"setting ({said(ntx['VSE++ setting'])}). Every loss here trains at the "
            "library's defaults: this says nothing about the losses tuned, which "
            "notebook 11 compares.\n\n**A warm-up's effect belongs to the optimizer "
            "as much as to the losses** (experiment (e), 20 epochs, its own family of "
            "four comparisons). With Adam's state carried over from Triplet (all) the "
            "warmed-up Triplet-SH is behind the same warm-up with a fresh Adam "
            f"({fresh['delta']:+.1f} rsum for the fresh one, [{fresh['low']:.1f}, "
            f"{fresh['high']:.1f}], Holm-corrected p = {fresh['p_holm']:.3f}) — Adam's "
            "memory of Triplet (all)'s much larger gradients shrinks Triplet-SH's "
            "steps — and clipping the gradient's norm at 2 wins it back "
            f"({clip['delta']:+.1f} [{clip['low']:.1f}, {clip['high']:.1f}]); fresh "
            "and clipped are not told apart. Carried over and clipped is VSE∞'s "
            "recipe but for its optimizer (AdamW), so the cost belongs to carrying "
            "Adam over *without* clipping, at this 20-epoch budget, in this "
            "exploratory record; chapter 13 (section 7) "
            "tests it pre-registered, on new seeds, at 20 and 40 epochs and with "
            "VSE∞'s AdamW. The earlier records of this chapter (docs/results.md, runs "
            "5 and 6) found the warm-up harmful because they carried Adam over "
            "unclipped and stopped runs before they converged."
        )
    )

# %% [markdown]
# ## Summary
#
# * A loss's lesson is an ordering *under conditions*. Change the features, the data, the schedule or
#   what is trained, and measure again — each difference paired by seed, with its 95% interval, and the
#   comparisons read together corrected as a family (Holm): 19 intervals of 33 exclude 0 here, 11 survive.
# * The optimizer is part of the condition: runs must converge, and a loss switch must not inherit the
#   old loss's Adam state unannounced (experiment (e), at 20 epochs; chapter 13 tests it pre-registered).
#   The findings above say which orderings survive.
# * Pretraining gives frozen features whose cosine already ranks images as their captions do; the papers
#   measured their orderings on such features.
# * A loss schedule (`"warmup:<first>:<epochs>:<then>"`) is just another loss name for the trainer, the
#   grid and the showdown.
#
# ## Exercises
#
# 1. **Fewer seeds.** Read the chapter with three seeds, as many papers report:
#    `report.lessons.lesson_table(runs[runs["seed"].isin([0, 1, 2])])` (the same runs, nothing to train). Which
#    verdicts survive, and why does a paired interval over three seeds need a larger difference?
# 2. **A longer warm-up.** Add `warmup_epochs=(1, 2, 3)`. Where does the warmed-up Triplet-SH land against
#    Triplet (all) — and is a long warm-up still Triplet-SH?
# 3. **Your own condition.** Train the four losses with MLP heads instead of linear ones
#    (`showdown={"head": "mlp"}` in `LessonsSpec`) and compare the orderings of (a).
# 4. **Rescue Triplet-SH end to end.** At full size Triplet-SH stays at chance end to end. Train it with
#    one epoch of Triplet first (`"warmup:triplet_all:1:triplet_hardest"`) in the end-to-end condition
#    (`cells.train_cells(condition.spec, [{"loss": ...}], spec.out)`): does it learn now, and how far
#    from Triplet (all)?

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 1, the answer.** With the first three seeds, **3 of the 33 distinct comparisons**
# survive Holm's correction, against 11 with all five. The three are the end-to-end collapse,
# Triplet-SH at chance against each of the other three losses, differences of about 400 rsum. No
# verdict changes sign; eight rows of the tables lose theirs. Among them are NT-Xent's lead over
# Triplet-SH with a random encoder (+25.0 with five seeds), the VSE++ setting's Triplet-SH lead over
# Triplet (all) (+9.4) and the two-epoch warm-up's (+8.5). Two things shrink a verdict with fewer
# seeds. The interval's half-width is $t_{0.975,\,n-1} \cdot sd / \sqrt{n}$: $t = 4.30$ at $n = 3$
# against 2.78 at $n = 5$, so per unit of sd the half-width is 2.48 against 1.24, twice as wide.
# And Holm's correction asks the first of the 33 for $p < 0.05/33$, which with 2 degrees of freedom
# takes a t statistic of 25.7, against 7.7 with 4. With three seeds and this many comparisons only
# enormous differences can be verdicts.

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell"]
# Solution 1.
three_table = lesson_table(runs[runs["seed"].isin([0, 1, 2])])
key_cols = ["a", "b", "mean_a", "mean_b", "delta"]  # a shared condition counts once
fam5, fam3 = (t.drop_duplicates(key_cols) for t in (table, three_table))
told5, told3 = (int((f["verdict"] != "cannot tell").sum()) for f in (fam5, fam3))
both = table.merge(
    three_table,
    on=["experiment", "condition", "comparison"],
    suffixes=("", " (3 seeds)"),
)
changed = both[both["verdict"] != both["verdict (3 seeds)"]]
print(
    f"distinct comparisons told apart: {told5} of {len(fam5)} with five seeds, {told3} "
    "with three"
)
display(
    changed[["experiment", "condition", "comparison", "verdict", "verdict (3 seeds)"]]
)
half = {n: stats.t_quantile_975(n - 1) / np.sqrt(n) for n in (3, 5)}
assert half[3] > 1.9 * half[5]  # the same spread needs about twice the difference
if not cfg.fast:  # the answer's numbers, read from the record
    assert (len(fam5), told5, told3) == (33, 11, 3)
    told = fam3[fam3["verdict"] != "cannot tell"]
    assert set(told["condition"]) == {"end to end"}
    assert told["delta"].abs().between(400, 430).all()  # Triplet-SH at chance
    assert (changed["verdict (3 seeds)"] == "cannot tell").all() and len(changed) == 8
    leads = changed.set_index(["condition", "comparison"])["delta"].round(1)
    assert leads[("random encoder", "NT-Xent − Triplet-SH")] == 25.0
    assert leads[("VSE++ setting", "Triplet-SH − Triplet")] == 9.4
    assert leads[("2 epochs of Triplet first", "Triplet-SH − Triplet")] == 8.5
    assert [round(stats.t_quantile_975(n - 1), 2) for n in (3, 5)] == [4.3, 2.78]
    assert [round(half[n], 2) for n in (3, 5)] == [2.48, 1.24]
    assert [round(stats.t_quantile(0.05 / 33, n - 1), 1) for n in (3, 5)] == [25.7, 7.7]

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 2, the answer.** The record holds warm-ups of one and two epochs, so most of the answer
# needs no training. Against Triplet (all), Triplet-SH is ahead in all three conditions of (c): by
# +4.8 ± 2.4 rsum with no warm-up, +7.5 ± 4.8 after one epoch of Triplet, and +8.5 ± 2.1 after two.
# Only the last survives Holm's correction. Against Triplet-SH without a warm-up, on the same seeds,
# the warmed-up runs gain +2.6 [0.0, +5.2] and +3.7 [+1.4, +6.1]. These two comparisons are outside
# the chapter's family, so read them uncorrected, as leads. A warm-up of two of the 20 epochs, with a
# fresh Adam at the switch, still leaves 18 epochs of Triplet-SH, the decayed learning rate of the
# second half included. So the two-epoch run is Triplet-SH with a better start, not Triplet (all)
# renamed. Three epochs push the same way. Training them (one new loss, the experiment's five seeds)
# is the longer part of the exercise (`RUN = True`).

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell", "longer-exercise"]
# Solution 2.
RUN = False  # True: train Triplet-SH after 3 epochs of Triplet (all), every seed
rows = table[
    (table["experiment"] == "warmup") & (table["comparison"] == "Triplet-SH − Triplet")
]
warm = rows.set_index("condition")
display(warm[["delta", "half", "verdict", "uncorrected"]].round(2))
alone = runs[(runs["experiment"] == "warmup") & (runs["role"] == "triplet_hardest")]
alone = alone.pivot_table(index="seed", columns="condition", values="sel_rsum")
vs_alone = {
    c: stats.paired_interval(alone[c], alone["no warm-up"])
    for c in alone
    if c != "no warm-up"
}
print({c: [round(x, 1) for x in v] for c, v in vs_alone.items()})
if not cfg.fast:  # the answer's numbers, read from the record
    said = [(round(r.delta, 1), round(r.half, 1), r.verdict) for r in warm.itertuples()]
    assert said == [
        (4.8, 2.4, "cannot tell"),
        (7.5, 4.8, "cannot tell"),
        (8.5, 2.1, "holds"),
    ], said
    assert [round(x, 1) for x in vs_alone["1 epoch of Triplet first"]] == [
        2.6,
        0.0,
        5.2,
    ]
    assert [round(x, 1) for x in vs_alone["2 epochs of Triplet first"]] == [
        3.7,
        1.4,
        6.1,
    ]
plain = next(c for c in lessons.conditions(spec) if c.label == "no warm-up")
n_runs, epochs = len(plain.spec.seeds), plain.spec.epochs
if longer_exercise(cfg, RUN, f"{n_runs} runs of {epochs} epochs"):
    three_epochs = "warmup:triplet_all:3:triplet_hardest"
    # only the new loss trains, on the condition's data, schedule and seeds
    longer, *_ = cells.train_cells(
        plain.spec, [{"loss": three_epochs}], spec.out, progress=not cfg.fast
    )
    new = longer.runs.set_index("seed")["sel_rsum"].sort_index()
    base_runs = runs[runs["condition"] == "no warm-up"]
    triplet = base_runs[base_runs["role"] == "triplet_all"].set_index("seed")[
        "sel_rsum"
    ]
    d, low, high = stats.paired_interval(new, triplet.loc[new.index])
    print(
        f"3 epochs of Triplet first, Triplet-SH - Triplet (all): {d:+.1f} [{low:+.1f}, "
        f"{high:+.1f}]"
    )
    assert (new > chance + 10).all()

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 3, the answer.** Start from what linear heads give in (a) (the record, five seeds). With
# the pretrained encoder no ordering survives Holm's correction. Triplet-SH is ahead of Triplet (all)
# by +4.8 ± 2.4 and NT-Xent ahead of Triplet-SH by +8.0 ± 4.1, each excluding 0 only uncorrected. The
# unified loss is at +0.4 ± 2.3. With the random encoder one ordering survives: NT-Xent is ahead of
# Triplet-SH by +25.0 ± 9.3, the reverse of Bleeker & de Rijke's observation 3. Triplet-SH behind
# Triplet (all), −8.6 ± 8.3, excludes 0 only uncorrected. These are the numbers MLP heads are compared
# with. An ordering "changes" with the heads only if its verdict does, not if its difference moves by
# a few points. Training them, experiment (a) with the four losses and five seeds (40 runs of 20
# epochs), is the longer part of the exercise (`RUN = True`).

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell", "longer-exercise"]
# Solution 3.
RUN = False  # True: train experiment (a) with MLP heads
linear_a = table[table["experiment"] == "features"].set_index(
    ["condition", "comparison"]
)
display(linear_a[["delta", "half", "verdict", "uncorrected"]].round(2))
if not cfg.fast:  # the answer's numbers, read from the record
    said = {
        k: (round(r["delta"], 1), round(r["half"], 1), r["verdict"], r["uncorrected"])
        for k, r in linear_a.iterrows()
    }
    assert said == {
        ("random encoder", "Triplet-SH − Triplet"): (
            -8.6,
            8.3,
            "cannot tell",
            "reverses",
        ),
        ("random encoder", "Unified − Triplet-SH"): (
            4.2,
            7.2,
            "cannot tell",
            "cannot tell",
        ),
        ("random encoder", "NT-Xent − Triplet-SH"): (25.0, 9.3, "reverses", "reverses"),
        ("pretrained encoder", "Triplet-SH − Triplet"): (
            4.8,
            2.4,
            "cannot tell",
            "holds",
        ),
        ("pretrained encoder", "Unified − Triplet-SH"): (
            0.4,
            2.3,
            "cannot tell",
            "cannot tell",
        ),
        ("pretrained encoder", "NT-Xent − Triplet-SH"): (
            8.0,
            4.1,
            "cannot tell",
            "reverses",
        ),
    }, said
# experiment (a) alone: fast mode one seed for two epochs (a first look), full mode five
# seeds
mlp = lessons.LessonsSpec(
    fast=cfg.fast,
    device=str(cfg.device),
    showdown={"head": "mlp", **cfg.pick({"epochs": 2}, {})},
    difficulties=(spec.difficulty,),
    warmup_epochs=(),
    settings=("features",),
    **cfg.pick({"seeds": (0,)}, {}),
)
n_runs = 2 * 4 * len(mlp.seeds)
if longer_exercise(cfg, RUN, f"{n_runs} runs with MLP heads"):
    mlp_runs = lessons.run(mlp, progress=not cfg.fast).runs
    assert set(mlp_runs["condition"]) >= {"random encoder", "pretrained encoder"}
    display(lesson_matrix(lesson_table(mlp_runs), "features"))

# %% [markdown] jupyter={"source_hidden": true} tags=["solution"]
# **Solution 4, the answer.** Here is what the record says before any training. Trained end to end
# from scratch, Triplet-SH ends at 16.3 rsum on average (15.8 to 16.7 over the five seeds), against
# a chance level of 15.9: it never learns. Triplet (all) reaches 421.1 (394.5 to 442.7), the
# unified loss 445.6 and NT-Xent 431.8. So the rescue succeeds if the warmed-up Triplet-SH clears
# chance on every seed, and "how far from Triplet (all)" is its paired difference from those
# 421.1. One epoch of Triplet (all) gives the encoders the start that one arbitrary hardest
# negative per query cannot (VSE∞'s recipe). Training it end to end, five runs of 40 epochs at
# batch 32, takes the longest of the chapter's exercises (`RUN = True`).

# %% jupyter={"outputs_hidden": true, "source_hidden": true} tags=["solution", "hide-cell", "longer-exercise"]
# Solution 4.
RUN = False  # True: train the warmed-up Triplet-SH end to end, every seed
e2e_runs = runs[runs["condition"] == lessons.SETTING_NAMES["e2e"]]
e2e_roles = e2e_runs.groupby("role")["sel_rsum"].agg(["mean", "min", "max"])
print(e2e_roles.round(1).to_string())
if not cfg.fast:  # the answer's numbers, read from the record
    sh = e2e_roles.loc["triplet_hardest"].round(1).tolist()
    assert sh == [16.3, 15.8, 16.7] and round(chance, 1) == 15.9
    assert e2e_roles.loc["triplet_all"].round(1).tolist() == [421.1, 394.5, 442.7]
    assert e2e_roles.loc[["unified", "info_nce"], "mean"].round(1).tolist() == [
        445.6,
        431.8,
    ]
# the end-to-end condition's own spec (fast mode trained none: one seed there)
e2e_only = dataclasses.replace(spec, settings=("e2e",))
condition = next(c for c in lessons.conditions(e2e_only) if c.spec.setting == "e2e")
warm_spec = cfg.pick(dataclasses.replace(condition.spec, seeds=(0,)), condition.spec)
steps = f"{len(warm_spec.seeds)} runs of {warm_spec.epochs} epochs"
if longer_exercise(cfg, RUN, f"{steps} end to end"):
    warm_loss = "warmup:triplet_all:1:triplet_hardest"
    warmed, *_ = cells.train_cells(
        warm_spec, [{"loss": warm_loss}], spec.out, progress=not cfg.fast
    )
    assert set(warmed.runs["loss"]) == {warm_loss}
    assert warmed.runs["sel_rsum"].notna().all()
    new = warmed.runs.set_index("seed")["sel_rsum"].sort_index()
    lifted = int((new > chance + 10).sum())
    print(
        f"warmed-up Triplet-SH clears chance by 10 rsum on {lifted} of {len(new)} "
        "seed(s)"
    )
    if "triplet_all" in set(e2e_runs["role"]):  # full mode: compare on the same seeds
        triplet = e2e_runs[e2e_runs["role"] == "triplet_all"].set_index("seed")[
            "sel_rsum"
        ]
        d, low, high = stats.paired_interval(new, triplet.loc[new.index])
        print(f"against Triplet (all): {d:+.1f} [{low:+.1f}, {high:+.1f}]")

# %% [markdown]
# ## References
#
# - Faghri, Fleet, Kiros, Fidler. *VSE++: Improving Visual-Semantic Embeddings with Hard Negatives.* BMVC 2018. [arXiv:1707.05612](https://arxiv.org/abs/1707.05612)
# - Veit, Wilber. *Improving Calibration in Deep Metric Learning With Cross-Example Softmax.* 2020. [arXiv:2011.08824](https://arxiv.org/abs/2011.08824)
# - Bleeker, de Rijke. *Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?* ECIR 2022. [arXiv:2202.07474](https://arxiv.org/abs/2202.07474)
# - Li, Guo, Wang, Feng, Hwang, Du. *Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval.* 2022. [arXiv:2209.13869](https://arxiv.org/abs/2209.13869)
# - Xuan, Chen. *Dissecting Deep Metric Learning Losses for Image-Text Retrieval* (GOAL). 2022. [arXiv:2210.13188](https://arxiv.org/abs/2210.13188)
