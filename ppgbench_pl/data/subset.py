"""A deterministic part of a processed tree: at most N subjects, at most M windows per subject.

A budget (``configs/budget/smoke.yaml``) caps the data of any dataset, real or synthetic, through the
datamodule options ``max_subjects`` and ``max_windows_per_subject``. The part is a pure function of the
tree and the two numbers, so every process, worker and rerun reads the same windows:

* subjects: the ``max_subjects`` groups whose names have the smallest SHA-256 (an order that does not
  follow recording order, site or ID numbering), then listed in the tree's sorted order;
* windows: ``max_windows_per_subject`` evenly spaced windows over each subject's recording (first and
  last included), so labels that change along a recording (activity, sleep stage) stay represented.

Targets are read in full, checked against the subject's full window count, then sliced like the windows.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.errors import ConfigError, DataError


def check_caps(max_subjects: int | None, max_windows_per_subject: int | None, n_folds: int) -> None:
    """The caps must leave a subject-disjoint CV possible, or a one-line refusal naming the setting."""
    if max_subjects is not None and max_subjects < n_folds:
        raise ConfigError(f"data.init_args.max_subjects={max_subjects}: subject-disjoint CV needs at least "
                          f"n_folds={n_folds} subjects")
    if max_windows_per_subject is not None and max_windows_per_subject < 1:
        raise ConfigError(f"data.init_args.max_windows_per_subject={max_windows_per_subject}: must be at least 1")


def chosen_subjects(groups: list[str], max_subjects: int | None) -> list[str]:
    """The kept groups (all when uncapped), in the order given."""
    if max_subjects is None or len(groups) <= max_subjects:
        return list(groups)
    ranked = sorted(groups, key=lambda g: (hashlib.sha256(g.encode()).hexdigest(), g))
    keep = set(ranked[:max_subjects])
    return [g for g in groups if g in keep]


def chosen_windows(n: int, max_windows: int | None) -> np.ndarray:
    """Indices of the kept windows of a subject with ``n`` windows (evenly spaced, ends included)."""
    if max_windows is None or n <= max_windows:
        return np.arange(n)
    if max_windows == 1:
        return np.array([0])
    return np.unique(np.round(np.linspace(0, n - 1, max_windows)).astype(np.int64))


class SubsetStore(ProcessedDataset):
    """A :class:`ProcessedDataset` that shows only the capped part of its tree (see module docstring).

    Args:
        directory: The processed tree.
        max_subjects: Keep at most this many groups (None: all).
        max_windows_per_subject: Keep at most this many windows per group (None: all).
    """

    def __init__(self, directory: str | Path, max_subjects: int | None = None,
                 max_windows_per_subject: int | None = None) -> None:
        super().__init__(directory)
        self.max_subjects, self.max_windows = max_subjects, max_windows_per_subject
        self._counts: dict[str, int] = {}

    @property
    def groups(self) -> list[str]:
        """The kept groups, sorted as the full tree's."""
        return chosen_subjects(super().groups, self.max_subjects)

    def _full_count(self, group: str) -> int:
        if group not in self._counts:
            path = self.directory / group / "ppg.npy"
            try:
                shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
            except (OSError, ValueError) as exc:
                raise DataError(f"{path}: unreadable .npy file ({exc})") from None
            self._counts[group] = 1 if len(shape) == 1 else int(shape[0])
        return self._counts[group]

    def ppg(self, group: str) -> np.ndarray:
        """The kept windows of one group."""
        windows = super().ppg(group)
        self._counts[group] = len(windows)
        return windows[chosen_windows(len(windows), self.max_windows)]

    def target(self, group: str, name: str, n_windows: int | None = None) -> np.ndarray:
        """The kept rows of one target array (checked against the group's full window count)."""
        full = self._full_count(group)
        values = super().target(group, name, n_windows=full)
        rows = chosen_windows(full, self.max_windows)
        if n_windows is not None and len(rows) != n_windows:
            raise DataError(f"{self.directory / group / name}.npy: {len(rows)} kept labels for {n_windows} windows")
        return values[rows]
