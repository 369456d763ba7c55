"""BUT PPG (PROTOCOL.md 1.8): each ``Quality == 1`` 300-sample WFDB record is one window, grouped by participant."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import wfdb

from ppgbench_pl.data.datasets.base import RawDataset, file_error, number, ppg_stats, read_csv
from ppgbench_pl.data.processed import GroupData, as_regression_target
from ppgbench_pl.data.signal import resample
from ppgbench_pl.errors import DataError

SUBJECT_INFO = "subject-info.csv"
QUALITY = "quality-hr-ann.csv"
RECORD_SAMPLES = 300
GREEN = "PPG_G"
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
BP_COLUMN = "Blood pressure [mmHg]"
SPO2_COLUMN = "SpO2 [%]"
GLYC_COLUMN = "Glycaemia [mmol/l]"
#: Label files, all float32: HR from the quality file, the rest from subject-info.csv.
LABELS = ("hr", "sbp", "dbp", "spo2", "glyc")


def read_table(path: Path, columns: list[str]) -> pd.DataFrame:
    """A UTF-8 CSV (BOM tolerated) as stripped text, the named columns required (one-line DataError)."""
    table = read_csv(path, columns, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    return table.apply(lambda col: col.str.strip())


def blood_pressure(text: str) -> tuple[float, float]:
    """SBP and DBP from text such as ``"128/85"``: the first two numbers, else both NaN."""
    numbers = _NUMBER.findall(text or "")
    return (float(numbers[0]), float(numbers[1])) if len(numbers) >= 2 else (np.nan, np.nan)


def good_records(path: Path) -> pd.DataFrame:
    """``ID`` and ``HR`` (float) of the quality file's ``Quality == 1`` rows; IDs must be 6 digits, once each."""
    table = read_table(path, ["ID", "Quality", "HR"])
    good = table[pd.to_numeric(table["Quality"], errors="coerce") == 1]
    bad = good.loc[~good["ID"].str.fullmatch(r"\d{6}"), "ID"]
    if len(bad):
        raise DataError(f"{path}: record ID {bad.iloc[0]!r} is not 6 digits")
    if good["ID"].duplicated().any():
        raise DataError(f"{path}: record ID {good['ID'][good['ID'].duplicated()].iloc[0]} is listed twice")
    return pd.DataFrame({"ID": good["ID"], "HR": pd.to_numeric(good["HR"], errors="coerce")})


def record_labels(path: Path) -> dict[str, dict[str, float]]:
    """``{record ID: {sbp, dbp, spo2, glyc}}`` from subject-info.csv (non-numbers become NaN)."""
    table = read_table(path, ["ID", BP_COLUMN, SPO2_COLUMN, GLYC_COLUMN])
    labels: dict[str, dict[str, float]] = {}
    columns = (table["ID"], table[BP_COLUMN], table[SPO2_COLUMN], table[GLYC_COLUMN])
    for record, pressure, spo2, glyc in zip(*columns, strict=True):
        sbp, dbp = blood_pressure(pressure)
        labels.setdefault(record, {"sbp": sbp, "dbp": dbp, "spo2": number(spo2), "glyc": number(glyc)})
    return labels


def read_record(folder: Path, record: str) -> np.ndarray:
    """The 300 PPG samples of ``<record>/<record>_PPG`` as float64 digital values (one-line DataError)."""
    base = folder / record / f"{record}_PPG"
    header = base.with_suffix(".hea")
    if not header.is_file():
        raise DataError(f"{header}: WFDB header not found")
    try:
        head = wfdb.rdheader(str(base))
    except Exception as exc:  # wfdb raises ValueError, OSError, IndexError, ... for a damaged header
        raise file_error(header, "unreadable WFDB record header", exc) from None
    names = [name for name in (getattr(head, "file_name", None) or []) if name]
    signals = base.parent / names[0] if names else base.with_suffix(".dat")
    if not signals.is_file():
        raise DataError(f"{signals}: WFDB signal file not found (named in {header.name})")
    try:
        rec = wfdb.rdrecord(str(base), physical=False)
    except Exception as exc:  # a short or damaged signal file
        raise file_error(signals, "unreadable WFDB record samples (truncated or damaged?)", exc) from None
    digital = np.asarray(rec.d_signal)
    if rec.sig_len == RECORD_SAMPLES:  # 300 samples x k signals: PPG_G, else signal 0
        names = list(rec.sig_name or [])
        values = digital[:, names.index(GREEN) if GREEN in names else 0]
    else:  # 300 signals x 1 sample, or whatever the header says: the file must hold 300 values
        values = digital.ravel()
    if values.size != RECORD_SAMPLES:
        raise DataError(
            f"{header}: {rec.n_sig} signal(s) x {rec.sig_len} sample(s) hold {digital.size} values, "
            f"not a {RECORD_SAMPLES}-sample PPG"
        )
    return values.astype(np.float64)


class ButPPGDataset(RawDataset):
    """Preprocessor for BUT PPG (``butppg``); one group per participant, one window per good record."""

    key: ClassVar[str] = "butppg"
    marker_pattern: ClassVar[str] = SUBJECT_INFO

    def iter_groups(self, fs: float) -> Iterator[GroupData]:
        """One group per participant with a ``Quality == 1`` record, in participant order."""
        quality = good_records(self.raw_root / QUALITY)
        labels = record_labels(self.raw_root / SUBJECT_INFO)
        if quality.empty:
            raise DataError(f"{self.raw_root / QUALITY}: no record with Quality == 1")
        quality = quality.assign(participant=quality["ID"].str[:3]).sort_values("ID")
        for participant, records in quality.groupby("participant", sort=True):
            yield self.process_participant(str(participant), records, labels, fs)

    def process_participant(
        self, participant: str, records: pd.DataFrame, labels: dict[str, dict[str, float]], fs: float
    ) -> GroupData:
        """Read, resample and label every good record of one participant (DataError: a bad record)."""
        windows: list[np.ndarray] = []
        rows: list[dict[str, Any]] = []
        for record, hr in zip(records["ID"], records["HR"], strict=True):
            samples = read_record(self.raw_root, record)
            window = resample(samples, self.info.native_fs, fs, what=str(self.raw_root / record))
            if not np.isfinite(window).all():
                raise DataError(f"{self.raw_root / record / f'{record}_PPG.dat'}: non-finite PPG sample")
            missing = dict.fromkeys(LABELS[1:], np.nan)
            windows.append(window)
            rows.append({"subject": participant, "record": record, "hr": hr, **labels.get(record, missing)})
        ppg = np.stack(windows)
        table = pd.DataFrame(rows)
        return GroupData(
            name=participant,
            ppg=ppg,
            targets={key: as_regression_target(table[key].to_numpy()) for key in LABELS},
            stats=ppg_stats(participant, ppg),
            metadata=table,
        )
