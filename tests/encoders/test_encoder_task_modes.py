"""EncoderTask over every registered encoder: ``frozen`` never moves the encoder, ``finetune`` does.

Frozen means: after a real optimisation step of the head, every encoder parameter and BatchNorm buffer
is bit-identical and the encoder is still in eval mode although the task was put in train mode.
Finetune means: every parameter that got a gradient moved, and every BatchNorm layer that ran updated
its running statistics. Parameter-free controls must be refused by ``mode="finetune"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import Tensor, nn

from ppgbench_pl.encoders import ENCODERS
from ppgbench_pl.tasks.encoder_task import EncoderTask
from tests.encoders.test_registry import random_batch, ready

NAMES = list(ENCODERS)
BatchNorm = nn.modules.batchnorm._BatchNorm


def snapshot(module: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@contextmanager
def batchnorms_that_run(module: nn.Module) -> Iterator[set[str]]:
    """Names of the BatchNorm layers whose forward ran inside the block (some exist only for loading)."""
    ran: set[str] = set()
    handles = [
        sub.register_forward_hook(lambda *_, name=name: ran.add(name))
        for name, sub in module.named_modules() if isinstance(sub, BatchNorm)
    ]
    try:
        yield ran
    finally:
        for handle in handles:
            handle.remove()


def train_step(task: EncoderTask, batch: dict[str, Tensor]) -> None:
    """What Lightning's automatic optimisation does for one batch (train mode, loss, backward, step)."""
    optimizer = task.configure_optimizers()
    task.train()
    optimizer.zero_grad()
    task.compute_loss(task(batch), batch["y"]).backward()
    optimizer.step()


@pytest.mark.parametrize("name", NAMES)
def test_frozen_step_changes_nothing(name: str) -> None:
    encoder = ready(name)
    encoder.train()
    task = EncoderTask(encoder, mode="frozen", head=nn.Linear(encoder.embed_dim, 1), head_lr=0.1)
    assert not any(p.requires_grad for p in encoder.parameters()) and not encoder.training
    head_before, before = snapshot(task.head), snapshot(encoder)
    batch = random_batch(name)
    with batchnorms_that_run(encoder) as ran:
        train_step(task, batch)
    after = snapshot(encoder)
    assert task.training and not any(m.training for m in encoder.modules())
    assert [k for k in before if not torch.equal(before[k], after[k])] == []
    assert all(p.grad is None for p in encoder.parameters())
    assert any(not torch.equal(head_before[k], v) for k, v in task.head.state_dict().items())
    if any(isinstance(m, BatchNorm) for m in encoder.modules()):
        assert ran, "the BatchNorm layers should have run (in eval mode)"


@pytest.mark.parametrize("name", NAMES)
def test_finetune_step_changes_encoder(name: str) -> None:
    encoder = ready(name)
    if not encoder.trainable:
        with pytest.raises(ValueError, match="no trainable parameters"):
            EncoderTask(encoder, mode="finetune", head=nn.Linear(encoder.embed_dim, 1))
        return
    task = EncoderTask(encoder, mode="finetune", head=nn.Linear(encoder.embed_dim, 1), head_lr=1e-2,
                       encoder_lr_ratio=1.0)
    before = snapshot(encoder)
    with batchnorms_that_run(encoder) as ran:
        train_step(task, random_batch(name))
    after = snapshot(encoder)
    assert encoder.training
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    with_grad = {k for k, p in encoder.named_parameters() if p.grad is not None and p.grad.abs().max() > 1e-6}
    assert with_grad and with_grad <= changed
    for layer in ran:
        assert {f"{layer}.running_mean", f"{layer}.running_var"} <= changed, layer
        assert after[f"{layer}.num_batches_tracked"] == before[f"{layer}.num_batches_tracked"] + 1
    all_bn = {n for n, m in encoder.named_modules() if isinstance(m, BatchNorm)}
    for layer in all_bn - ran:  # BatchNorms kept only for strict loading do not move
        assert torch.equal(before[f"{layer}.running_mean"], after[f"{layer}.running_mean"]), layer
    encoder.zero_grad(set_to_none=True)


def test_finetune_freeze_stats_keeps_batchnorm_buffers() -> None:
    encoder = ready("small_cnn")
    task = EncoderTask(encoder, mode="finetune", head=nn.Linear(encoder.embed_dim, 1),
                       batchnorm_mode="freeze_stats")
    before = snapshot(encoder)
    train_step(task, random_batch("small_cnn"))
    after = snapshot(encoder)
    stats = [k for k in before if "running_" in k or "num_batches" in k]
    assert stats and all(torch.equal(before[k], after[k]) for k in stats)
    assert any(not torch.equal(before[k], after[k]) for k in before if k.endswith("weight"))
