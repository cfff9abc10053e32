"""No host synchronisation inside the step loop, proven on the CPU.

On a GPU, reading a tensor's value on the host (``.item()``, ``bool(t)``, ``int(t)``), locating
a mask's entries (``nonzero``, boolean indexing, ``masked_select``), or sizing an output from
the data (``bincount``, ``unique``, ``repeat_interleave`` without ``output_size``) waits for
every queued kernel. :class:`SyncCounter` emulates ``torch.cuda.set_sync_debug_mode`` on the
CPU: a dispatch mode that records every such operator, plus the Python-level ways out of a
tensor (``.cpu()``, ``.tolist()``, ``.numpy()``). Every optimisation step of the trainer
(``engine._step``) is run inside it. The one exception it leaves alone is Adam's step counter:
with ``capturable=False`` (the default) torch keeps it on the host, so its ``.item()`` reads
host memory even when the parameters live on a GPU.
"""
from __future__ import annotations

import math
import traceback

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from vlr_lib import losses as L
from vlr_lib import registry
from vlr_lib.train import TrainingDivergedError, engine, fit, fit_end_to_end

from .toy import toy_features

aten = torch.ops.aten
#: Operators that wait for the device: a value read on the host, or an output shaped by the data.
SYNCING = {aten._local_scalar_dense, aten.nonzero, aten.masked_select, aten.bincount, aten._unique, aten._unique2,
           aten.unique_dim, aten.unique_consecutive, aten.is_nonzero, aten.equal, aten.allclose}


class SyncCounter(TorchDispatchMode):
    """Records (operator, caller) for every synchronising operation run while it is active."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket
        shaped_by_data = (packet is aten.repeat_interleave and kwargs.get("output_size") is None
                          and isinstance(args[0], torch.Tensor) and len(args) == 1)
        bool_index = packet is aten.index and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                                  for i in (args[1] if len(args) > 1 else []) if i is not None)
        if packet in SYNCING or shaped_by_data or bool_index:
            frames = traceback.extract_stack()[:-1]
            if not any("/torch/optim/" in f.filename for f in frames):  # Adam's host-side step counter
                caller = next((f for f in reversed(frames) if "/vlr_lib/" in f.filename), frames[-1])
                self.calls.append(f"{packet.__name__} at {caller.filename.rsplit('/', 1)[-1]}:{caller.lineno}")
        return func(*args, **kwargs)


@pytest.fixture
def counted_steps(monkeypatch):
    """Run every trainer step inside a SyncCounter; yields the list of per-step call lists."""
    per_step: list[list[str]] = []
    real = engine._step
    escapes = ("cpu", "tolist", "numpy")

    def counted(*args, **kwargs):
        counter = SyncCounter()
        originals = {name: getattr(torch.Tensor, name) for name in escapes}

        def escape(name):
            def read(self, *a, **k):
                counter.calls.append(f"Tensor.{name}")
                return originals[name](self, *a, **k)
            return read

        for name in escapes:
            monkeypatch.setattr(torch.Tensor, name, escape(name))
        try:
            with counter:
                return real(*args, **kwargs)
        finally:
            for name in escapes:
                monkeypatch.setattr(torch.Tensor, name, originals[name])
            per_step.append(counter.calls)

    monkeypatch.setattr(engine, "_step", counted)
    return per_step


@pytest.fixture(scope="module")
def feats():
    """40 images x 5 captions: batches of 20 captions repeat an image in most steps (the masked path)."""
    return toy_features(40, 5, 12)


def test_the_counter_sees_synchronisations():
    """The instrument can fail: a loss called directly checks its inputs and its result on the host."""
    S = torch.randn(6, 6)
    with SyncCounter() as counter:
        L.info_nce(S)
    assert any(c.startswith("_local_scalar_dense") for c in counter.calls)
    with SyncCounter() as counter:
        L.triplet_hardest(S, pos_mask=torch.eye(6, dtype=torch.bool))
    assert any(c.startswith("nonzero") for c in counter.calls)


@pytest.mark.parametrize("loss", [*registry.names(), "goal:cir,sig-ms", "goal:con,lin-ms", "goal:nca,sig"])
def test_no_step_synchronises(loss, feats, counted_steps):
    fit(*feats, loss, val=feats, epochs=2, batch_size=20, dim=8, progress=False, probe_batch=0, sampling="captions")
    assert len(counted_steps) == 2 * (200 // 20)
    assert all(calls == [] for calls in counted_steps), [c for c in counted_steps if c][0]


def test_the_masked_path_is_exercised(feats):
    """Most batches of 20 captions over 40 images repeat an image: their pos_mask comes from the host plan."""
    from vlr_lib.train.sampling import epoch_batches, epoch_positives

    batches = epoch_batches(feats[2], 40, 20, seed=0, epoch=0)
    plan = epoch_positives(feats[2], batches)
    assert sum(p is not None for p in plan) >= len(plan) // 2
    for pairs, batch in zip(plan, batches):
        ids = feats[2][batch]
        mask = ids[:, None] == ids[None, :]
        if pairs is None:
            assert int(mask.sum()) == 20
        else:
            assert [t.tolist() for t in pairs] == [t.tolist() for t in mask.nonzero(as_tuple=True)]
            assert [t.tolist() for t in pairs] == [t.tolist() for t in mask.T.nonzero(as_tuple=True)]


def test_topk_mining_is_the_documented_exception(feats, counted_steps):
    """k of topk sets a tensor shape: negative mining reads the counts of negatives and k on the host (at most 3
    reads per direction: sampled softmax runs both), and nothing else synchronises."""
    fit(*feats, "sampled_softmax", {"topk": 0.5}, epochs=1, batch_size=20, dim=8, progress=False, probe_batch=0)
    assert all(0 < len(calls) <= 6 and all(c.startswith("_local_scalar_dense at losses.py") for c in calls)
               for calls in counted_steps), counted_steps


def test_end_to_end_steps_do_not_synchronise(counted_steps):
    from vlr_lib.data import make_shapes

    dd = make_shapes(24, 8, 1, seed=0)
    fit_end_to_end(dd, "unified", epochs=1, batch_size=8, dim=8, width=4, progress=False, probe_batch=0)
    assert counted_steps and all(calls == [] for calls in counted_steps), [c for c in counted_steps if c][0]


def test_divergence_is_found_within_check_every_steps(monkeypatch, feats):
    """A NaN at step 2 of a long epoch: the run stops at the next look at the flags, naming step 2."""
    monkeypatch.setattr(engine, "CHECK_EVERY", 5)
    calls = {"n": 0}

    def breaks_at_step_2(S, pos_mask=None):
        calls["n"] += 1
        value = L.info_nce(S, pos_mask=pos_mask)
        return value * math.nan if calls["n"] == 2 else value

    with pytest.raises(TrainingDivergedError, match=r"the loss is NaN or inf at epoch 1, batch 2"):
        fit(*feats, breaks_at_step_2, epochs=1, batch_size=4, dim=8, progress=False, probe_batch=0)
    assert calls["n"] == 5, "stopped at the first look at the flags, not at the end of the 50-step epoch"


def test_nan_embeddings_are_named(feats):
    img, txt, c2i = feats
    heads = (torch.nn.Linear(12, 8), torch.nn.Linear(12, 8))
    with torch.no_grad():
        heads[0].weight.fill_(math.inf)
    with pytest.raises(TrainingDivergedError, match="the embeddings contain NaN or inf at epoch 1, batch 1"):
        fit(img, txt, c2i, "info_nce", head=heads, epochs=1, batch_size=20, progress=False, probe_batch=0)
