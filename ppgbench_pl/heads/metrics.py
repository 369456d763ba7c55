"""Monitoring metrics of a head's outputs on the device (torchmetrics), equal to :mod:`ppgbench_pl.metrics`'."""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection
from torchmetrics.classification import BinaryAUROC
from torchmetrics.regression import MeanAbsoluteError


class BalancedAccuracy(Metric):
    """scikit-learn's balanced accuracy (mean recall over the classes in the targets), on the device."""

    full_state_update = False
    higher_is_better = True
    confusion: Tensor

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.add_state(
            "confusion", default=torch.zeros(num_classes, num_classes, dtype=torch.long), dist_reduce_fx="sum"
        )

    def update(self, labels: Tensor, target: Tensor) -> None:
        """Add predicted and true class indices."""
        index = target.long().reshape(-1) * self.num_classes + labels.long().reshape(-1)
        self.confusion += torch.bincount(index, minlength=self.num_classes**2).view(self.num_classes, -1)

    def compute(self) -> Tensor:
        """Mean recall over the classes that occur in the targets."""
        support = self.confusion.sum(1)
        present = support > 0
        recall = self.confusion.diagonal().double()[present] / support[present].double()
        return recall.mean() if len(recall) else torch.tensor(float("nan"), device=support.device)


class HeadMetrics(MetricCollection):
    """The metrics of a loss: MAE (``mse``), AUROC + balanced accuracy (``bce``), balanced accuracy (``ce``)."""

    def __init__(self, loss: str, n_outputs: int) -> None:
        if loss == "mse":
            metrics: dict[str, Metric | MetricCollection] = {"mae": MeanAbsoluteError()}
        elif loss == "bce":
            metrics = {"auroc": BinaryAUROC(), "balanced_accuracy": BalancedAccuracy(2)}
        else:
            metrics = {"balanced_accuracy": BalancedAccuracy(n_outputs)}
        super().__init__(metrics)
        self.loss = loss

    def update(self, outputs: Tensor, target: Tensor) -> None:  # type: ignore[override]
        """Update every metric from raw outputs (logits or values) and loss targets."""
        outputs = outputs.detach().float()
        for name, metric in self.items(keep_base=True, copy_state=False):
            if self.loss == "mse":
                metric.update(outputs.reshape(target.shape), target.float())
            elif self.loss == "bce":
                logits = outputs.reshape(-1)
                if name.endswith("auroc"):
                    metric.update(torch.sigmoid(logits), target.long().reshape(-1))
                else:
                    metric.update((logits >= 0).long(), target.long().reshape(-1))  # p >= 0.5 is positive
            else:
                metric.update(outputs.argmax(-1), target.long())
