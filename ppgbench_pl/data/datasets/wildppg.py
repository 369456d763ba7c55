"""WildPPG (PROTOCOL.md 1.10): green-PPG 8 s windows labelled with HR from the sternum ECG (:mod:`.ecg_hr`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import h5py
import numpy as np
import scipy.io

from ppgbench_pl.data.datasets import ecg_hr
from ppgbench_pl.data.datasets.base import RawDataset, file_error, ppg_stats, sorted_files
from ppgbench_pl.data.processed import GroupData, as_regression_target
from ppgbench_pl.data.signal import integer_rate, raw_rate, resample
from ppgbench_pl.errors import DataError

logger = logging.getLogger(__name__)

_PREFIX = "WildPPG_Part_"
#: (struct, field) paths of the two signals used.
_PPG = ("wrist", "ppg_g")
_ECG = ("sternum", "ecg")


def _signals(get: Callable[[str], Any], path: Path) -> tuple[np.ndarray, float, np.ndarray, float]:
    """PPG and ECG with their rates, each ``<struct>/<field>/{v,fs}`` read by ``get`` (None: missing)."""
    out: list[Any] = []
    for where in (_PPG, _ECG):
        values, fs = (get("/".join((*where, leaf))) for leaf in ("v", "fs"))
        if values is None or fs is None:
            raise DataError(f"{path}: no '{'.'.join(where)}' struct with fields v and fs")
        out += [np.asarray(values, dtype=np.float64).ravel(), float(np.asarray(fs, dtype=np.float64).ravel()[0])]
    return out[0], out[1], out[2], out[3]


def _walk(node: Any, key: str) -> Any:
    """The value at ``a/b/c`` in nested dicts (a scipy-loaded file's structs), or None."""
    for name in key.split("/"):
        node = node.get(name) if isinstance(node, dict) else None
    return node


def read_participant(path: Path) -> tuple[np.ndarray, float, np.ndarray, float]:
    """Green PPG and sternum ECG of one participant file, each with its rate (one-line DataError)."""
    try:
        try:
            top = scipy.io.loadmat(path, simplify_cells=True, variable_names=[_PPG[0], _ECG[0]])
            ppg, ppg_fs, ecg, ecg_fs = _signals(lambda key: _walk(top, key), path)
        except NotImplementedError:  # MATLAB v7.3 is HDF5
            with h5py.File(path, "r") as handle:
                ppg, ppg_fs, ecg, ecg_fs = _signals(lambda key: handle[key][()] if key in handle else None, path)
    except DataError:
        raise
    except (ValueError, TypeError, OSError, KeyError, IndexError, scipy.io.matlab.MatReadError) as exc:
        raise file_error(path, "unreadable MATLAB file", exc) from None
    if len(ppg) == 0 or len(ecg) == 0:
        raise DataError(f"{path}: empty '{'.'.join(_PPG if len(ppg) == 0 else _ECG)}.v'")
    return ppg, ppg_fs, ecg, ecg_fs


class WildPPGDataset(RawDataset):
    """Preprocessor for WildPPG (``wildppg``); one group per participant file."""

    key: ClassVar[str] = "wildppg"
    marker_pattern: ClassVar[str] = f"{_PREFIX}*.mat"
    helper_modules: ClassVar[tuple[ModuleType, ...]] = (ecg_hr,)
    options = {"ppg_channel": "green", "hr_source": "sternum ecg"}

    def units(self) -> list[Path]:
        """The ``WildPPG_Part_<name>.mat`` files, in sorted order."""
        return sorted_files(self.raw_root, f"{_PREFIX}*.mat", lambda path: path, f"{_PREFIX}*.mat")

    def process(self, path: Path, fs: float) -> GroupData | None:
        """Window the green PPG, drop non-finite windows and label the rest with ECG HR (DataError: no such window)."""
        name = path.stem[len(_PREFIX) :]
        ppg_raw, ppg_fs, ecg, ecg_fs_raw = read_participant(path)
        native = integer_rate(ppg_fs, f"{path}: wrist.ppg_g.fs")
        ecg_fs = int(round(raw_rate(ecg_fs_raw, f"{path}: sternum.ecg.fs")))
        ppg = resample(ppg_raw, native, fs, what=str(path))
        cut = _, starts, windows = self.cut(ppg, fs)
        keep = np.flatnonzero(np.isfinite(windows).all(axis=1))
        if len(keep) == 0:
            raise DataError(f"{path}: no full {self.info.window_s:g} s window with finite PPG")
        n_bad_ecg = int((~np.isfinite(ecg)).sum())
        if n_bad_ecg:
            # PROTOCOL.md 1.10 has no rule for non-finite ECG: the published zero-phase filters run on
            # the whole ECG, so one such sample leaves every window without an HR label. Kept as
            # published (no interpolation); the windows are counted as no_hr_label in the marker.
            logger.warning("%s: %d of %d sternum.ecg samples are non-finite; its windows get no HR label",
                           path, n_bad_ecg, len(ecg))
        try:
            hr = ecg_hr.ecg_window_hr(ecg, ecg_fs, self.info.window_s, len(starts), self.info.stride_s)
        except ValueError as exc:
            raise file_error(path, "sternum.ecg cannot be R-peak labelled", exc) from None
        stats = ppg_stats(name, windows[keep], native_ppg_fs=ppg_fs, native_ecg_fs=ecg_fs_raw, ppg_channel="green")
        n_unlabelled = int(np.isnan(hr[keep]).sum())
        if n_unlabelled:
            logger.info("%s: %d of %d windows have no ECG heart rate", path, n_unlabelled, len(keep))
        # no_hr_label: windows kept with NaN hr (PROTOCOL.md 1.10 step 5), so left out of wildppg-hr
        dropped = {"non_finite": len(windows) - len(keep), "no_hr_label": n_unlabelled}
        return self.windows_group(name, keep, cut, fs, {"hr": as_regression_target(hr[keep])}, stats, dropped,
                                  hr=hr[keep])
