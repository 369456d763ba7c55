"""On-device torchmetrics of the LightningModules agree with the scikit-learn test metrics."""

import lightning as L
import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.ppg import ArrayDataset
from ppgbench_pl.heads.metrics import BalancedAccuracy, HeadMetrics
from ppgbench_pl.heads.mlp import MLPHead
from ppgbench_pl.metrics.scores import classification_metrics, regression_metrics
from ppgbench_pl.regimes.base import frozen_parts_expected
from ppgbench_pl.regimes.neural import Targets
from ppgbench_pl.tasks.encoder_task import EncoderTask


def _sklearn(loss, classes, out, y):
    targets = Targets("classification" if loss != "mse" else "regression", classes, loss, out.shape[1])
    pred = targets.predictions(out.numpy())
    if loss == "mse":
        return regression_metrics(y.numpy(), pred.values)
    return classification_metrics(classes[y.numpy()], pred)


@pytest.mark.parametrize("loss", ["mse", "bce", "ce"])
def test_torchmetrics_agree_with_the_scikit_learn_definitions(loss):
    g = torch.Generator().manual_seed(0)
    n = 101
    if loss == "mse":
        out, y, classes = torch.randn(n, 1, generator=g), torch.randn(n, generator=g) * 5, None
    elif loss == "bce":
        out, y, classes = (
            torch.randn(n, 1, generator=g),
            torch.randint(0, 2, (n,), generator=g),
            np.array([3, 8]),
        )
        out[:7] = 0.0  # p = 0.5 exactly: the positive class on both sides
    else:  # class 3 is predicted but never true: scikit-learn leaves it out of the mean recall
        out, y, classes = torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g), np.arange(4)
    metrics = HeadMetrics(loss, out.shape[1])
    for chunk in range(0, n, 32):  # batches, as in an epoch
        metrics.update(
            out[chunk : chunk + 32], y[chunk : chunk + 32].float() if loss != "ce" else y[chunk : chunk + 32]
        )
    got = {k: float(v) for k, v in metrics.compute().items()}
    want = _sklearn(loss, classes, out.double(), y)
    for name, value in got.items():
        assert value == pytest.approx(want[name], abs=1e-6), name


def test_balanced_accuracy_ignores_classes_absent_from_the_labels():
    metric = BalancedAccuracy(3)
    metric.update(torch.tensor([0, 2, 1, 1]), torch.tensor([0, 0, 1, 1]))
    assert float(metric.compute()) == pytest.approx(0.75)


def test_lightning_module_logs_device_metrics_each_epoch():
    x = np.random.default_rng(0).normal(size=(40, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    task = EncoderTask(nn.Identity(), head=MLPHead(5, 1, 8), loss="bce", head_lr=1e-2)
    loader = DataLoader(ArrayDataset(z=x, y=y), batch_size=16)
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    with frozen_parts_expected():
        trainer.fit(task, train_dataloaders=loader, val_dataloaders=loader)
    logged = trainer.callback_metrics
    assert {"train/auroc", "train/balanced_accuracy", "val/auroc", "val/balanced_accuracy"} <= set(logged)
    out = torch.cat(trainer.predict(task, DataLoader(ArrayDataset(z=x), batch_size=64)))
    want = _sklearn("bce", np.array([0, 1]), out.double(), torch.as_tensor(y).long())
    assert float(logged["val/auroc"]) == pytest.approx(want["auroc"], abs=1e-6)
    assert float(logged["val/balanced_accuracy"]) == pytest.approx(want["balanced_accuracy"], abs=1e-6)
