"""The LightningDataModule that owns a dataset's windows and subject-disjoint folds; :meth:`job`: one job's."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
from torch.utils.data import DataLoader

from ppgbench_pl.data.processed import ProcessedDataset, dataset_dir
from ppgbench_pl.data.registry import TaskSpec, get_dataset, get_task, tasks_of
from ppgbench_pl.data.splits import OuterGroupSplit, OuterSplit
from ppgbench_pl.data.subset import SubsetStore, check_caps
from ppgbench_pl.data.synthetic import SyntheticPPGDataset
from ppgbench_pl.data.task_data import DatasetWindows, TaskView, load_task, load_windows
from ppgbench_pl.datamodules.job import ArrayDataset, JobDataModule
from ppgbench_pl.errors import ConfigError, DataError, NotEvaluable
from ppgbench_pl.input_checks import int_list

DEFAULT_SEEDS = [42, 43, 44, 45, 46]
__all__ = ["DEFAULT_SEEDS", "ArrayDataset", "PPGDataModule"]  # ArrayDataset lives with the job loaders


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
        max_subjects: Read at most this many subjects of the tree (a budget cap, e.g. the smoke budget;
            deterministic, see :mod:`ppgbench_pl.data.subset`). None: all.
        max_windows_per_subject: Read at most this many evenly spaced windows per subject. None: all.
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
        max_subjects: int | None = None,
        max_windows_per_subject: int | None = None,
    ) -> None:
        super().__init__()
        self.info = get_dataset(dataset)
        self.dataset, self.root = dataset, Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"data.root {root}: is a file, not a folder of processed trees")
        self.task_specs = [get_task(t) for t in tasks] if tasks else tasks_of(dataset)
        for spec in self.task_specs:
            if spec.dataset != dataset:
                raise ConfigError(f"task '{spec.name}' belongs to dataset '{spec.dataset}', not '{dataset}'")
        self.seeds = int_list("data.init_args.seeds", seeds) if seeds is not None else list(DEFAULT_SEEDS)
        self.n_folds, self.n_inner_folds = n_folds, n_inner_folds
        self.folds = int_list("data.init_args.folds", folds) if folds is not None else list(range(n_folds))
        for key, values in (("seeds", self.seeds), ("folds", self.folds)):
            if not values:
                raise ConfigError(f"data.init_args.{key} is empty; give at least one (or leave it out for the default)")
            if len(set(values)) != len(values):
                raise ConfigError(f"data.init_args.{key} has duplicates: {values}")
        if n_folds < 2:
            raise ConfigError(f"n_folds must be at least 2 (subject-disjoint outer folds), got {n_folds}")
        if n_inner_folds < 2:
            raise ConfigError(f"n_inner_folds must be at least 2 (the linear and RF searches need an inner "
                              f"validation fold), got {n_inner_folds}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        if num_workers < 0:
            raise ConfigError(f"num_workers must be 0 or more, got {num_workers}")
        if synthetic_subjects < n_folds or synthetic_windows < 1:
            raise ConfigError(f"the synthetic dataset needs at least n_folds={n_folds} subjects and 1 window "
                              f"each, got {synthetic_subjects} x {synthetic_windows}")
        bad = [f for f in self.folds if not 0 <= f < n_folds]
        if bad:
            raise ConfigError(f"folds {bad} out of range for n_folds={n_folds}")
        check_caps(max_subjects, max_windows_per_subject, n_folds)
        self.max_subjects, self.max_windows_per_subject = max_subjects, max_windows_per_subject
        self.batch_size, self.num_workers = batch_size, num_workers
        self.synthetic = SyntheticPPGDataset(synthetic_subjects, synthetic_windows, seed=synthetic_seed)
        self._windows: dict[float, DatasetWindows] = {}
        self._views: dict[tuple[float, str], TaskView] = {}
        self._settings = {"n_folds": n_folds, "n_inner_folds": n_inner_folds, "batch_size": batch_size,
                          "root": str(root), "num_workers": num_workers,
                          "synthetic": [synthetic_subjects, synthetic_windows, synthetic_seed]}
        if max_subjects is not None or max_windows_per_subject is not None:  # uncapped runs keep their identity
            self._settings["caps"] = {"max_subjects": max_subjects, "max_windows_per_subject": max_windows_per_subject}

    def settings(self) -> dict[str, object]:
        """The settings of this datamodule beyond dataset, tasks, seeds and folds (for the run identity)."""
        return dict(self._settings)

    def store(self, fs: float) -> ProcessedDataset:
        """The processed tree at ``fs`` (its capped part under a budget); synthetic data is generated on first use."""
        if self.dataset == "synthetic":
            try:
                directory = self.synthetic.build(self.root, fs)
            except OSError as exc:  # a read-only or impossible root: one line, not a traceback
                raise DataError(f"data.root {self.root}: cannot write the synthetic trees there "
                                f"({exc.strerror or exc}); choose a writable folder") from None
        else:
            directory = dataset_dir(self.root, fs, self.info.display_name)
        if not directory.is_dir():
            raise DataError(
                f"{directory}: not found; run `ppgbench preprocess {self.dataset} --fs {fs:g} --output {self.root}`"
            )
        if self.max_subjects is None and self.max_windows_per_subject is None:
            return ProcessedDataset(directory)
        regression = ("regression", "regression_cls")  # the subset is stratified on the run's tasks' labels
        strata = [(t.target, "regression" if t.kind in regression else t.kind, 0 if t.kind in regression else
                   len(t.classes)) for t in self.task_specs if t.kind in regression or t.classes]
        return SubsetStore(directory, self.max_subjects, self.max_windows_per_subject, strata=strata)

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
                raise NotEvaluable(
                    f"task '{task.name}' has {n_groups} groups with valid labels; "
                    f"subject-disjoint CV needs at least {self.n_folds}"
                )
            self._views[key] = view
        return self._views[key]

    def outer_split(self, view: TaskView, seed: int, fold: int) -> OuterSplit:
        """The outer fold ``fold`` of ``seed`` (positions into the task view), by :class:`OuterGroupSplit`."""
        splitter = OuterGroupSplit(self.dataset, seed, self.n_folds, all_groups=view.all_groups)
        for i, (train, test) in enumerate(splitter.split(None, groups=view.groups)):
            if i == fold:
                if len(test) == 0:
                    raise DataError(f"task '{view.task.name}': outer test fold {fold} of seed {seed} "
                                    "has no labelled window")
                return OuterSplit(train, test)
        raise ConfigError(f"fold {fold} out of range for n_folds={self.n_folds}")

    def job(self, task: str | TaskSpec, seed: int, fold: int, fs: float | None = None, repeat: int = 0,
            embeddings: np.ndarray | None = None) -> JobDataModule:
        """The datamodule of one job, with the benchmark's splits: ``trainer.fit(model, datamodule=dm.job(...))``."""
        return JobDataModule(self, task, seed, fold, fs=fs, repeat=repeat, embeddings=embeddings)

    def windows_loader(self, fs: float) -> DataLoader:
        """Every window of the dataset at ``fs``: the embedding-extraction pass."""
        win = self.windows(fs)
        dataset = ArrayDataset(x=win.x, ppg_mean=win.ppg_mean, ppg_std=win.ppg_std)
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0)
