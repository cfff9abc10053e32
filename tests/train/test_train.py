"""vlr_lib.train.fit / fit_end_to_end and vlr_lib.models: history, determinism, masking, checkpoints, errors."""
from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import pytest
import torch

from vlr_lib import losses as L
from vlr_lib import metrics, registry
from vlr_lib.metrics import chance_rsum
from vlr_lib.models import LinearHead, MLPHead, TextBag, TextGRU, TinyCNN, Vocabulary
from vlr_lib.train import (
    TrainingDivergedError,
    fit,
    fit_end_to_end,
    make_objective,
)
from vlr_lib._io import atomic_write
from vlr_lib.report.labels import flatten_record
from vlr_lib.train import checkpoint as ck
from vlr_lib.train import engine
from vlr_lib.train.evaluate import similarity_stats
from vlr_lib.train.sampling import batch_mask, epoch_batches

ROOT = Path(__file__).resolve().parents[2]
N_IMG, N_CAP, D = 64, 5, 32
TIME_KEYS = ("seconds", "train_seconds")


@pytest.fixture(scope="module")
def feats():
    """64 images x 5 captions, D=32: captions are a noisy linear map of their image, so there is signal to learn."""
    g = torch.Generator().manual_seed(0)
    img = torch.randn(N_IMG, D, generator=g)
    c2i = torch.arange(N_IMG).repeat_interleave(N_CAP)
    txt = img[c2i] @ torch.randn(D, D, generator=g) + 1.5 * torch.randn(N_IMG * N_CAP, D, generator=g)
    return img, txt, c2i


def run(feats, **kw):
    args = dict(loss="info_nce", dim=16, epochs=2, batch_size=16, lr=5e-3, val=feats, progress=False)
    args.update(kw)
    return fit(*feats, **args)


def strip_time(history):
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in history]


# --------------------------------------------------------------------------- history


def test_history_has_one_complete_record_per_epoch(feats):
    res = run(feats, epochs=3, loss="triplet_all")
    assert [r["epoch"] for r in res.history] == [1, 2, 3]
    for r in res.history:
        for key in ("loss", "rsum", "i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10",
                    "map5", "pr_auc", "pos_sim", "hardneg_sim", "cocos", "seconds", "steps", "lr"):
            assert key in r, key
        assert r["steps"] == N_IMG * N_CAP // 16
        assert r["rsum"] == pytest.approx(sum(r[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10)))
        assert -1 <= r["hardneg_sim"] <= 1 and -1 <= r["pos_sim"] <= 1
        assert 0 <= r["map5"] <= 1 and 0 < r["pr_auc"] <= 1  # fractions, unlike the recalls (percent)
        assert set(r["cocos"]) == {"i2t", "t2i"} and r["cocos"]["i2t"]["n_queries"] == 16
    # Default decay: halfway (epoch index 1 of 3) -> lr x 0.1 from the second epoch on.
    assert [r["lr"] for r in res.history] == pytest.approx([5e-3, 5e-4, 5e-4])
    assert res.history[-1]["loss"] < res.history[0]["loss"]
    # The last record's validation metrics are those of the final heads (val = the training triple here).
    S = res.similarity(feats[0], feats[1])
    assert res.history[-1]["map5"] == pytest.approx(metrics.map_at_k(S, feats[2], k=5), abs=1e-6)
    assert res.history[-1]["pr_auc"] == pytest.approx(metrics.pr_auc(S, feats[2]), abs=1e-6)
    assert res.history[-1]["rsum"] == pytest.approx(metrics.retrieval_metrics(S, feats[2])["rsum"])
    assert res.history[0]["map5"] != res.history[-1]["map5"]  # recomputed every epoch
    flat = res.frame()
    assert len(flat) == 3 and "cocos_i2t_C_B" in flat.columns
    json.dumps(res.history)  # stored in checkpoints as JSON


