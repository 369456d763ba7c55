"""PPG-BP (PROTOCOL.md 1.6): each 2100-sample segment is one window, labelled from the participant's workbook row."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ppgbench_pl.data.datasets.base import RawDataset, file_error, ppg_stats
from ppgbench_pl.data.processed import GroupData, as_class_target, as_regression_target
from ppgbench_pl.data.signal import flatline_mask, resample
from ppgbench_pl.errors import DataError

logger = logging.getLogger(__name__)

WORKBOOK = "PPG-BP dataset.xlsx"
SEGMENT_DIR = "0_subject"
SEGMENTS = (1, 2, 3)
SEGMENT_SAMPLES = 2100
#: Label file -> workbook column of the float32 labels.
NUMERIC_COLUMNS: dict[str, str] = {
    "age": "Age(year)",
    "bmi": "BMI(kg/m^2)",
    "sysbp": "Systolic Blood Pressure(mmHg)",
    "diasbp": "Diastolic Blood Pressure(mmHg)",
    "hr": "Heart Rate(b/m)",
}
#: Label file -> workbook column of the "1 if the cell is non-empty" labels.
PRESENCE_COLUMNS: dict[str, str] = {
    "diabetes": "Diabetes",
    "cerebral_infarction": "cerebral infarction",
    "cerebrovascular_disease": "cerebrovascular disease",
}
HYPERTENSION_COLUMN = "Hypertension"
HYPERTENSION_CLASSES: dict[str, int] = {
    "Normal": 0,
    "Prehypertension": 1,
    "Stage 1 hypertension": 2,
    "Stage 2 hypertension": 3,
}
PUBLISHED_EXCLUDED: tuple[int, ...] = (231,)


def read_workbook(path: Path) -> pd.DataFrame:
    """The first worksheet's first 14 columns, header on row 2, empty rows dropped (DataError: a bad workbook)."""
    try:
        table = pd.read_excel(path, sheet_name=0, header=1, engine="openpyxl")
    except Exception as exc:  # openpyxl/zipfile raise many types for a damaged workbook
        raise file_error(path, "unreadable workbook", exc) from None
    table = table.iloc[:, :14]
    table.columns = [str(c).strip() for c in table.columns]
    needed = ["subject_ID", *NUMERIC_COLUMNS.values(), HYPERTENSION_COLUMN, *PRESENCE_COLUMNS.values()]
    missing = [c for c in needed if c not in table.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(repr(c) for c in missing)} in the header on row 2")
    table = table.dropna(how="all")
    ids = pd.to_numeric(table["subject_ID"], errors="coerce")
    bad = ids.isna() | (ids != ids.round())
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{path}: subject_ID {table['subject_ID'].iloc[row]!r} is not an integer")
    table = table.assign(subject_ID=ids.astype(np.int64))
    repeated = table["subject_ID"][table["subject_ID"].duplicated()]
    if len(repeated):
        raise DataError(f"{path}: subject_ID {repeated.iloc[0]} appears on more than one row")
    return table


def subject_labels(row: pd.Series, path: Path) -> dict[str, float | int]:
    """Per-subject labels from one workbook row (DataError: a non-number or unknown Hypertension value)."""
    subject = row["subject_ID"]
    labels: dict[str, float | int] = {}
    for name, column in NUMERIC_COLUMNS.items():
        value = pd.to_numeric(pd.Series([row[column]]), errors="coerce").iloc[0]
        if pd.isna(value) and not _is_empty(row[column]):
            raise DataError(f"{path}: subject {subject}: '{column}' value {row[column]!r} is not a number")
        labels[name] = float(value)
    stage = row[HYPERTENSION_COLUMN]
    if not isinstance(stage, str) or stage not in HYPERTENSION_CLASSES:
        raise DataError(
            f"{path}: subject {subject}: unknown Hypertension value {stage!r} "
            f"(expected one of {', '.join(HYPERTENSION_CLASSES)})"
        )
    labels["hypertension"] = HYPERTENSION_CLASSES[stage]
    labels["hypertension_binary"] = int(stage != "Normal")
    for name, column in PRESENCE_COLUMNS.items():
        labels[name] = int(not _is_empty(row[column]))
    return labels


