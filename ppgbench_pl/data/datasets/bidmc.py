"""BIDMC PPG and Respiration: ICU fingertip PLETH with 1 Hz respiratory rate and SpO2 labels.

PROTOCOL.md 1.7: each record's PLETH (125 Hz) is resampled as a whole and cut into 10 s / 10 s
windows; a window is kept only when exactly ten 1 Hz numerics rows fall inside it and every PPG, RESP
and SpO2 value in it is finite. Labels are the means of those rows. No flat-line rule. stats.json
holds the mean and std of the whole resampled PLETH (its finite samples).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ppgbench_pl.data.datasets.base import RawDataset, file_error, seconds_to_samples, window_table
from ppgbench_pl.data.processed import GroupData, as_regression_target
from ppgbench_pl.data.signal import make_windows, resample, window_starts
from ppgbench_pl.errors import DataError

logger = logging.getLogger(__name__)

CSV_DIR = "bidmc_csv"
_SIGNALS = re.compile(r"bidmc_(\d{2})_Signals\.csv")
PLETH = "PLETH"
TIME = "Time [s]"
RESP = "RESP"
SPO2 = "SpO2"
#: Numerics rows (1 Hz) a 10 s window must hold.
ROWS_PER_WINDOW = 10


def read_columns(path: Path, columns: list[str]) -> pd.DataFrame:
    """Named numeric columns of a BIDMC CSV (header names trimmed; text becomes NaN).

    Raises:
        DataError: Missing or unreadable file, no data rows, or a missing column.
    """
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        table = pd.read_csv(path, usecols=lambda c: str(c).strip() in columns)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise file_error(path, "unreadable CSV", exc) from None
    table.columns = [str(c).strip() for c in table.columns]
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(repr(c) for c in missing)}")
    if table.empty:
        raise DataError(f"{path}: no data rows")
    return pd.DataFrame({c: pd.to_numeric(table[c], errors="coerce") for c in columns})


class BidmcDataset(RawDataset):
    """Preprocessor for BIDMC (``bidmc``); one group ``bidmc<NN>`` per record."""

    key: ClassVar[str] = "bidmc"
    marker_pattern: ClassVar[str] = CSV_DIR

    def records(self) -> list[tuple[str, Path]]:
        """``(NN, Signals.csv path)`` for every record, in record order."""
        found = []
        for path in (self.raw_root / CSV_DIR).glob("bidmc_*_Signals.csv"):
            match = _SIGNALS.fullmatch(path.name)
            if match:
                found.append((match.group(1), path))
        return sorted(found)

    def iter_groups(self, fs: float) -> Iterator[GroupData]:
        """One group per record with at least one kept window."""
        records = self.records()
        if not records:
            raise DataError(f"{self.raw_root / CSV_DIR}: no bidmc_<NN>_Signals.csv files")
        for number, signals in records:
            group = self.process_record(number, signals, fs)
            if group is not None:
                yield group

    def process_record(self, number: str, signals: Path, fs: float) -> GroupData | None:
        """Window one record and label each window from the numerics rows inside it.

        Returns:
            The group, or None when no window passes the checks.

        Raises:
            DataError: Missing files or columns.
        """
        numerics = signals.with_name(f"bidmc_{number}_Numerics.csv")
        pleth = read_columns(signals, [PLETH])[PLETH].to_numpy(dtype=np.float64)
        labels = read_columns(numerics, [TIME, RESP, SPO2])
        times = labels[TIME].to_numpy(dtype=np.float64)
        resp = labels[RESP].to_numpy(dtype=np.float64)
        spo2 = labels[SPO2].to_numpy(dtype=np.float64)

        name = f"bidmc{number}"
        window = seconds_to_samples(self.info.window_s, fs)
        stride = seconds_to_samples(self.info.stride_s, fs)
        ppg = resample(pleth, self.info.native_fs, fs, what=str(signals))
        starts = window_starts(len(ppg), window, stride)
        windows = make_windows(ppg, window, stride)
        keep: list[int] = []
        resp_mean: list[float] = []
        spo2_mean: list[float] = []
        dropped = {"label_rows_missing": 0, "non_finite": 0, "label_non_finite": 0}
        for i in range(len(starts)):
            begin = i * self.info.stride_s
            inside = (times >= begin) & (times < begin + self.info.window_s)
            if inside.sum() != ROWS_PER_WINDOW:
                dropped["label_rows_missing"] += 1
                continue
            if not np.isfinite(windows[i]).all():
                dropped["non_finite"] += 1
                continue
            if not (np.isfinite(resp[inside]).all() and np.isfinite(spo2[inside]).all()):
                dropped["label_non_finite"] += 1
                continue
            keep.append(i)
            resp_mean.append(float(resp[inside].mean()))
            spo2_mean.append(float(spo2[inside].mean()))
        if not keep:
            logger.warning("%s: no window passed the label and finiteness checks; record left out", signals)
            self.note_left_out(name, dropped)
            return None
        idx = np.asarray(keep, dtype=np.int64)
        # The whole resampled PLETH, as published; non-finite samples (which the published mean turns
        # into NaN) are left out so stats.json never holds null.
        whole = ppg[np.isfinite(ppg)].astype(np.float64)
        metadata = window_table(name, idx, starts[idx], window, fs)
        metadata["resp"] = resp_mean
        metadata["spo2"] = spo2_mean
        return GroupData(
            name=name,
            ppg=windows[idx],
            targets={"resp": as_regression_target(resp_mean), "spo2": as_regression_target(spo2_mean)},
            stats={"subject": name, "ppg_mean": float(whole.mean()), "ppg_std": float(whole.std())},
            metadata=metadata,
            dropped=dropped,
        )