def test_heads_map_into_the_unit_sphere(feats):
    res = run(feats, epochs=1, head="mlp")
    for head, x in ((res.img_head, feats[0]), (res.txt_head, feats[1])):
        out = head(x)
        assert out.shape == (x.shape[0], 16)
        torch.testing.assert_close(out.norm(dim=1), torch.ones(x.shape[0]))
    S = res.similarity(feats[0][:3], feats[1][:4])
    torch.testing.assert_close(S, res.img_head(feats[0][:3]) @ res.txt_head(feats[1][:4]).T)


def test_training_beats_chance(feats):
    res = run(feats, epochs=3)
    assert res.history[-1]["rsum"] > chance_rsum(feats[2]) + 100


def test_same_seed_same_history_other_seed_other_history(feats):
    a, b, c = run(feats), run(feats), run(feats, seed=1)
    assert strip_time(a.history) == strip_time(b.history)
    assert strip_time(a.history) != strip_time(c.history)
    for pa, pb in zip(a.img_head.parameters(), b.img_head.parameters()):
        assert torch.equal(pa, pb)


def test_goal_con_con_trains_like_triplet_hardest(feats):
    """GOAL (con, con) has exactly the Triplet-HN gradient (Xuan & Chen Table 1): same training run."""
    a = run(feats, loss="goal:con,con", probe_batch=0)
    b = run(feats, loss="triplet_hardest", probe_batch=0)
    for ra, rb in zip(a.history, b.history):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-4)
        assert ra["rsum"] == pytest.approx(rb["rsum"], abs=1.0)


@pytest.mark.parametrize("name", ["sampled_softmax", "cross_example_softmax", "smooth_ap"])
def test_row_wise_losses_are_applied_in_both_directions(name):
    g = torch.Generator().manual_seed(1)
    S = torch.rand(6, 6, generator=g, dtype=torch.float64) * 2 - 1
    obj = make_objective(name)
    one_way = registry.entry(name).fn
    expected = one_way(S) + one_way(S.T.contiguous())
    assert float(obj(S)) == pytest.approx(float(expected))
    assert float(obj(S)) == pytest.approx(float(obj(S.T.contiguous())))  # symmetric under transposition
    assert float(obj(S)) != pytest.approx(float(one_way(S)))


# --------------------------------------------------------------------------- batches and masking


