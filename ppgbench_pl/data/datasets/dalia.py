"""PPG-DaLiA (PROTOCOL.md 1.2): 8 s / 2 s BVP windows with the pickle's HR and 4 Hz activity labels."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import numpy as np

from ppgbench_pl.data import safe_pickle
from ppgbench_pl.data.datasets.base import Cut, RawDataset, ppg_stats, sorted_files
from ppgbench_pl.data.processed import GroupData, as_class_target, as_regression_target
from ppgbench_pl.data.safe_pickle import load_pickle, lookup_vector
from ppgbench_pl.data.signal import finite_windows, flatline_mask, rejection_counts, resample_gaps
from ppgbench_pl.errors import DataError

_SUBJECT = re.compile(r"S(\d+)")
#: Stands in for a NaN code sample (activity, condition); no real code is negative, so it only makes impure.
MISSING_CODE = -999


def integer_codes(values: np.ndarray, path: Path, key: str, what: str) -> np.ndarray:
    """A pickle's code vector as int64, NaN as :data:`MISSING_CODE` (DataError: a non-integer code)."""
    finite = np.isfinite(values)
    if not np.all(values[finite] == np.round(values[finite])):
        raise DataError(f"{path}: '{key}' holds values that are not integer {what}")
    return np.where(finite, values, MISSING_CODE).astype(np.int64)


class E4Pickles(RawDataset):
    """DaLiA and WESAD: one Empatica E4 pickle ``S<k>/S<k>.pkl`` per participant, BVP at 64 Hz."""

    root_levels_up: ClassVar[int] = 2
    uses_flatline: ClassVar[bool] = True

    def units(self) -> list[Path]:
        """``S<k>/S<k>.pkl`` files under the root, sorted by participant number."""
        def number(path: Path) -> int | None:
            match = _SUBJECT.fullmatch(path.stem)
            return int(match.group(1)) if match and path.parent.name == path.stem else None

        return sorted_files(self.raw_root, "S*/S*.pkl", number, "S<k>/S<k>.pkl subject")

    def bvp_windows(self, path: Path, bvp: np.ndarray, fs: float) -> tuple[np.ndarray, Cut]:
        """The good resampled BVP samples and its :meth:`cut`; DataError below one window."""
        ppg, bad = resample_gaps(bvp, self.info.native_fs, fs, what=str(path))
        cut = self.cut(ppg, fs)
        if len(cut[1]) == 0:
            short = f"{len(bvp)} samples, less than one {self.info.window_s:g} s window"
            raise DataError(f"{path}: 'signal/wrist/BVP' has {short}")
        return ppg[~bad], cut


class DaliaDataset(E4Pickles):
    """Preprocessor for PPG-DaLiA (``dalia``).

    Args:
        transient_as_class: Published behaviour (True) keeps activity ID 0, the transient periods between
            activities, as a class; False marks it invalid (-1) for the activity task only (PROTOCOL.md 10.10).
    """

    key: ClassVar[str] = "dalia"
    marker_pattern: ClassVar[str] = "S1/S1.pkl"
    helper_modules: ClassVar[tuple[ModuleType, ...]] = (safe_pickle,)
    activity_fs: ClassVar[int] = 4

    def __init__(self, raw_root: str | Path, transient_as_class: bool = True) -> None:
        super().__init__(raw_root)
        self.transient_as_class = transient_as_class
        self.options = {"transient_as_class": transient_as_class}

    def process(self, path: Path, fs: float) -> GroupData | None:
        """Window, label and filter one participant; None when every window is rejected."""
        data = load_pickle(path)
        bvp = lookup_vector(data, ("signal", "wrist", "BVP"), path)
        hr = lookup_vector(data, ("label",), path)
        activity = lookup_vector(data, ("activity",), path)
        _, cut = self.bvp_windows(path, bvp, fs)
        _, starts, windows = cut
        n = len(starts)
        if len(hr) != n:
            raise DataError(f"{path}: 'label' has {len(hr)} heart rates for {n} PPG windows at {fs:g} Hz")
        _, _, act_windows = self.cut(integer_codes(activity, path, "activity", "activity IDs"), self.activity_fs)
        if len(act_windows) < n:  # windowed at 4 Hz with the PPG windows' start times
            raise DataError(f"{path}: 'activity' covers {len(act_windows)} windows at 4 Hz for {n} PPG windows")
        act_windows = act_windows[:n]

        constant = (act_windows == act_windows[:, :1]).all(axis=1)
        not_flat = flatline_mask(windows, self.flatline_fraction)
        keep = not_flat & constant
        dropped = rejection_counts(windows, not_flat, activity_change=~constant)
        activity_id = act_windows[:, 0].astype(np.int64)
        if not self.transient_as_class:
            activity_id = np.where(activity_id == 0, -1, activity_id)
        # every sample counted once per window holding it; windows with a bad sample are left out
        overlapping = windows[finite_windows(windows)].astype(np.float64)
        idx = np.flatnonzero(keep)
        targets = {"hr": as_regression_target(hr[idx]), "activity": as_class_target(activity_id[idx])}
        why = f"{path}: every window was rejected ({dropped}); subject left out"
        return self.windows_group(path.stem, idx, cut, fs, targets, ppg_stats(path.stem, overlapping), dropped, why,
                                  hr=hr[idx], activity=activity_id[idx])
