"""Train your own LightningModule on one of ppgbench's subject-disjoint folds, with a plain Trainer.

``PPGDataModule.job(task, seed, fold)`` is a LightningDataModule serving exactly the rows the benchmark's
job (task, outer seed, outer fold) uses: the training loader the 20 % group holdout's fitting subjects, the
validation loader its held-out subjects, the test and predict loaders the outer test subjects. Score the
predictions with ppgbench's metrics and they compare with the benchmark's records for that job.

    python examples/train_on_ppgbench_folds.py --root data/processed --max_epochs 3
"""

from __future__ import annotations

import argparse

import lightning as L
import numpy as np
import torch
from torch import nn

from ppgbench_pl.datamodules import PPGDataModule
from ppgbench_pl.metrics.evaluate import evaluate
from ppgbench_pl.metrics.scores import Predictions


class HeartRateCNN(L.LightningModule):
    """A small 1-D CNN regressing the window's heart rate from the raw PPG (standardised targets)."""

    def __init__(self, y_mean: float, y_std: float, lr: float = 3e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Conv1d(1, 16, 9, stride=2), nn.GELU(), nn.Conv1d(16, 32, 9, stride=2), nn.GELU(),
                                 nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)
        return self.net(x.float().unsqueeze(1)).squeeze(-1)

    def _loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        target = (batch["y"].float() - self.hparams.y_mean) / self.hparams.y_std
        return nn.functional.mse_loss(self(batch["x"]), target)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self._loss(batch)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch), prog_bar=False)

    def predict_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self(batch["x"]) * self.hparams.y_std + self.hparams.y_mean

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="data/processed", help="processed root (synthetic trees are made there)")
    parser.add_argument("--seed", type=int, default=42, help="outer seed")
    parser.add_argument("--fold", type=int, default=0, help="outer fold")
    parser.add_argument("--max_epochs", type=int, default=3)
    args = parser.parse_args(argv)

    L.seed_everything(args.seed, verbose=False)
    data = PPGDataModule(dataset="synthetic", root=args.root, batch_size=64)
    job = data.job("synthetic-hr", seed=args.seed, fold=args.fold, fs=64)
    job.setup("fit")
    fit_rows = job.holdout()[0]
    y_fit = job.view.y[fit_rows]
    model = HeartRateCNN(float(np.mean(y_fit)), float(np.std(y_fit)) or 1.0)
    trainer = L.Trainer(max_epochs=args.max_epochs, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, datamodule=job)
    predicted = torch.cat(trainer.predict(model, datamodule=job)).numpy()  # type: ignore[arg-type]
    y_true, subjects = job.test_labels()
    scores = evaluate(job.task.kind, job.task.level, y_true, subjects, Predictions("regression", predicted), None)
    print(f"{job.task.name} seed {args.seed} fold {args.fold}: MAE {scores['mae']:.2f} {job.task.unit} on "
          f"{len(y_true)} test windows of {len(set(subjects.tolist()))} subjects")
    return scores


if __name__ == "__main__":
    main()
