"""A deterministic part of a processed tree (a budget's caps): subjects stratified on labels, windows evenly spaced."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.errors import ConfigError, DataError

#: A task's labels as the subset stratifies on them: (target file, ``regression`` or a classification kind,
#: number of classes; 0 for regression).
Stratum = tuple[str, str, int]


def check_caps(max_subjects: int | None, max_windows_per_subject: int | None, n_folds: int) -> None:
    """The caps must leave a subject-disjoint CV possible, or a one-line refusal naming the setting."""
    if max_subjects is not None and max_subjects < n_folds:
        raise ConfigError(f"data.init_args.max_subjects={max_subjects}: subject-disjoint CV needs at least "
                          f"n_folds={n_folds} subjects")
    if max_windows_per_subject is not None and max_windows_per_subject < 1:
        raise ConfigError(f"data.init_args.max_windows_per_subject={max_windows_per_subject}: must be at least 1")


def _discrepancy(profiles: np.ndarray, chosen: list[int], scale: np.ndarray) -> float:
    """Per feature, the 1-Wasserstein distance of the chosen rows' values from the whole's, summed in spreads."""
    total = 0.0
    for f in range(profiles.shape[1]):
        whole, part = profiles[:, f], profiles[chosen, f]
        whole, part = np.sort(whole[np.isfinite(whole)]), np.sort(part[np.isfinite(part)])
        if len(whole) and len(part):
            levels = (np.arange(len(part)) + 0.5) / len(part)
            total += float(np.mean(np.abs(part - np.quantile(whole, levels)))) / scale[f]
    return total


def stratified_subjects(groups: list[str], max_subjects: int | None, profiles: np.ndarray | None) -> list[str]:
    """The kept groups, in the order given: added one at a time, each keeping the part's profiles closest to all.

    ``profiles``: one row of label features per group (per regression target its mean, per class its share;
    NaN: no label); None: by name hash only.
    """
    if max_subjects is None or len(groups) <= max_subjects:
        return list(groups)
    ranked = sorted(range(len(groups)), key=lambda i: (hashlib.sha256(groups[i].encode()).hexdigest(), groups[i]))
    if profiles is None or profiles.size == 0 or np.all(np.isnan(profiles)):
        keep = set(ranked[:max_subjects])
    else:
        with np.errstate(all="ignore"):
            spread = np.nan_to_num(np.nanstd(profiles, axis=0))
        scale = np.where(spread > 0, spread, 1.0)
        chosen: list[int] = []
        for _ in range(max_subjects):
            taken = set(chosen)
            left = [i for i in ranked if i not in taken]
            chosen.append(min(left, key=lambda i: _discrepancy(profiles, [*chosen, i], scale)))
        keep = set(chosen)
    return [g for i, g in enumerate(groups) if i in keep]


def chosen_windows(n: int, max_windows: int | None) -> np.ndarray:
    """Indices of the kept windows of a subject with ``n`` windows (evenly spaced, ends included)."""
    if max_windows is None or n <= max_windows:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max_windows)).astype(np.int64))


class SubsetStore(ProcessedDataset):
    """A :class:`ProcessedDataset` that shows only the capped part of its tree (None: no cap)."""

    def __init__(self, directory: str | Path, max_subjects: int | None = None,
                 max_windows_per_subject: int | None = None, strata: Sequence[Stratum] = ()) -> None:
        super().__init__(directory)
        self.max_subjects, self.max_windows = max_subjects, max_windows_per_subject
        self.strata = tuple(strata)
        self._counts: dict[str, int] = {}
        self._groups: list[str] | None = None

    @property
    def groups(self) -> list[str]:
        """The kept groups (stratified on the strata's labels), sorted as the full tree's."""
        if self._groups is None:
            every = super().groups
            needed = self.max_subjects is not None and len(every) > self.max_subjects and self.strata
            self._groups = stratified_subjects(every, self.max_subjects, self._profiles(every) if needed else None)
        return self._groups

    def _profiles(self, groups: list[str]) -> np.ndarray:
        """Per group, its label profile over the strata: mean of each regression target, share of each class."""
        rows: list[list[float]] = []
        for group in groups:
            full = self._full_count(group)
            kept = chosen_windows(full, self.max_windows)
            row: list[float] = []
            for target, kind, n_classes in self.strata:
                try:
                    values = np.asarray(super().target(group, target, n_windows=full), dtype=np.float64)[kept]
                except DataError:
                    values = np.full(len(kept), np.nan)
                if kind == "regression":
                    values = values.reshape(len(values), -1)
                    with np.errstate(all="ignore"):
                        row += list(np.nanmean(np.where(np.isfinite(values), values, np.nan), axis=0))
                else:
                    valid = values[values >= 0]
                    row += [float(np.mean(valid == c)) if len(valid) else np.nan for c in range(n_classes)]
            rows.append(row)
        return np.asarray(rows, dtype=np.float64)

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
