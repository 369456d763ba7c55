"""The non-neural adapter: a LightningModule with no optimiser that fits a scikit-learn style estimator once.

The regimes call :meth:`ProbeTask.fit_arrays` / :meth:`ProbeTask.predict_arrays` directly; under a ``Trainer``
the training rows are gathered and fitted once when the epoch ends (settings: :attr:`trainer_arguments`).
"""

from __future__ import annotations

from typing import Any

import lightning as L
import numpy as np
import torch
from torch import Tensor

from ppgbench_pl.metrics.scores import Predictions
from ppgbench_pl.probes.threads import blas_threads


class ProbeTask(L.LightningModule):
    """Fit-once wrapper of a scikit-learn style estimator with ``fit(X, y, groups)``/``predict(X)``.

    Args:
        estimator: E.g. :class:`~ppgbench_pl.probes.search.GroupGridSearch` or any estimator whose
            ``predict`` returns :class:`~ppgbench_pl.metrics.scores.Predictions`.
        groups: Group name per training row index (batches carry row indices, not strings).
        blas_threads: BLAS threads while the estimator fits and predicts (default 1; ``None`` leaves the
            process's setting). Selections and predictions do not depend on it.

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
        self._train_rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._test_rows: list[np.ndarray] = []
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
        rows = (batch["z"].cpu().numpy(), batch["y"].cpu().numpy(), batch["index"].cpu().numpy())
        self._train_rows.append(rows)

    def on_train_epoch_end(self) -> None:
        """Fit the estimator once on everything gathered."""
        if bool(self.fitted):
            return
        z = np.concatenate([r[0] for r in self._train_rows])
        y = np.concatenate([r[1] for r in self._train_rows])
        index = np.concatenate([r[2] for r in self._train_rows])
        groups = self.groups[index] if self.groups is not None else index
        # a datamodule that owns inner folds (FoldDataModule) serves them: row indices into the gathered rows
        folds = getattr(getattr(self.trainer, "datamodule", None), "inner_folds", None) or None
        if folds is not None and not np.array_equal(index, np.arange(len(index))):
            raise RuntimeError("ProbeTask: inner folds need the training rows in their original order")
        self.fit_arrays(z.astype(np.float64), y, groups, folds=folds)
        self._train_rows.clear()

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        """Gather test embeddings (in loader order)."""
        self._test_rows.append(batch["z"].cpu().numpy())

    def on_test_epoch_end(self) -> None:
        """Predict all test rows with the fitted estimator."""
        if not bool(self.fitted):
            raise RuntimeError("ProbeTask.test before fit: the estimator has not been fitted")
        self.predict_arrays(np.concatenate(self._test_rows).astype(np.float64))
        self._test_rows.clear()

    def configure_optimizers(self) -> None:
        """No optimiser: the estimator is fitted in closed form or by its own solver."""
        return None