def test_epoch_batches_visit_each_caption_once_and_depend_on_seed_and_epoch(feats):
    c2i = feats[2]
    b = epoch_batches(c2i, N_IMG, 16, seed=0, epoch=0)
    assert b.shape == (N_IMG * N_CAP // 16, 16)
    assert b.flatten().unique().numel() == b.numel()
    assert torch.equal(b, epoch_batches(c2i, N_IMG, 16, seed=0, epoch=0))
    assert not torch.equal(b, epoch_batches(c2i, N_IMG, 16, seed=0, epoch=1))
    assert not torch.equal(b, epoch_batches(c2i, N_IMG, 16, seed=1, epoch=0))
    imgs = epoch_batches(c2i, N_IMG, 16, seed=0, epoch=0, sampling="images")
    assert imgs.shape == (N_IMG // 16, 16)
    assert sorted(c2i[imgs].flatten().tolist()) == list(range(N_IMG))  # every image once, no repeats


def test_batches_of_one_image_only_are_dropped():
    c2i = torch.tensor([0, 0, 1, 1])  # batch_size 2: some batches may hold both captions of one image
    for epoch in range(20):
        for batch in epoch_batches(c2i, 2, 2, seed=0, epoch=epoch):
            assert c2i[batch[0]] != c2i[batch[1]]


def test_repeated_images_are_masked_as_false_negatives(feats):
    """The trainer hands the loss the mask of equal image ids of each batch, in epoch_batches order."""
    seen = []

    def spy(S, pos_mask=None):
        seen.append(None if pos_mask is None else pos_mask.clone())
        return L.info_nce(S, pos_mask=pos_mask)

    run(feats, loss=spy, epochs=1, batch_size=32, probe_batch=0)
    batches = epoch_batches(feats[2], N_IMG, 32, seed=0, epoch=0)
    assert len(seen) == batches.shape[0]
    n_repeats = 0
    for mask, batch in zip(seen, batches):
        ids = feats[2][batch].tolist()
        ref = [[ids[i] == ids[j] for j in range(32)] for i in range(32)]
        has_repeat = any(ref[i][j] for i in range(32) for j in range(32) if i != j)
        n_repeats += has_repeat
        if mask is None:
            assert not has_repeat
        else:
            assert mask.tolist() == ref
    assert n_repeats > 0  # 32 of 320 captions over 64 images: repeats are all but certain


def test_batch_mask_is_none_without_repeats():
    assert batch_mask(torch.tensor([3, 1, 2])) is None
    m = batch_mask(torch.tensor([3, 1, 3]))
    assert m.tolist() == [[True, False, True], [False, True, False], [True, False, True]]


# --------------------------------------------------------------------------- checkpoints


class Interrupt:
    def __init__(self, after_epoch: int):
        self.after = after_epoch

    def __call__(self, record, result):
        if record["epoch"] == self.after:
            raise KeyboardInterrupt


class Tag:
    """A callback that adds a JSON-able key (the contract of vlr_lib.train.engine)."""

    def __call__(self, record, result):
        record["tag"] = {"twice": 2 * record["epoch"], "seen": len(result.history)}


def test_callback_keys_are_kept_in_history_and_checkpoint(feats, tmp_path):
    res = run(feats, epochs=2, checkpoint_dir=tmp_path, callbacks=[Tag()])
    tags = [{"twice": 2, "seen": 1}, {"twice": 4, "seen": 2}]
    assert [r["tag"] for r in res.history] == tags
    stored = json.loads(ck.load_checkpoint(tmp_path / ck.CHECKPOINT_NAME)["history"])
    assert [r["tag"] for r in stored] == tags  # the last epoch's checkpoint holds its callback keys too


def test_resumed_history_keeps_callback_keys_of_the_epochs_before(feats, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run(feats, epochs=3, checkpoint_dir=tmp_path, callbacks=[Tag(), Interrupt(after_epoch=2)])
    assert ck.load_checkpoint(tmp_path / ck.CHECKPOINT_NAME)["epoch"] == 2  # the stopping epoch is kept
    resumed = run(feats, epochs=3, checkpoint_dir=tmp_path, callbacks=[Tag()])
    assert [r["tag"]["twice"] for r in resumed.history] == [2, 4, 6]


def test_resume_after_interrupt_equals_uninterrupted_run(feats, tmp_path):
    full = run(feats, epochs=3)  # lr decays after epoch 1: the resumed part runs at the decayed rate
    with pytest.raises(KeyboardInterrupt):
        run(feats, epochs=3, checkpoint_dir=tmp_path, callbacks=Interrupt(after_epoch=2))
    state = ck.load_checkpoint(tmp_path / ck.CHECKPOINT_NAME)
    assert state["epoch"] == 2
    resumed = run(feats, epochs=3, checkpoint_dir=tmp_path)
    assert strip_time(resumed.history) == strip_time(full.history)
    for a, b in itertools.chain(
        zip(full.img_head.state_dict().values(), resumed.img_head.state_dict().values()),
        zip(full.txt_head.state_dict().values(), resumed.txt_head.state_dict().values()),
    ):
        assert torch.equal(a, b)
    assert ck.load_checkpoint(tmp_path / ck.CHECKPOINT_NAME)["epoch"] == 3


def test_checkpoint_loads_weights_only(feats, tmp_path):
    run(feats, epochs=1, checkpoint_dir=tmp_path)
    state = torch.load(tmp_path / ck.CHECKPOINT_NAME, weights_only=True)
    assert {"img_head", "txt_head", "optimizer", "history", "config", "epoch"} <= set(state)
    assert json.loads(state["history"])[0]["epoch"] == 1


def test_resume_with_another_configuration_is_refused(feats, tmp_path):
    run(feats, epochs=1, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        run(feats, epochs=2, lr=1e-3, checkpoint_dir=tmp_path)
    run(feats, epochs=1, lr=1e-3, checkpoint_dir=tmp_path, resume=False)  # explicit restart is fine


def test_crash_while_writing_leaves_previous_checkpoint_loadable(tmp_path):
    path = tmp_path / "last.pt"
    ck.save_checkpoint(path, {"epoch": 1, "w": torch.ones(3)})

    def half_written(f):
        f.write(b"\x80\x02 this is not a checkpoint")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, half_written)
    assert torch.equal(ck.load_checkpoint(path)["w"], torch.ones(3))
    assert os.listdir(tmp_path) == ["last.pt"]  # no temp file left behind


def test_crash_during_trainer_checkpoint_keeps_last_epoch(feats, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = ck.save_checkpoint

    def partial_then_crash(f):
        f.write(b"partial")
        raise OSError("crash")

    def crash_on_second(path, state):
        calls["n"] += 1
        if calls["n"] == 2:
            atomic_write(path, partial_then_crash)
        real(path, state)

    monkeypatch.setattr(engine, "save_checkpoint", crash_on_second)
    with pytest.raises(OSError, match="crash"):
        run(feats, epochs=3, checkpoint_dir=tmp_path)
    assert ck.load_checkpoint(tmp_path / ck.CHECKPOINT_NAME)["epoch"] == 1


def test_nan_loss_stops_with_clear_error_and_keeps_last_good_checkpoint(feats, tmp_path):
    steps = N_IMG * N_CAP // 16
    calls = {"n": 0}

    def breaks_in_epoch_2(S, pos_mask=None):
        calls["n"] += 1
        value = L.info_nce(S, pos_mask=pos_mask)
        return value * math.nan if calls["n"] == steps + 3 else value

    with pytest.raises(TrainingDivergedError, match=r"epoch 2, batch 3.*last good checkpoint \(epoch 1\)"):
        run(feats, loss=breaks_in_epoch_2, epochs=3, checkpoint_dir=tmp_path, probe_batch=0)
    state = ck.load_checkpoint(tmp_path / ck.CHECKPOINT_NAME)
    assert state["epoch"] == 1
    assert all(torch.isfinite(t).all() for t in state["img_head"].values())


def test_nan_without_checkpoint_dir_says_nothing_was_saved(feats):
    def always_nan(S, pos_mask=None):
        return S.sum() * math.nan

    with pytest.raises(TrainingDivergedError, match="epoch 1, batch 1.*no checkpoint_dir"):
        run(feats, loss=always_nan, epochs=1, probe_batch=0)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"loss": "no_such_loss"}, "loss"),
        ({"loss": "goal:cir,nope"}, "loss"),
        ({"loss": "unified", "loss_kwargs": {"temperature": 0.1}}, "loss_kwargs"),
        ({"batch_size": 1}, "batch_size"),
        ({"batch_size": N_IMG + 1}, "batch_size"),
        ({"epochs": 0}, "epochs"),
        ({"head": "transformer"}, "head"),
        ({"sampling": "random"}, "sampling"),
        ({"lr": -1.0}, "lr"),
        ({"probe_batch": 1}, "probe_batch"),
    ],
)
def test_bad_arguments_name_the_argument(feats, kwargs, match):
    with pytest.raises(ValueError, match=f"^{match}"):
        run(feats, **kwargs)


