"""Readers for the ECSMP raw formats (Empatica ``BVP.csv``, EEGLAB event structs, ``scale.xlsx``): one-line errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pandas as pd
import scipy.io

from ppgbench_pl.data.datasets.base import number
from ppgbench_pl.data.signal import raw_rate
from ppgbench_pl.errors import DataError

#: The six videos' emotions, in the fixed order of the felt-score columns (codes 101-106).
VIDEO_NAMES: tuple[str, ...] = ("neutral", "fear", "sad", "happy", "anger", "disgust")
#: CESAF columns (0-based): felt scores of video v at 5+6v..10+6v; stimulus names at 42..47.
CESAF_SCORES_AT, CESAF_STIMULI_AT, CESAF_HEADER_ROWS = 5, 42, 2
SDS_SCORE_AT, SDS_HEADER_ROWS = 25, 1


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def normalise_id(value: Any) -> str | None:
    """A 3-digit zero-padded subject id from a folder name, file-name part or sheet cell; None if not one."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return f"{int(value):03d}"
    if isinstance(value, float | np.floating):
        return f"{int(value):03d}" if np.isfinite(value) and float(value).is_integer() else None
    text = str(value).strip()
    return f"{int(text):03d}" if text.isdigit() else None


@dataclass(frozen=True)
class Cesaf:
    """One subject's CESAF row: stimulus names of videos 1-6 and their felt scores ``[video, emotion]``."""

    stimuli: list[str]
    scores: np.ndarray

    @property
    def complete(self) -> bool:
        """All six videos carry six numeric scores."""
        return bool(self.scores.shape == (6, 6) and np.isfinite(self.scores).all())


def read_bvp_csv(path: Path) -> tuple[float, int, np.ndarray]:
    """Start time (UTC s), integer sampling rate and samples of an Empatica ``BVP.csv`` (one-line DataError)."""
    try:
        column = pd.read_csv(path, header=None, usecols=[0], dtype=str).iloc[:, 0]
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: unreadable Empatica CSV ({_one_line(exc)})") from None
    values = pd.to_numeric(column.fillna("").str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    if len(values) < 2 or not np.isfinite(values[0]):
        raise DataError(f"{path}: lacks the start-time and sampling-rate lines of the Empatica format")
    rate = values[1]
    if not (np.isfinite(rate) and rate > 0 and abs(rate - round(rate)) < 1e-6):
        raise DataError(f"{path}: sampling rate '{column.iloc[1]}' on line 2 is not a positive integer")
    raw_rate(rate, f"{path}: line 2")
    samples = values[2:]
    bad = np.flatnonzero(~np.isfinite(samples))
    if len(bad):
        raise DataError(f"{path}: line {bad[0] + 3} ('{column.iloc[bad[0] + 2]}') is not a number")
    if len(samples) == 0:
        raise DataError(f"{path}: no samples after the two header lines")
    return float(values[0]), int(round(rate)), samples


def eeg_files(folder: Path) -> dict[str, Path]:
    """``<anything>_<id>.mat`` files by subject id (DataError: two files name the same subject)."""
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("*.mat")):
        sid = normalise_id(path.stem.rsplit("_", 1)[-1])
        if sid is None:
            continue
        if sid in found:
            raise DataError(f"{folder}: two EEG files for subject {sid} ({found[sid].name}, {path.name})")
        found[sid] = path
    return found


def _as_float(value: Any) -> float:
    """A single number (an event code, a rate); NaN for anything else (e.g. 'boundary'), which never matches."""
    array = np.asarray(value)
    try:
        return float(array.item()) if array.size == 1 else float("nan")
    except (TypeError, ValueError):  # float() strips white space itself, from text and bytes alike
        return float("nan")


def read_eeg_events(path: Path) -> tuple[float, np.ndarray, np.ndarray]:
    """EEG rate and the ``urevent`` codes and latencies (samples) of an EEGLAB ``EEG`` struct (one-line DataError)."""
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    if h5py.is_hdf5(path):  # MATLAB v7.3
        return _read_eeg_hdf5(path)
    try:
        contents = scipy.io.loadmat(path, squeeze_me=True, struct_as_record=False, variable_names=["EEG"])
    except Exception as exc:  # noqa: BLE001 - any parse failure of a raw file is a data error
        raise DataError(f"{path}: unreadable MATLAB file ({_one_line(exc)})") from None
    eeg = contents.get("EEG")
    if eeg is None or not hasattr(eeg, "srate") or not hasattr(eeg, "urevent"):
        raise DataError(f"{path}: no EEG struct with 'srate' and 'urevent'")
    events = np.atleast_1d(np.asarray(eeg.urevent, dtype=object))
    try:
        types = np.array([_as_float(event.type) for event in events], dtype=np.float64)
        latencies = np.array([float(np.asarray(event.latency).item()) for event in events], dtype=np.float64)
    except (AttributeError, TypeError, ValueError):
        raise DataError(f"{path}: EEG.urevent entries need numeric 'type' and 'latency'") from None
    return _checked_rate(eeg.srate, path), types, latencies


