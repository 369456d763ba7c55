"""One outer fold of one job, served to a fit-once probe through Lightning's loaders.

The training loader serves the outer-training embeddings as one batch (the probe fits once when the epoch
ends, with the inner folds built in :meth:`FoldDataModule.setup`); the test loader serves the outer test rows.
"""

from __future__ import annotations

import lightning as L
import numpy as np
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.job import inner_fold_positions
from ppgbench_pl.datamodules.ppg import ArrayDataset


class FoldDataModule(L.LightningDataModule):
    """The outer-training and outer-test rows of one job, and the inner folds of its grid search.

    Args:
        z_train: Outer-training embeddings (``y_train`` their labels, ``groups_train`` their subjects).
        z_test: Outer-test embeddings.
        seed: The outer seed (seeds the inner folds, as in every regime).
        n_inner_folds: Inner folds of the grid search (4 published).

    Attributes:
        inner_folds: After :meth:`setup`, (inner-train, inner-validation) row indices into ``z_train``.
    """

    def __init__(self, z_train: np.ndarray, y_train: np.ndarray, groups_train: np.ndarray, z_test: np.ndarray,
                 seed: int, n_inner_folds: int = 4) -> None:
        super().__init__()
        self.z_train, self.y_train, self.groups_train, self.z_test = z_train, y_train, groups_train, z_test
        self.seed, self.n_inner_folds = seed, n_inner_folds
        self.inner_folds: list[tuple[np.ndarray, np.ndarray]] = []

    def setup(self, stage: str) -> None:
        """Build the inner group folds of the outer-training rows (once)."""
        if not self.inner_folds:
            every = np.arange(len(self.groups_train))
            self.inner_folds = inner_fold_positions(self.seed, self.n_inner_folds, self.groups_train, every)

    def train_dataloader(self) -> DataLoader:
        """All outer-training rows as one batch: ``z``, ``y`` and ``index`` (row numbers)."""
        rows = ArrayDataset(z=self.z_train, y=self.y_train, index=np.arange(len(self.y_train)))
        return DataLoader(rows, batch_size=None, sampler=[slice(None)])

    def test_dataloader(self) -> DataLoader:
        """All outer-test rows as one batch: ``z``."""
        return DataLoader(ArrayDataset(z=self.z_test), batch_size=None, sampler=[slice(None)])