def test_feature_dimension_mismatches_are_reported(feats):
    img, txt, c2i = feats
    with pytest.raises(ValueError, match="^val img_feats"):
        run(feats, val=(img[:, :8], txt, c2i))
    with pytest.raises(ValueError, match="^img_feats"):
        run(feats, head=(LinearHead(D + 1, 16), LinearHead(D, 16)))
    with pytest.raises(ValueError, match="^caption_to_image"):
        fit(img, txt, c2i[:-1], progress=False)
    with pytest.raises(ValueError, match="^txt_feats"):
        fit(img, txt[:, 0], c2i, progress=False)


# --------------------------------------------------------------------------- evaluation pieces


def test_similarity_stats_against_loops():
    g = torch.Generator().manual_seed(3)
    S = torch.rand(4, 9, generator=g) * 2 - 1
    c2i = torch.tensor([0, 0, 1, 1, 1, 2, 3, 3, 0])
    pos, neg = [], []
    for i in range(4):
        mine = [S[i, c].item() for c in range(9) if c2i[c] == i]
        others = [S[i, c].item() for c in range(9) if c2i[c] != i]
        pos.append(sum(mine) / len(mine))
        neg.append(max(others))
    out = similarity_stats(S, c2i)
    assert out["pos_sim"] == pytest.approx(sum(pos) / 4)
    assert out["hardneg_sim"] == pytest.approx(sum(neg) / 4)