def _is_empty(value: Any) -> bool:
    """A workbook cell is empty when pandas read it as missing (any text, even a space, is a value)."""
    return not isinstance(value, str) and bool(pd.isna(value))


def read_segment(path: Path) -> np.ndarray:
    """One segment file: a line of tab-separated numbers (a trailing tab tolerated, text as NaN)."""
    if not path.is_file():
        raise DataError(f"{path}: segment file not found")
    try:
        table = pd.read_csv(path, sep="\t", header=None, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return np.zeros(0)
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise file_error(path, "unreadable segment file", exc) from None
    fields = [f.strip() for f in table.to_numpy().ravel().tolist()]
    while fields and not fields[-1]:
        fields.pop()
    return pd.to_numeric(pd.Series(fields, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


class PPGBPDataset(RawDataset):
    """Preprocessor for PPG-BP (``ppgbp``); one group per participant.

    Args:
        exclude_subjects: Participants left out; the published protocol drops 231 without a stated reason
            (PROTOCOL.md section 10, item 11); ``()`` keeps every participant.
    """

    key: ClassVar[str] = "ppgbp"
    marker_pattern: ClassVar[str] = WORKBOOK
    uses_flatline: ClassVar[bool] = True

    def __init__(self, raw_root: str | Path, exclude_subjects: Sequence[int] = PUBLISHED_EXCLUDED) -> None:
        super().__init__(raw_root)
        self.exclude_subjects = tuple(sorted(int(s) for s in exclude_subjects))
        self.options = {"exclude_subjects": list(self.exclude_subjects)}

    def units(self) -> list[pd.Series]:
        """The workbook rows, in workbook order, less the excluded participants."""
        rows = read_workbook(self.raw_root / WORKBOOK).iterrows()
        return [row for _, row in rows if int(row["subject_ID"]) not in self.exclude_subjects]

    def process(self, row: pd.Series, fs: float) -> GroupData:
        """Resample, check and flat-line-filter one participant's segments and attach its labels."""
        subject = int(row["subject_ID"])
        labels = subject_labels(row, self.raw_root / WORKBOOK)
        valid: list[np.ndarray] = []
        kept_k: list[int] = []
        dropped = {"wrong_length": 0, "non_finite": 0}
        for k in SEGMENTS:
            path = self.raw_root / SEGMENT_DIR / f"{subject}_{k}.txt"
            samples = read_segment(path)
            if len(samples) != SEGMENT_SAMPLES:
                logger.info("%s: %d samples, not %d; segment dropped", path, len(samples), SEGMENT_SAMPLES)
                dropped["wrong_length"] += 1
                continue
            segment = resample(samples, self.info.native_fs, fs, what=str(path))
            if not np.isfinite(segment).all():
                logger.info("%s: non-finite samples; segment dropped", path)
                dropped["non_finite"] += 1
                continue
            valid.append(segment)
            kept_k.append(k)
        if not valid:
            raise DataError(f"{self.raw_root / SEGMENT_DIR}: subject {subject} has no valid segment file")
        segments = np.stack(valid)
        name = str(subject)
        keep = flatline_mask(segments, self.flatline_fraction)
        n = int(keep.sum())
        targets = {key: (as_regression_target if key in NUMERIC_COLUMNS else as_class_target)(np.full(n, value))
                   for key, value in labels.items()}
        kept = np.asarray(kept_k)[keep]
        metadata = pd.DataFrame({"subject": [name] * n, "segment": kept, "file": [f"{subject}_{k}.txt" for k in kept]})
        return GroupData(
            name=name,
            ppg=segments[keep],
            targets=targets,
            stats=ppg_stats(name, segments),  # the valid segments, before the flat-line rule
            metadata=metadata,
            dropped={**dropped, "flat": int((~keep).sum())},
        )
