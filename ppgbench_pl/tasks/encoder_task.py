"""The LightningModule around an encoder: ``frozen`` (embeddings only) or ``finetune`` (encoder + head)."""

from __future__ import annotations

from typing import Any, Literal

import lightning as L
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torchmetrics import MetricCollection

from ppgbench_pl.heads.metrics import HeadMetrics

BatchNormMode = Literal["train", "freeze_stats"]


class TrainingDiverged(FloatingPointError):
    """Training produced a non-finite loss or non-finite outputs."""


def set_batchnorm_eval(module: nn.Module) -> None:
    """Put every BatchNorm layer in eval mode (statistics fixed; affine parameters still learn)."""
    for sub in module.modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            sub.eval()


class EncoderTask(L.LightningModule):
    """Encoder + optional head, in ``frozen`` or ``finetune`` mode.

    Args:
        encoder: Any :class:`PPGEncoder` (or a user's module wrapped as one).
        mode: ``frozen``: parameters never change, eval mode always; ``finetune``: trained with the head.
        head: Prediction head for training (``None`` when only embeddings are wanted).
        loss: ``mse``, ``bce`` or ``ce``.
        head_lr: Learning rate of the head.
        encoder_lr_ratio: Encoder learning rate = ``head_lr * encoder_lr_ratio`` (finetune).
        head_weight_decay: AdamW weight decay of the head.
        encoder_weight_decay_ratio: Encoder weight decay = ``head_weight_decay * ratio``.
        batchnorm_mode: ``train`` updates encoder BatchNorm statistics; ``freeze_stats`` keeps them.
        class_weight: Per-class loss weights (``ce``) or ``[pos_weight]`` (``bce``).
    """

    def __init__(
        self,
        encoder: nn.Module,
        mode: Literal["frozen", "finetune"] = "frozen",
        head: nn.Module | None = None,
        loss: Literal["mse", "bce", "ce"] = "mse",
        head_lr: float = 1e-3,
        encoder_lr_ratio: float = 0.1,
        head_weight_decay: float = 0.0,
        encoder_weight_decay_ratio: float = 1.0,
        batchnorm_mode: BatchNormMode = "train",
        class_weight: list[float] | None = None,
    ) -> None:
        super().__init__()
        if mode not in ("frozen", "finetune"):
            raise ValueError(f"mode must be 'frozen' or 'finetune', got {mode!r}")
        if mode == "finetune" and not getattr(encoder, "trainable", True):
            raise ValueError(f"{getattr(encoder, 'name', type(encoder).__name__)} has no trainable parameters")
        self.encoder, self.head, self.mode = encoder, head, mode
        self.loss_name, self.batchnorm_mode = loss, batchnorm_mode
        self.head_lr, self.encoder_lr_ratio = head_lr, encoder_lr_ratio
        self.head_weight_decay, self.encoder_weight_decay_ratio = head_weight_decay, encoder_weight_decay_ratio
        self.register_buffer("class_weight", torch.tensor(class_weight) if class_weight else None, persistent=False)
        # Monitoring metrics on the device (torchmetrics); the test metrics stay scikit-learn's.
        self.train_metrics = self.val_metrics = None
        if head is not None:  # outputs: the ``out_features`` of the head's last linear layer
            linears = [m for m in head.modules() if isinstance(m, nn.Linear)]
            n_outputs = int(linears[-1].out_features) if linears else 1
            self.train_metrics = HeadMetrics(loss, n_outputs).clone(prefix="train/")
            self.val_metrics = HeadMetrics(loss, n_outputs).clone(prefix="val/")
        if mode == "frozen":
            self.encoder.requires_grad_(False)
            self.encoder.eval()

    def train(self, mode: bool = True) -> EncoderTask:
        """Lightning calls this every epoch; a frozen encoder stays in eval mode."""
        super().train(mode)
        if self.mode == "frozen":
            self.encoder.eval()
        elif mode and self.batchnorm_mode == "freeze_stats":
            set_batchnorm_eval(self.encoder)
        return self

    def on_train_epoch_start(self) -> None:
        """Apply the mode rules each epoch: Lightning restores captured module modes, never calls train()."""
        self.train(True)

    def embed(self, batch: dict[str, Tensor]) -> Tensor:
        """Embeddings of a batch: cached ``z`` as is, or raw windows through the encoder (its preprocessing)."""
        if "z" in batch:
            return batch["z"]
        with torch.set_grad_enabled(self.mode == "finetune" and torch.is_grad_enabled()):
            return self.encoder(batch["x"], batch.get("ppg_mean"), batch.get("ppg_std"))

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        """Head outputs (or embeddings when there is no head)."""
        z = self.embed(batch)
        return z if self.head is None else self.head(z)

    def compute_loss(self, out: Tensor, y: Tensor) -> Tensor:
        """MSE, BCE-with-logits (``pos_weight``) or weighted cross-entropy."""
        if self.loss_name == "mse":
            return F.mse_loss(out.reshape(y.shape), y.float())
        weight: Tensor | None = self.class_weight  # type: ignore[assignment]  # a registered buffer
        if self.loss_name == "bce":
            return F.binary_cross_entropy_with_logits(out.reshape(-1), y.float().reshape(-1), pos_weight=weight)
        return F.cross_entropy(out, y.long(), weight=weight)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        """One optimisation step on (window, label) pairs."""
        if self.head is None:
            raise RuntimeError("EncoderTask needs a head to train")
        out = self(batch)
        loss = self.compute_loss(out, batch["y"])
        if not torch.isfinite(loss.detach()):
            raise TrainingDiverged(f"non-finite training loss ({loss.item()}) at epoch {self.current_epoch + 1}")
        self._log_step("train", loss, out, batch["y"], self.train_metrics)
        return loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        """Validation loss, plus the batch outputs for callbacks that score the whole epoch (selection)."""
        out = self(batch)
        loss = self.compute_loss(out, batch["y"]) if self.head is not None else out.sum() * 0
        self._log_step("val", loss, out, batch["y"], self.val_metrics)
        return {"loss": loss, "outputs": out.detach().float()}

    def _log_step(self, stage: str, loss: Tensor, out: Tensor, y: Tensor, metrics: MetricCollection | None) -> None:
        """Log the loss, and update and log the stage's metrics (per epoch)."""
        self.log(f"{stage}/loss", loss, prog_bar=False, batch_size=len(y))
        if metrics is not None:
            metrics.update(out, y)
            self.log_dict(metrics, on_step=False, on_epoch=True, batch_size=len(y))

    def predict_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> Tensor:
        """Embeddings (no head) or head outputs, on the CPU."""
        return self(batch).detach().float().cpu()

    def configure_optimizers(self) -> Any:
        """AdamW with separate head and encoder groups; nothing to optimise for a frozen encoder alone."""
        groups = []
        if self.head is not None:
            groups.append({"params": self.head.parameters(), "lr": self.head_lr,
                           "weight_decay": self.head_weight_decay})
        if self.mode == "finetune":
            groups.append({
                "params": [p for p in self.encoder.parameters() if p.requires_grad],
                "lr": self.head_lr * self.encoder_lr_ratio,
                "weight_decay": self.head_weight_decay * self.encoder_weight_decay_ratio,
            })
        return torch.optim.AdamW(groups) if groups else None
