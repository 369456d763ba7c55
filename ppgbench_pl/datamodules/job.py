"""One job's folds as a LightningDataModule: the one place regimes and users get the job's rows from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, StackDataset

from ppgbench_pl.data.registry import TaskSpec, get_task
from ppgbench_pl.data.splits import GroupHoldoutSplit, InnerGroupSplit, OuterSplit
from ppgbench_pl.data.task_data import TaskView
from ppgbench_pl.errors import ConfigError

if TYPE_CHECKING:
    from ppgbench_pl.datamodules.ppg import PPGDataModule


class ArrayDataset(StackDataset):
    """Rows of several equally long arrays, returned as a dict per index."""

    def __init__(self, **arrays: np.ndarray) -> None:
        super().__init__(**{k: torch.as_tensor(v) for k, v in arrays.items()})  # type: ignore[arg-type]


def holdout_positions(seed: int, repeat: int, groups: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fit, validation) positions: the neural regimes' 20 % group holdout of the positions ``train``."""
    fit, val = next(GroupHoldoutSplit(seed, repeat).split(None, groups=groups[train]))
    return train[fit], train[val]


def inner_fold_positions(seed: int, n_folds: int, groups: np.ndarray,
                         train: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(inner-train, inner-validation) positions of the grid searches, subject-disjoint within ``train``."""
    splitter = InnerGroupSplit(seed, n_folds)
    return [(train[a], train[b]) for a, b in splitter.split(None, groups=groups[train])]


class JobDataModule(L.LightningDataModule):
    """The rows of one (task, seed, outer fold) job of a :class:`PPGDataModule`.

    Args:
        source: The dataset's datamodule (windows, task views, outer folds).
        task: Task name or spec (a task of ``source``'s dataset).
        seed: Outer seed.
        fold: Outer fold of that seed.
        fs: Rate in Hz at which the windows are served (default: the dataset's native rate).
        repeat: Which 20 % group holdout of the outer-training subjects the fit/val loaders serve.
        embeddings: Embeddings of every window of the dataset at ``fs`` (rows as the processed tree); the
            loaders then serve ``z`` instead of raw windows.
        batch_size: Loader batch size (default: ``source.batch_size``).
    """

    def __init__(self, source: PPGDataModule, task: str | TaskSpec, seed: int, fold: int, fs: float | None = None,
                 repeat: int = 0, embeddings: np.ndarray | None = None, batch_size: int | None = None) -> None:
        super().__init__()
        self.source = source
        self.task = get_task(task) if isinstance(task, str) else task
        if self.task.dataset != source.dataset:
            raise ConfigError(f"task '{self.task.name}' belongs to dataset '{self.task.dataset}', not "
                              f"'{source.dataset}'")
        self.seed, self.fold, self.repeat = int(seed), int(fold), int(repeat)
        self.fs = float(source.info.native_fs if fs is None else fs)
        self.embeddings = embeddings
        self.batch_size = int(batch_size or source.batch_size)
        self._view: TaskView | None = None
        self._split: OuterSplit | None = None

    def setup(self, stage: str | None = None) -> None:
        """Build the task view and the outer split (once; every stage shares them)."""
        if self._view is None:
            self._view = self.source.task_view(self.fs, self.task)
            self._split = self.source.outer_split(self._view, self.seed, self.fold)

    @property
    def view(self) -> TaskView:
        """The task's valid rows at :attr:`fs` (built by :meth:`setup`)."""
        self.setup()
        assert self._view is not None
        return self._view

    @property
    def split(self) -> OuterSplit:
        """The outer fold: (train, test) positions into :attr:`view`."""
        self.setup()
        assert self._split is not None
        return self._split

    def holdout(self, repeat: int | None = None, train: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(fit, validation) positions: the neural regimes' 20 % group holdout of ``train`` (the outer training)."""
        train = self.split.train if train is None else train
        return holdout_positions(self.seed, self.repeat if repeat is None else repeat, self.view.groups, train)

    def arrays(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        """Loader columns of some positions of the view: ``y``, ``index`` and ``z`` or ``x`` with its stats."""
        view = self.view
        rows = view.rows[positions]
        out: dict[str, np.ndarray] = {"y": view.y[positions], "index": positions}
        if self.embeddings is not None:
            out["z"] = self.embeddings[rows]
        else:
            win = self.source.windows(self.fs)
            out.update(x=win.x[rows], ppg_mean=win.ppg_mean[rows], ppg_std=win.ppg_std[rows])
        return out

    def loader(self, positions: np.ndarray, shuffle: bool = False) -> DataLoader:
        """In-memory rows of some positions (no workers: the arrays are already in memory)."""
        return DataLoader(ArrayDataset(**self.arrays(positions)), batch_size=self.batch_size, shuffle=shuffle)

    def train_dataloader(self) -> DataLoader:
        """The holdout's fitting subjects, shuffled."""
        return self.loader(self.holdout()[0], shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """The holdout's validation subjects."""
        return self.loader(self.holdout()[1])

    def test_dataloader(self) -> DataLoader:
        """The outer test subjects, in view order (also the predict loader)."""
        return self.loader(self.split.test)

    predict_dataloader = test_dataloader

    def test_labels(self) -> tuple[np.ndarray, np.ndarray]:
        """(labels, subjects) of the outer test rows, to score predictions with :func:`ppgbench_pl.metrics.evaluate`."""
        test = self.split.test
        return self.view.y[test], self.view.groups[test]