def test_flatten_record():
    assert flatten_record({"a": 1, "cocos": {"i2t": {"C_B": 2}}}) == {"a": 1, "cocos_i2t_C_B": 2}


# --------------------------------------------------------------------------- models and end to end


def test_models_produce_unit_vectors_and_ignore_padding():
    torch.manual_seed(0)
    vocab = Vocabulary.build(["a red circle", "a blue square above a red circle"])
    assert vocab.itos[:2] == ["<pad>", "<unk>"] and vocab.encode(["a zebra"])[0, 1] == 1
    ids = vocab.encode(["a red circle", "a blue square above a red circle"])
    longer = torch.cat([ids, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    for enc in (TextGRU(len(vocab), 8), TextBag(len(vocab), 8)):
        out = enc(ids)
        torch.testing.assert_close(out.norm(dim=1), torch.ones(2))
        torch.testing.assert_close(enc(longer), out)
    images = torch.randint(0, 256, (3, 64, 64, 3), dtype=torch.uint8)
    cnn = TinyCNN(8, width=8)
    torch.testing.assert_close(cnn(images), cnn(images.permute(0, 3, 1, 2)))
    torch.testing.assert_close(cnn(images).norm(dim=1), torch.ones(3))
    x = torch.randn(5, 7)
    for head in (LinearHead(7, 4), MLPHead(7, 4)):
        torch.testing.assert_close(head(x).norm(dim=1), torch.ones(5))


def test_end_to_end_on_tiny_shapes():
    from vlr_lib.data.shapes import make_shapes

    dd = make_shapes(n_train=48, n_val=16, n_test=1, seed=0)
    res = fit_end_to_end(dd, "info_nce", epochs=2, batch_size=16, dim=8, width=8, progress=False)
    assert [r["epoch"] for r in res.history] == [1, 2]
    assert res.history[0]["steps"] == 3  # "images" sampling: 48 images / 16
    assert res.extras["chance_rsum"] == pytest.approx(chance_rsum(torch.arange(16).repeat_interleave(5)))
    assert set(res.history[-1]["cocos"]) == {"i2t", "t2i"}


# --------------------------------------------------------------------------- gradient norm and clipping


def test_every_epoch_records_the_unclipped_gradient_norm(feats):
    plain, clipped = run(feats, epochs=2), run(feats, epochs=2, grad_clip=1e-3)
    for r in plain.history:
        assert math.isfinite(r["grad_norm"]) and r["grad_norm"] > 1e-3
    # the record is the norm the loss handed over, before the clip: epoch 1's first step is the same in both,
    # and every later step's norm is still far above the clip
    assert all(r["grad_norm"] > 1e-3 for r in clipped.history)


def test_clipping_changes_training_only_when_the_norm_exceeds_it(feats):
    plain = run(feats, epochs=2)
    assert strip_time(run(feats, epochs=2, grad_clip=1e9).history) == strip_time(plain.history)
    assert strip_time(run(feats, epochs=2, grad_clip=1e-3).history) != strip_time(plain.history)
