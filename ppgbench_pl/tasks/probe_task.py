"""The non-neural adapter: a LightningModule with no optimiser that gathers a fit-once probe's rows."""

from __future__ import annotations

from typing import Any

import lightning as L
import numpy as np
import torch
from torch import Tensor

from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.probes.threads import blas_threads

NO_REGIME = "give its Trainer a probe regime callback, e.g. callbacks=[LinearRegime()]"


class ProbeTask(L.LightningModule):
    """Fit-once wrapper of an estimator (``fit(X, y, groups)``, ``predict(X)``), fitted with ``blas_threads``.

    It gathers rows; a :class:`~ppgbench_pl.regimes.linear.ProbeRegime` callback on the same trainer fits and
    predicts in its hooks. Without one, fit and test refuse to end with rows nobody used.
    """

    trainer_arguments: dict[str, Any] = {
        "max_epochs": 1,
        "num_sanity_val_steps": 0,
        "limit_val_batches": 0,
        "enable_checkpointing": False,
        "logger": False,
        "enable_model_summary": False,
    }

    def __init__(self, estimator: Any, groups: np.ndarray | None = None, blas_threads: int | None = 1) -> None:
        super().__init__()
        self.estimator = estimator
        self.groups = groups
        self.blas_threads = blas_threads
        self.register_buffer("fitted", torch.tensor(False), persistent=False)
        #: Gathered ``(z, y, index)`` training batches and ``z`` test batches, in loader order.
        self.train_rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.test_rows: list[np.ndarray] = []
        self.predictions: Predictions | None = None

    def fit_arrays(self, z: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None,
                   folds: list[tuple[np.ndarray, np.ndarray]] | None = None) -> ProbeTask:
        """Fit the estimator on arrays as they are (``folds``: inner splits, row indices; ``groups``: self's)."""
        groups = self.groups if groups is None else groups
        with blas_threads(self.blas_threads):
            if folds is None:
                self.estimator.fit(z, y, groups)
            else:
                self.estimator.fit(z, y, groups, folds=folds)
        self.fitted.fill_(True)  # type: ignore[operator]
        return self

    def predict_arrays(self, z: np.ndarray) -> Predictions:
        """Predictions of the fitted estimator for rows ``z`` (also kept in :attr:`predictions`)."""
        if not bool(self.fitted):
            raise RuntimeError("ProbeTask.predict_arrays before fit_arrays: the estimator is not fitted")
        with blas_threads(self.blas_threads):
            self.predictions = self.estimator.predict(z)
        return self.predictions

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        """Gather the batch; there is nothing to optimise."""
        self.train_rows.append((batch["z"].cpu().numpy(), batch["y"].cpu().numpy(), batch["index"].cpu().numpy()))

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        """Gather test embeddings (in loader order)."""
        self.test_rows.append(batch["z"].cpu().numpy())

    def configure_optimizers(self) -> None:
        """No optimiser: the estimator is fitted in closed form or by its own solver."""
        return None

    def on_train_epoch_end(self) -> None:
        """Runs after the callbacks' hook: rows left here mean no probe regime fitted them."""
        if self.train_rows and not bool(self.fitted):
            raise RuntimeError(f"ProbeTask: nothing fitted the gathered rows; {NO_REGIME}")

    def on_test_epoch_end(self) -> None:
        """Runs after the callbacks' hook: rows left here mean no probe regime predicted them."""
        if self.test_rows:
            raise RuntimeError(f"ProbeTask: nothing predicted the gathered test rows; {NO_REGIME}")
