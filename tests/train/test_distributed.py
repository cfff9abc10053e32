"""2 ranks x N/2 == 1 rank x N: gather with gradients, gradient averaging, and the whole trainer (gloo, CPU).

Two processes are spawned once (torch.multiprocessing, localhost rendezvous on
a free port); each computes per-loss losses and head gradients on its half of
a fixed batch, and runs ``fit`` for two epochs. The parent compares with the
single-process values.
"""
from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vlr_lib.models import LinearHead
from vlr_lib.similarity import positive_mask
from vlr_lib.train import fit, make_objective
from vlr_lib.train.distributed import average_gradients, gather_with_grad, rank_and_world

LOSSES = ["info_nce", "unified", "triplet_hardest", "cross_example_softmax", "goal:cir,sig-ms", "smooth_ap",
          "triplet_all", "sampled_softmax"]
BATCH = 8


def _data():
    g = torch.Generator().manual_seed(0)
    img = torch.randn(16, 6, generator=g)
    c2i = torch.arange(16).repeat_interleave(2)
    txt = img[c2i] @ torch.randn(6, 5, generator=g) + 0.3 * torch.randn(32, 5, generator=g)
    return img, txt, c2i


def _heads():
    torch.manual_seed(0)
    return LinearHead(6, 4), LinearHead(5, 4)


def _batch():
    """A global batch of 8 captions in which image 3 appears twice (a false negative to mask)."""
    captions = torch.tensor([0, 6, 7, 12, 20, 9, 30, 15])
    return captions


def step(loss: str, part: slice) -> tuple[float, list[torch.Tensor]]:
    """Loss and head gradients of one step, the rows `part` of the batch embedded by this process."""
    img, txt, c2i = _data()
    heads = _heads()
    captions = _batch()
    local = captions[part]
    img_e = gather_with_grad(heads[0](img[c2i[local]]))
    txt_e = gather_with_grad(heads[1](txt[local]))
    mask = positive_mask(c2i[captions])
    value = make_objective(loss)(img_e @ txt_e.T, mask)
    value.backward()
    average_gradients(list(heads))
    return float(value.detach()), [p.grad.clone() for h in heads for p in h.parameters()]


def _fit():
    img, txt, c2i = _data()
    res = fit(img, txt, c2i, "unified", dim=4, epochs=2, batch_size=BATCH, lr=1e-2, val=(img, txt, c2i),
              progress=False)
    return res


def _worker(rank: int, world: int, port: int, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        assert rank_and_world() == (rank, world)
        per = BATCH // world
        results = {loss: step(loss, slice(rank * per, (rank + 1) * per)) for loss in LOSSES}
        res = _fit()
        torch.save({"steps": results, "history": res.history,
                    "img_head": res.img_head.state_dict(), "txt_head": res.txt_head.state_dict()},
                   Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(2, _free_port(), str(out)), nprocs=2, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(2)]


@pytest.mark.parametrize("loss", LOSSES)
def test_two_ranks_give_the_single_process_loss_and_gradients(two_ranks, loss):
    value, grads = step(loss, slice(0, BATCH))
    for rank in range(2):
        v, g = two_ranks[rank]["steps"][loss]
        assert v == pytest.approx(value, rel=1e-5, abs=1e-6)
        for a, b in zip(g, grads):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_gradients_are_not_trivial(two_ranks):
    """Guard against a vacuous comparison: the step does move the heads, differently per loss."""
    _, a = step("info_nce", slice(0, BATCH))
    _, b = step("triplet_all", slice(0, BATCH))
    assert any(float(x.abs().max()) > 1e-3 for x in a)
    assert not all(torch.allclose(x, y) for x, y in zip(a, b))


def test_without_the_gradient_gather_the_result_would_differ():
    """The half-batch loss on one process (what a naive split computes) is not the full-batch loss."""
    full, _ = step("info_nce", slice(0, BATCH))
    img, txt, c2i = _data()
    heads = _heads()
    captions = _batch()[: BATCH // 2]
    S = heads[0](img[c2i[captions]]) @ heads[1](txt[captions]).T
    assert float(make_objective("info_nce")(S, positive_mask(c2i[captions])).detach()) != pytest.approx(full)


def test_trainer_under_two_ranks_matches_one_process(two_ranks):
    single = _fit()
    for rank in range(2):
        hist = two_ranks[rank]["history"]
        assert [r["epoch"] for r in hist] == [1, 2]
        for a, b in zip(hist, single.history):
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)
            assert a["rsum"] == pytest.approx(b["rsum"], abs=1e-6)
        for name, t in single.img_head.state_dict().items():
            torch.testing.assert_close(two_ranks[rank]["img_head"][name], t, rtol=1e-4, atol=1e-5)
        for name, t in single.txt_head.state_dict().items():
            torch.testing.assert_close(two_ranks[rank]["txt_head"][name], t, rtol=1e-4, atol=1e-5)
