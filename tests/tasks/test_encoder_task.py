import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.regimes.base import frozen_parts_expected
from ppgbench_pl.tasks.encoder_task import EncoderTask, TrainingDiverged
from tests.regimes.neural_helpers import (
    one_thread,  # noqa: F401 - the autouse fixture
)

T = 128


def _batch(n: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(n, T, generator=g) * 3 + 1, "ppg_mean": torch.zeros(n), "ppg_std": torch.ones(n),
            "y": torch.randn(n, generator=g)}


def _snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _changed(before: dict[str, torch.Tensor], module: nn.Module) -> set[str]:
    return {k for k, v in module.state_dict().items() if not torch.equal(before[k], v)}


def _manual_step(task: EncoderTask, batch: dict[str, torch.Tensor]) -> None:
    optimizer = task.configure_optimizers()
    task.train()
    loss = task.compute_loss(task(batch), batch["y"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def _fit_one_epoch(task: EncoderTask) -> None:
    batch = _batch(16)
    loader = DataLoader(ArrayDataset(**{k: v.numpy() for k, v in batch.items()}), batch_size=8)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)
    with frozen_parts_expected():
        trainer.fit(task, train_dataloaders=loader)


def test_frozen_step_changes_nothing_in_the_encoder():
    encoder = SmallCNNEncoder(embed_dim=8)
    task = EncoderTask(encoder, mode="frozen", head=MLPHead(8, 1, 16), head_lr=0.1)
    before, head_before = _snapshot(encoder), _snapshot(task.head)
    _manual_step(task, _batch())
    assert not _changed(before, encoder) and not encoder.training
    assert not any(p.requires_grad for p in encoder.parameters())
    assert _changed(head_before, task.head)


def test_finetune_step_changes_parameters_and_batchnorm_buffers():
    encoder = SmallCNNEncoder(embed_dim=8)
    task = EncoderTask(encoder, mode="finetune", head=MLPHead(8, 1, 16), head_lr=0.1, encoder_lr_ratio=0.5)
    before = _snapshot(encoder)
    _manual_step(task, _batch())
    changed = _changed(before, encoder)
    assert {"features.0.weight", "features.1.weight", "features.1.running_mean", "features.1.num_batches_tracked"} <= changed
    groups = task.configure_optimizers().param_groups
    assert [g["lr"] for g in groups] == [0.1, 0.05]


@pytest.mark.parametrize("mode", ["train", "freeze_stats"])
def test_batchnorm_modes_under_a_lightning_fit(mode):
    encoder = SmallCNNEncoder(embed_dim=8)
    task = EncoderTask(encoder, mode="finetune", head=MLPHead(8, 1, 16), head_lr=0.05, batchnorm_mode=mode)
    before = _snapshot(encoder)
    _fit_one_epoch(task)
    changed = _changed(before, encoder)
    stats = {f"features.{i}.{b}" for i in (1, 4, 7) for b in ("running_mean", "running_var", "num_batches_tracked")}
    affine = {f"features.{i}.{p}" for i in (1, 4, 7) for p in ("weight", "bias")}
    assert affine <= changed  # BatchNorm affine parameters learn in both modes
    if mode == "train":
        assert stats <= changed
    else:
        assert not stats & changed


def test_cached_embeddings_skip_the_encoder():
    class Forbidden(nn.Module):
        def forward(self, *args):
            raise AssertionError("the encoder must not run on cached embeddings")

    task = EncoderTask(Forbidden(), mode="frozen", head=MLPHead(5, 3, 16), loss="ce", class_weight=[1.0, 2.0, 1.0])
    batch = {"z": torch.randn(4, 5), "y": torch.tensor([0, 1, 2, 1])}
    assert task(batch).shape == (4, 3)
    out = task.validation_step(batch, 0)
    assert out["outputs"].shape == (4, 3) and torch.isfinite(out["loss"])


def test_non_finite_loss_raises():
    task = EncoderTask(nn.Identity(), mode="frozen", head=MLPHead(5, 1, 16))
    batch = {"z": torch.randn(4, 5), "y": torch.tensor([1.0, float("nan"), 0.0, 1.0])}
    with pytest.raises(TrainingDiverged, match="non-finite training loss"):
        task.training_step(batch, 0)
