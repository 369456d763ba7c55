"""One job's outer fold served to a fit-once probe: the training rows as one batch, then the test rows."""

from __future__ import annotations

import lightning as L
import numpy as np
from torch.utils.data import DataLoader

from ppgbench_pl.datamodules.job import ArrayDataset, inner_fold_positions


class FoldDataModule(L.LightningDataModule):
    """One job's outer-training and outer-test rows; :meth:`setup` builds its seeded ``inner_folds``."""

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