def _checked_rate(value: Any, path: Path) -> float:
    rate = _as_float(value)
    if not (np.isfinite(rate) and rate > 0):
        raise DataError(f"{path}: EEG.srate is not a positive number")
    return raw_rate(rate, f"{path}: EEG.srate")


def _read_eeg_hdf5(path: Path) -> tuple[float, np.ndarray, np.ndarray]:
    """The same fields from a MATLAB v7.3 file (struct-array fields are object references there)."""
    def field(file: h5py.File, dataset: Any) -> list[Any]:
        if h5py.check_dtype(ref=dataset.dtype) is None:
            return list(np.asarray(dataset).ravel())
        values: list[Any] = []
        for ref in np.asarray(dataset).ravel():
            target = file[ref]
            data = np.asarray(target)
            if target.attrs.get("MATLAB_class", b"") in (b"char", "char"):
                values.append("".join(chr(c) for c in data.ravel()))
            else:
                values.append(data.ravel()[0] if data.size else float("nan"))
        return values

    try:
        with h5py.File(path, "r") as file:
            eeg = file["EEG"]
            srate = np.asarray(eeg["srate"]).ravel()[0]
            types = np.array([_as_float(v) for v in field(file, eeg["urevent"]["type"])], dtype=np.float64)
            latencies = np.array(field(file, eeg["urevent"]["latency"]), dtype=np.float64)
    except (KeyError, OSError, TypeError, ValueError, IndexError) as exc:
        raise DataError(f"{path}: MATLAB v7.3 file without a readable EEG.srate/urevent ({_one_line(exc)})") from None
    if len(types) != len(latencies):
        raise DataError(f"{path}: EEG.urevent has {len(types)} types for {len(latencies)} latencies")
    return _checked_rate(srate, path), types, latencies


def _sheet(book: pd.ExcelFile, name: str, min_columns: int, path: Path) -> np.ndarray:
    if name not in book.sheet_names:
        raise DataError(f"{path}: no '{name}' sheet")
    frame = book.parse(name, header=None)
    if frame.shape[1] < min_columns:
        raise DataError(f"{path}: sheet '{name}' has {frame.shape[1]} columns, expected at least {min_columns}")
    return frame.to_numpy(dtype=object)


def read_scales(path: Path) -> tuple[dict[str, Cesaf], dict[str, float]]:
    """CESAF rows and SDS scores by subject id, the first row of an id winning, 000 ignored (one-line DataError)."""
    try:
        book = pd.ExcelFile(path, engine="openpyxl")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except Exception as exc:  # noqa: BLE001 - zip/xml errors of a corrupt workbook
        raise DataError(f"{path}: unreadable workbook ({_one_line(exc)})") from None
    with book:
        cesaf_rows = _sheet(book, "CESAF", CESAF_STIMULI_AT + 6, path)[CESAF_HEADER_ROWS:]
        sds_rows = _sheet(book, "SDS", SDS_SCORE_AT + 1, path)[SDS_HEADER_ROWS:]
    cesaf: dict[str, Cesaf] = {}
    for row in cesaf_rows:
        sid = normalise_id(row[0])
        if sid is None or sid == "000" or sid in cesaf:
            continue
        names = row[CESAF_STIMULI_AT : CESAF_STIMULI_AT + 6]
        stimuli = [name.strip().lower() if isinstance(name, str) else "" for name in names]
        block = row[CESAF_SCORES_AT : CESAF_SCORES_AT + 36]
        cesaf[sid] = Cesaf(stimuli, np.array([number(v) for v in block], dtype=np.float64).reshape(6, 6))
    sds: dict[str, float] = {}
    for row in sds_rows:
        sid = normalise_id(row[0])
        if sid is not None and sid != "000" and sid not in sds:
            sds[sid] = number(row[SDS_SCORE_AT])
    return cesaf, sds
