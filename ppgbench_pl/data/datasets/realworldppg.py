"""Real-World PPG (PROTOCOL.md 1.9): each workbook column is a one-window group, labelled with its participant."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import openpyxl
import pandas as pd
from openpyxl.utils import get_column_letter

from ppgbench_pl.data.datasets.base import RawDataset, file_error, ppg_stats
from ppgbench_pl.data.processed import GroupData, as_class_target
from ppgbench_pl.data.signal import resample
from ppgbench_pl.errors import ConfigError, DataError

SPLITS: tuple[tuple[str, str], ...] = (("train", "train8.xlsx"), ("test", "test8.xlsx"))
SHEET = "Sheet1"
SAMPLE_ROWS = 300  # Excel rows 1-300
SERIAL_ROW = 303
ID_ROW = 305


@dataclass(frozen=True)
class Record:
    """One usable column of a workbook."""

    split: str
    serial: int
    participant: int
    samples: np.ndarray
    column: str

    @property
    def name(self) -> str:
        """Group name ``<split>-<serial:04d>``."""
        return f"{self.split}-{self.serial:04d}"


def _number(value: Any) -> float:
    """A cell as a float: numbers as they are, numeric text parsed, anything else NaN (never missing)."""
    if isinstance(value, bool):
        return math.nan
    try:  # a number's str() gives it back exactly
        return float(str(value).strip())
    except ValueError:
        return math.nan


def read_columns(path: Path) -> list[tuple[str, list[Any]]]:
    """Absolute rows 1-305 of ``Sheet1``, as ``(column letter, cells)`` per column (one-line DataError)."""
    if not path.is_file():
        raise DataError(f"{path}: workbook not found")
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl/zipfile raise many types for a damaged workbook
        raise file_error(path, "unreadable workbook", exc) from None
    try:
        if SHEET not in book.sheetnames:
            raise DataError(f"{path}: no sheet '{SHEET}' (sheets: {', '.join(book.sheetnames)})")
        rows = [list(r) for r in book[SHEET].iter_rows(min_row=1, max_row=ID_ROW, values_only=True)]
    finally:
        book.close()
    rows += [[] for _ in range(ID_ROW - len(rows))]  # columns are padded with None to all 305 rows
    return [(get_column_letter(c + 1), list(cells)) for c, cells in enumerate(zip_longest(*rows))]


def read_records(path: Path, split: str) -> tuple[list[Record], dict[str, list[str]]]:
    """The usable records of one workbook, and the letters of the skipped columns per reason."""
    records: list[Record] = []
    skipped: dict[str, list[str]] = {}
    for letter, cells in read_columns(path):
        samples, serial, ident = cells[:SAMPLE_ROWS], cells[SERIAL_ROW - 1], cells[ID_ROW - 1]
        if all(v is None for v in cells):
            continue
        if ident is None or serial is None or any(v is None for v in samples):
            skipped.setdefault("missing_cell", []).append(letter)
            continue
        values = np.array([_number(v) for v in samples], dtype=np.float64)
        serial_f, ident_f = _number(serial), _number(ident)
        if not (np.isfinite(values).all() and math.isfinite(serial_f) and math.isfinite(ident_f)):
            skipped.setdefault("non_finite", []).append(letter)
            continue
        if not (serial_f.is_integer() and ident_f.is_integer()):
            raise DataError(f"{path}: column {letter}: serial {serial!r} or ID {ident!r} is not an integer")
        records.append(Record(split, int(serial_f), int(ident_f), values, letter))
    seen = Counter(r.serial for r in records)
    repeated = [r for r in records if seen[r.serial] > 1]
    if repeated:
        raise DataError(f"{path}: serial {repeated[0].serial} is used by more than one column")
    return records, skipped


class RealWorldPPGDataset(RawDataset):
    """Preprocessor for Real-World PPG (``realworldppg``); one group per record.

    Args:
        min_records_per_participant: Participants with fewer usable records are left out (published: 1).
            As many as the outer folds makes a class never seen in training unlikely (PROTOCOL.md 10.8).
    """

    key: ClassVar[str] = "realworldppg"
    marker_pattern: ClassVar[str] = "train8.xlsx"

    def __init__(self, raw_root: str | Path, min_records_per_participant: int = 1) -> None:
        super().__init__(raw_root)
        if min_records_per_participant < 1:
            raise ConfigError(f"min_records_per_participant must be >= 1, got {min_records_per_participant}")
        self.min_records_per_participant = int(min_records_per_participant)
        self.options = {"splits_pooled": [split for split, _ in SPLITS],
                        "min_records_per_participant": self.min_records_per_participant}

    def units(self) -> list[Record]:
        """The usable records, train8 first; skipped columns and rare participants' records noted in the marker."""
        records: list[Record] = []
        for split, name in SPLITS:
            found, skipped = read_records(self.raw_root / name, split)
            records += found
            if skipped:
                columns = "; ".join(f"{reason}: {', '.join(letters)}" for reason, letters in skipped.items())
                why = f"{self.raw_root / name}: columns skipped ({columns})"
                self.note_left_out(name, {reason: len(letters) for reason, letters in skipped.items()}, why)
        counts = Counter(r.participant for r in records)
        for record in records:
            if counts[record.participant] < self.min_records_per_participant:
                self.note_left_out(record.name, {"below_min_records_per_participant": 1})
        return [r for r in records if counts[r.participant] >= self.min_records_per_participant]

    def process(self, record: Record, fs: float) -> GroupData:
        """Resample one record and label it with its participant ID."""
        where = f"{record.split}8.xlsx column {record.column}"
        window = resample(record.samples, self.info.native_fs, fs, what=where)
        row = {"subject": record.name, "split": record.split, "column": record.column, "serial": record.serial,
               "participant_id": record.participant}
        return GroupData(
            name=record.name,
            ppg=window[None, :],
            targets={"id": as_class_target([record.participant])},
            stats=ppg_stats(record.name, window, split=record.split, serial=record.serial,
                            participant_id=record.participant),
            metadata=pd.DataFrame([row]),
        )
