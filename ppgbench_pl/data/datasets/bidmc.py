"""BIDMC (PROTOCOL.md 1.7): PLETH in 10 s windows, labelled with the means of the ten 1 Hz RESP and SpO2 rows inside."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from ppgbench_pl.data.datasets.base import RawDataset, ppg_stats, read_csv, sorted_files
from ppgbench_pl.data.processed import GroupData, as_regression_target
from ppgbench_pl.data.signal import resample
from ppgbench_pl.errors import DataError

CSV_DIR = "bidmc_csv"
_SIGNALS = re.compile(r"bidmc_(\d{2})_Signals\.csv")
PLETH = "PLETH"
TIME = "Time [s]"
RESP = "RESP"
SPO2 = "SpO2"
#: Numerics rows (1 Hz) a 10 s window must hold.
ROWS_PER_WINDOW = 10


def read_columns(path: Path, columns: list[str]) -> pd.DataFrame:
    """Named numeric columns of a BIDMC CSV, text as NaN (DataError: bad file, no rows, a missing column)."""
    table = read_csv(path, columns, usecols=lambda c: str(c).strip() in columns)
    if table.empty:
        raise DataError(f"{path}: no data rows")
    return pd.DataFrame({c: pd.to_numeric(table[c], errors="coerce") for c in columns})


class BidmcDataset(RawDataset):
    """Preprocessor for BIDMC (``bidmc``); one group ``bidmc<NN>`` per record."""

    key: ClassVar[str] = "bidmc"
    marker_pattern: ClassVar[str] = CSV_DIR

    def units(self) -> list[Path]:
        """The ``bidmc_<NN>_Signals.csv`` files, in record order."""
        return sorted_files(self.raw_root / CSV_DIR, "bidmc_*_Signals.csv",
                            lambda p: _SIGNALS.fullmatch(p.name) and p.name, "bidmc_<NN>_Signals.csv")

    def process(self, signals: Path, fs: float) -> GroupData | None:
        """Window one record and label each window from the numerics rows inside it (None: no window kept)."""
        number = signals.name.split("_")[1]
        pleth = read_columns(signals, [PLETH])[PLETH].to_numpy(dtype=np.float64)
        labels = read_columns(signals.with_name(f"bidmc_{number}_Numerics.csv"), [TIME, RESP, SPO2])
        times, resp, spo2 = (labels[c].to_numpy(dtype=np.float64) for c in (TIME, RESP, SPO2))

        name = f"bidmc{number}"
        ppg = resample(pleth, self.info.native_fs, fs, what=str(signals))
        cut = _, starts, windows = self.cut(ppg, fs)
        keep: list[int] = []
        resp_mean: list[float] = []
        spo2_mean: list[float] = []
        dropped = {"label_rows_missing": 0, "non_finite": 0, "label_non_finite": 0}
        for i in range(len(starts)):
            begin = i * self.info.stride_s
            inside = (times >= begin) & (times < begin + self.info.window_s)
            if inside.sum() != ROWS_PER_WINDOW:
                dropped["label_rows_missing"] += 1
            elif not np.isfinite(windows[i]).all():
                dropped["non_finite"] += 1
            elif not (np.isfinite(resp[inside]).all() and np.isfinite(spo2[inside]).all()):
                dropped["label_non_finite"] += 1
            else:
                keep.append(i)
                resp_mean.append(float(resp[inside].mean()))
                spo2_mean.append(float(spo2[inside].mean()))
        targets = {"resp": as_regression_target(resp_mean), "spo2": as_regression_target(spo2_mean)}
        stats = ppg_stats(name, ppg[np.isfinite(ppg)])  # the finite samples: stats.json never holds null
        idx = np.asarray(keep, dtype=np.int64)
        why = f"{signals}: no window passed the label and finiteness checks; record left out"
        return self.windows_group(name, idx, cut, fs, targets, stats, dropped, why, resp=resp_mean, spo2=spo2_mean)
