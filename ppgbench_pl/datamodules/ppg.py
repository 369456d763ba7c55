"""The LightningDataModule that owns a dataset's windows and its subject-disjoint folds.

One datamodule serves a whole evaluation: it reads (or, for the synthetic dataset, generates) the
processed tree at each encoder's rate, builds task views, and hands out loaders for the job that is
currently selected with :meth:`PPGDataModule.select`: the outer-training part (or the 80 % holdout-fit
part for neural regimes), the 20 % validation groups, and the outer test fold. Loaders carry either raw
windows (``x``) or cached embeddings (``z``), plus labels and row indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from ppgbench_pl.data.processed import ProcessedDataset, dataset_dir
from ppgbench_pl.data.registry import TaskSpec, get_dataset, get_task, tasks_of
from ppgbench_pl.data.splits import holdout_groups, outer_group_folds
from ppgbench_pl.data.synthetic import SyntheticPPGDataset
from ppgbench_pl.data.task_data import DatasetWindows, TaskView, load_task, load_windows
from ppgbench_pl.errors import ConfigError, DataError

DEFAULT_SEEDS = [42, 43, 44, 45, 46]


class ArrayDataset(Dataset):
    """Rows of several equally long arrays, returned as a dict per index."""

    def __init__(self, **arrays: np.ndarray) -> None:
        lengths = {len(v) for v in arrays.values()}
        assert len(lengths) == 1, "arrays must have equal length"
        self.arrays = {k: torch.as_tensor(v) for k, v in arrays.items()}
        self.length = lengths.pop()

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {k: v[index] for k, v in self.arrays.items()}


@dataclass
class Selection:
    """The job the loaders currently serve."""

    fs: float
    task: TaskSpec | None = None
    seed: int | None = None
    fold: int | None = None
    embeddings: np.ndarray | None = None
    repeat: int | None = None
    train_positions: np.ndarray | None = None


class PPGDataModule(L.LightningDataModule):
    """Windows, tasks and nested subject-disjoint folds of one processed dataset.

    Args:
        dataset: Dataset key (``synthetic`` or one of the nine).
        root: Processed root holding ``fs_<rate>/<DisplayName>`` trees.
        tasks: Task names (default: every task of the dataset).
        seeds: Outer seeds.
        folds: Outer folds to run (of ``n_folds``).
        n_folds: Outer folds per seed.
        n_inner_folds: Inner folds for the linear and RF searches.
        batch_size: Loader batch size (embedding extraction and probes).
        num_workers: DataLoader workers (0 is fastest for in-memory arrays on small machines).
        synthetic_subjects: Subjects of the synthetic dataset.
        synthetic_windows: Windows per synthetic subject.
        synthetic_seed: Seed of the synthetic dataset.
    """

    def __init__(
        self,
        dataset: str = "synthetic",
        root: str = "data/processed",
        tasks: list[str] | None = None,
        seeds: list[int] | None = None,
        folds: list[int] | None = None,
        n_folds: int = 5,
        n_inner_folds: int = 4,
        batch_size: int = 256,
        num_workers: int = 0,
        synthetic_subjects: int = 30,
        synthetic_windows: int = 20,
        synthetic_seed: int = 0,
    ) -> None:
        super().__init__()
        self.info = get_dataset(dataset)
        self.dataset, self.root = dataset, Path(root)
        self.task_specs = [get_task(t) for t in tasks] if tasks else tasks_of(dataset)
        for spec in self.task_specs:
            if spec.dataset != dataset:
                raise ConfigError(f"task '{spec.name}' belongs to dataset '{spec.dataset}', not '{dataset}'")
        self.seeds = list(seeds) if seeds is not None else list(DEFAULT_SEEDS)
        self.n_folds, self.n_inner_folds = n_folds, n_inner_folds
        self.folds = list(folds) if folds is not None else list(range(n_folds))
        if not self.seeds or not self.folds:
            raise ConfigError("at least one seed and one fold are needed")
        bad = [f for f in self.folds if not 0 <= f < n_folds]
        if bad:
            raise ConfigError(f"folds {bad} out of range for n_folds={n_folds}")
        self.batch_size, self.num_workers = batch_size, num_workers
        self.synthetic = SyntheticPPGDataset(synthetic_subjects, synthetic_windows, seed=synthetic_seed)
        self._windows: dict[float, DatasetWindows] = {}
        self._views: dict[tuple[float, str], TaskView] = {}
        self.selection: Selection | None = None

    # -- data at a rate --------------------------------------------------------------------------
    def store(self, fs: float) -> ProcessedDataset:
        """The processed tree at ``fs``; the synthetic dataset is generated on first use."""
        if self.dataset == "synthetic":
            return ProcessedDataset(self.synthetic.build(self.root, fs))
        directory = dataset_dir(self.root, fs, self.info.display_name)
        if not directory.is_dir():
            raise DataError(
                f"{directory}: not found; run `ppgbench preprocess {self.dataset} --fs {fs:g} --output {self.root}`"
            )
        return ProcessedDataset(directory)

    def windows(self, fs: float) -> DatasetWindows:
        """All windows of the dataset at ``fs`` (read once)."""
        if fs not in self._windows:
            self._windows[fs] = load_windows(self.store(fs))
        return self._windows[fs]

    def task_view(self, fs: float, task: TaskSpec) -> TaskView:
        """Valid rows of one task at ``fs``; fewer than ``n_folds`` labelled groups is an error."""
        key = (fs, task.name)
        if key not in self._views:
            view = load_task(self.store(fs), self.windows(fs), task)
            n_groups = len(np.unique(view.groups))
            if n_groups < self.n_folds:
                raise ConfigError(
                    f"task '{task.name}' has {n_groups} groups with valid labels; "
                    f"subject-disjoint CV needs at least {self.n_folds}"
                )
            self._views[key] = view
        return self._views[key]

    def check(self, rates: list[float]) -> None:
        """Load every task view at every rate up front, so bad data fails before any job runs."""
        for fs in rates:
            for task in self.task_specs:
                self.task_view(fs, task)

    def outer_fold(self, view: TaskView, seed: int, fold: int) -> tuple[np.ndarray, np.ndarray]:
        """Positions (into the task view) of the outer-training part, in shuffled group order, and test fold."""
        train_groups, test_groups = outer_group_folds(view.all_groups, seed, self.dataset, self.n_folds)[fold]
        train = np.concatenate([np.flatnonzero(view.groups == g) for g in train_groups]).astype(np.int64)
        test = np.flatnonzero(np.isin(view.groups, test_groups))
        if len(test) == 0:
            raise DataError(f"task '{view.task.name}': outer test fold {fold} of seed {seed} has no labelled window")
        return train, test

    def holdout(self, view: TaskView, train: np.ndarray, seed: int, repeat: int) -> tuple[np.ndarray, np.ndarray]:
        """Split outer-training positions into the holdout-fit part and the validation groups."""
        _, val_groups = holdout_groups(list(view.groups[train]), seed, repeat)
        is_val = np.isin(view.groups[train], val_groups)
        return train[~is_val], train[is_val]

    # -- Lightning loaders for the selected job ----------------------------------------------------
    def select(self, fs: float, task: TaskSpec | None = None, seed: int | None = None, fold: int | None = None,
               embeddings: np.ndarray | None = None, repeat: int | None = None,
               train_positions: np.ndarray | None = None) -> None:
        """Choose what the loaders serve.

        Args:
            fs: Rate of the windows (the encoder's).
            task: Task to serve.
            seed: Outer seed.
            fold: Outer fold.
            embeddings: Cached embeddings of every window; loaders then carry ``z`` instead of ``x``.
            repeat: Holdout repeat for neural regimes (train = 80 % part, val = 20 % groups).
            train_positions: A subset of the outer-training positions to train on instead (e.g. the
                label-efficiency regime's fraction of subjects).
        """
        self.selection = Selection(fs, task, seed, fold, embeddings, repeat, train_positions)

    def _selected(self) -> Selection:
        if self.selection is None:
            raise RuntimeError("call PPGDataModule.select(...) before asking for loaders")
        return self.selection

    def _parts(self) -> dict[str, np.ndarray]:
        sel = self._selected()
        assert sel.task is not None and sel.seed is not None and sel.fold is not None
        view = self.task_view(sel.fs, sel.task)
        train, test = self.outer_fold(view, sel.seed, sel.fold)
        if sel.train_positions is not None:
            train = sel.train_positions
        if sel.repeat is None:
            return {"train": train, "test": test}
        fit, val = self.holdout(view, train, sel.seed, sel.repeat)
        return {"train": fit, "val": val, "test": test}

    def part_rows(self, part: str) -> tuple[TaskView, np.ndarray]:
        """The task view and the positions of one part (``train``/``val``/``test``) of the selected job."""
        sel = self._selected()
        assert sel.task is not None
        return self.task_view(sel.fs, sel.task), self._parts()[part]

    def _loader(self, part: str, shuffle: bool = False) -> DataLoader:
        sel = self._selected()
        view, positions = self.part_rows(part)
        rows = view.rows[positions]
        arrays: dict[str, np.ndarray] = {"y": view.y[positions], "index": positions}
        if sel.embeddings is not None:
            arrays["z"] = sel.embeddings[rows]
        else:
            win = self.windows(sel.fs)
            arrays.update(x=win.x[rows], ppg_mean=win.ppg_mean[rows], ppg_std=win.ppg_std[rows])
        return self._make_loader(ArrayDataset(**arrays), shuffle)

    def _make_loader(self, dataset: Dataset, shuffle: bool) -> DataLoader:
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=shuffle, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        """Outer-training rows (or the holdout-fit rows when a repeat is selected)."""
        return self._loader("train")

    def val_dataloader(self) -> DataLoader:
        """Validation-group rows of the holdout."""
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        """Outer test fold rows, in view order."""
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader:
        """Every window of the dataset at the selected rate: the embedding-extraction pass."""
        win = self.windows(self._selected().fs)
        dataset = ArrayDataset(x=win.x, ppg_mean=win.ppg_mean, ppg_std=win.ppg_std)
        return self._make_loader(dataset, shuffle=False)
