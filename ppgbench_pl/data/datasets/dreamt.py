"""DREAMT (PROTOCOL.md 1.3): BVP windows of one scored sleep stage each (non-finite, mixed, unscored, flat dropped)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ppgbench_pl.data.datasets.base import RawDataset, ppg_stats, sorted_files
from ppgbench_pl.data.processed import GroupData, as_class_target
from ppgbench_pl.data.signal import flatline_mask, resample
from ppgbench_pl.errors import ConfigError, DataError

SLEEP_5CLASS: dict[str, int] = {"W": 0, "N1": 1, "N2": 2, "N3": 3, "R": 4}
SLEEP_4CLASS: dict[str, int] = {"W": 0, "N1": 1, "N2": 1, "N3": 2, "R": 3}
SLEEP_3CLASS: dict[str, int] = {"W": 0, "N1": 1, "N2": 1, "N3": 1, "R": 2}
COLUMNS = ("BVP", "Sleep_Stage")


def read_subject_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """BVP (unparseable values as NaN) and trimmed stage strings of one participant (one-line DataError)."""
    try:
        frame = pd.read_csv(path, usecols=lambda column: column in COLUMNS, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: unreadable CSV ({' '.join(str(exc).split())})") from None
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    bvp = pd.to_numeric(frame["BVP"].fillna("").str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    stages = frame["Sleep_Stage"].fillna("").str.strip().to_numpy(dtype=object)
    return bvp, stages


class DreamtDataset(RawDataset):
    """Preprocessor for DREAMT (``dreamt``).

    Args:
        window_s: Window length and stride in seconds; 30 s, the scoring epoch, loses no window that
            straddles an epoch boundary as the published 10 s do (PROTOCOL.md section 10, item 9).
    """

    key: ClassVar[str] = "dreamt"
    marker_pattern: ClassVar[str] = "data_64Hz"
    uses_flatline: ClassVar[bool] = True

    def __init__(self, raw_root: str | Path, window_s: float = 10.0) -> None:
        super().__init__(raw_root)
        if not window_s > 0:
            raise ConfigError(f"dreamt window_s must be positive, got {window_s}")
        self.window_s = float(window_s)
        self.options = {"window_s": self.window_s, "stride_s": self.window_s}

    def units(self) -> list[Path]:
        """The participant CSVs ``data_64Hz/S<id>_whole_df.csv``, in participant number order."""
        def number(path: Path) -> tuple[int, str]:
            digits = re.sub(r"\D", "", path.name.split("_")[0])
            return int(digits) if digits else -1, path.name

        return sorted_files(self.raw_root / "data_64Hz", "*_whole_df.csv", number, "*_whole_df.csv")

    def process(self, path: Path, fs: float) -> GroupData | None:
        """Window, label and filter one participant; None when no window survives."""
        name = path.name.split("_")[0]
        bvp, stages = read_subject_csv(path)
        ppg = resample(bvp, self.info.native_fs, fs, what=str(path))
        window, ppg_starts, windows = self.cut(ppg, fs, self.window_s)
        codes, names = pd.factorize(pd.Series(stages, dtype=object))
        _, _, stage_windows = self.cut(codes, self.info.native_fs, self.window_s)
        n = min(len(ppg_starts), len(stage_windows))
        if n == 0:
            raise DataError(f"{path}: {len(bvp)} rows, less than one {self.window_s:g} s window")
        starts, windows, stage_windows = ppg_starts[:n], windows[:n], stage_windows[:n]

        finite = np.isfinite(windows).all(axis=1)
        one_stage = (stage_windows == stage_windows[:, :1]).all(axis=1)
        stage = np.array([names[c] if c >= 0 else "" for c in stage_windows[:, 0]], dtype=object)
        scored = np.array([s in SLEEP_5CLASS for s in stage], dtype=bool)
        keep = finite & one_stage & scored
        passed = np.flatnonzero(keep)
        keep[passed] = flatline_mask(windows[passed], self.flatline_fraction)
        dropped = {
            "non_finite": int((~finite).sum()),
            "stage_change": int((finite & ~one_stage).sum()),
            "no_sleep_stage": int((finite & one_stage & ~scored).sum()),
            "flat": int(len(passed) - keep.sum()),
        }
        idx = np.flatnonzero(keep)
        kept_stage = [str(s) for s in stage[idx]]
        labels = {f"sleep_{n}class": as_class_target([classes[s] for s in kept_stage])
                  for n, classes in ((5, SLEEP_5CLASS), (4, SLEEP_4CLASS), (3, SLEEP_3CLASS))}
        stats = ppg_stats(name, ppg[np.isfinite(ppg)])
        columns = {key: labels[key] for key in ("sleep_3class", "sleep_4class", "sleep_5class")}
        why = f"{path}: every window was rejected; subject left out"
        return self.windows_group(name, idx, (window, starts, windows), fs, labels, stats, dropped, why,
                                  sleep_stage=kept_stage, **columns)
