"""WESAD (PROTOCOL.md 1.4): 10 s BVP windows, condition labels where one code covers 90 %, SAM from the quest file."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import ClassVar

import numpy as np

from ppgbench_pl.data import safe_pickle
from ppgbench_pl.data.datasets import dalia
from ppgbench_pl.data.datasets.base import ppg_stats
from ppgbench_pl.data.processed import GroupData, as_class_target, as_regression_target
from ppgbench_pl.data.safe_pickle import load_pickle, lookup_vector
from ppgbench_pl.data.signal import flatline_mask, rejection_counts
from ppgbench_pl.errors import DataError

#: Condition code -> condition_4class (baseline, stress, amusement, meditation); others are invalid.
CONDITION_4CLASS: dict[int, int] = {1: 0, 2: 1, 3: 2, 4: 3}
#: condition_3class: the same without meditation (written, unused).
CONDITION_3CLASS: dict[int, int] = {1: 0, 2: 1, 3: 2}
#: ``# ORDER`` names -> condition code; other names (the reading tasks) are ignored.
QUEST_CODES: dict[str, int] = {"Base": 1, "TSST": 2, "Fun": 3, "Medi 1": 4, "Medi 2": 4}
#: The majority code must cover at least 9/10 of the label window.
PURITY_NUM, PURITY_DEN = 9, 10


def read_quest(path: Path) -> dict[int, tuple[float, float]]:
    """Valence and arousal per condition code from a ``_quest.csv`` file, two meditations averaged (DataError)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: questionnaire file not found") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    order: list[str] | None = None
    dims: list[tuple[float, float]] = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(";")]
        if cells[0] == "# ORDER":
            order = [cell for cell in cells[1:] if cell]
        elif cells[0] == "# DIM":
            try:
                dims.append((float(cells[1]), float(cells[2])))
            except (IndexError, ValueError):
                row = len(dims) + 1
                raise DataError(f"{path}: '# DIM' row {row} lacks valence and arousal numbers") from None
    if order is None:
        raise DataError(f"{path}: no '# ORDER' row")
    collected: dict[int, list[tuple[float, float]]] = {}
    for name, rating in zip(order, dims, strict=False):
        if name in QUEST_CODES:
            collected.setdefault(QUEST_CODES[name], []).append(rating)
    means = {code: np.mean(pairs, axis=0) for code, pairs in collected.items()}
    return {code: (float(mean[0]), float(mean[1])) for code, mean in means.items()}


def window_labels(code: np.ndarray, ratings: dict[int, tuple[float, float]]) -> dict[str, np.ndarray]:
    """Every target of the windows from their pure condition code (-1: none) and SAM ratings; missing: invalid."""
    valence = np.array([ratings.get(int(c), (np.nan, np.nan))[0] for c in code], dtype=np.float64)
    arousal = np.array([ratings.get(int(c), (np.nan, np.nan))[1] for c in code], dtype=np.float64)
    return {
        "condition_4class": as_class_target([CONDITION_4CLASS.get(int(c), -1) for c in code]),
        "condition_3class": as_class_target([CONDITION_3CLASS.get(int(c), -1) for c in code]),
        "valence_reg": as_regression_target(valence),
        "arousal_reg": as_regression_target(arousal),
        "valence_class": as_class_target(np.where(np.isnan(valence), -1, valence > 5)),
        "arousal_class": as_class_target(np.where(np.isnan(arousal), -1, arousal > 5)),
    }


class WesadDataset(dalia.E4Pickles):
    """Preprocessor for WESAD (``wesad``)."""

    key: ClassVar[str] = "wesad"
    marker_pattern: ClassVar[str] = "S2/S2.pkl"
    helper_modules: ClassVar[tuple[ModuleType, ...]] = (safe_pickle, dalia)
    label_fs: ClassVar[int] = 700

    def process(self, path: Path, fs: float) -> GroupData | None:
        """Window and label one participant; None (logged, counted) when every window is rejected."""
        data = load_pickle(path)
        bvp = lookup_vector(data, ("signal", "wrist", "BVP"), path)
        codes = dalia.integer_codes(lookup_vector(data, ("label",), path), path, "label", "condition codes")
        ratings = read_quest(path.with_name(f"{path.stem}_quest.csv"))
        good, cut = self.bvp_windows(path, bvp, fs)
        _, starts, windows = cut
        label_window, _, label_windows = self.cut(codes, self.label_fs)
        if len(label_windows) != len(starts):
            raise DataError(f"{path}: 'label' gives {len(label_windows)} windows at {self.label_fs} Hz "
                            f"for {len(starts)} PPG windows at {fs:g} Hz")
        present = np.unique(label_windows)  # per window the most frequent code (smallest on a tie) and its count
        counts = np.stack([(label_windows == code).sum(axis=1) for code in present], axis=1)
        best = counts.argmax(axis=1)
        majority, support = present[best], counts[np.arange(len(best)), best]
        pure = support * PURITY_DEN >= PURITY_NUM * label_window
        labels = window_labels(np.where(pure, majority, -1), ratings)

        not_flat = flatline_mask(windows, self.flatline_fraction)
        dropped = rejection_counts(windows, not_flat)
        idx = np.flatnonzero(not_flat)
        targets = {key: values[idx] for key, values in labels.items()}
        stats = ppg_stats(path.stem, good)  # the whole signal, less any NaN/inf samples
        shown = ("condition_4class", "condition_3class", "valence_reg", "arousal_reg")
        why = f"{path}: every window was rejected ({dropped}); subject left out"
        return self.windows_group(path.stem, idx, cut, fs, targets, stats, dropped, why, label_code=majority[idx],
                                  label_purity=support[idx] / label_window, **{key: targets[key] for key in shown})
