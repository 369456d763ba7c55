"""Write a tiny DREAMT raw tree: ``data_64Hz/S<id>_whole_df.csv`` with the export's columns.

Each subject has 155 s at 64 Hz (15 full 10 s windows and a 5 s tail). The stage of each window is
``WINDOW_STAGES``: preparation (``P``), a window that changes stage, ``Missing``, a stage padded with
spaces; window 10 has an unparseable BVP cell, and window 11 is flat. Run
``python -m tests.data.dreamt.make_data OUT`` to write one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

FS, WINDOW_S, DURATION_S = 64, 10, 155
WINDOW_STAGES: list[str] = [
    "P", "P", "P", "W", "W", "W", "W|N1", "N1", "N1", "N2", "N2", "N3", "R", "Missing", " R ",
]  # fmt: skip
NAN_AT_S, FLAT, FLAT_WINDOW = 105.0, (109.0, 121.0), 11
FIVE = {"W": 0, "N1": 1, "N2": 2, "N3": 3, "R": 4}


def stage_column(n_rows: int) -> list[str]:
    """Per-sample stage strings; ``A|B`` windows switch halfway; the tail repeats the last stage."""
    stages: list[str] = []
    half = WINDOW_S * FS // 2
    for label in WINDOW_STAGES:
        first, _, second = label.partition("|")
        stages += [first] * half + [second or first] * half
    return (stages + [WINDOW_STAGES[-1]] * n_rows)[:n_rows]


def make(root: Path, seed: int = 0, subjects: tuple[str, ...] = ("S002", "S003", "S010")) -> dict[str, Any]:
    """Write the subjects' CSVs under ``root/data_64Hz``.

    Returns:
        ``subjects`` (names in number order), ``n_windows``, ``kept`` (window indices) and
        ``sleep_5class`` (labels of the kept windows).
    """
    rng = np.random.default_rng(seed)
    folder = root / "data_64Hz"
    folder.mkdir(parents=True, exist_ok=True)
    n = DURATION_S * FS
    t = np.arange(n) / FS
    for name in subjects:
        bvp = 30 * np.sin(2 * np.pi * rng.uniform(0.9, 1.3) * t) + rng.normal(0, 4, n)
        bvp[(t >= FLAT[0]) & (t < FLAT[1])] = 1.25
        cells = [f"{v:.4f}" for v in bvp]
        cells[int(NAN_AT_S * FS)] = "n/a"
        frame = pd.DataFrame(
            {
                "TIMESTAMP": t,
                "BVP": cells,
                "ACC_X": rng.integers(-64, 64, n),
                "ACC_Y": rng.integers(-64, 64, n),
                "ACC_Z": rng.integers(-64, 64, n),
                "TEMP": 33.0,
                "EDA": 0.2,
                "HR": 70.0,
                "IBI": np.nan,
                "Sleep_Stage": stage_column(n),
                "Obstructive_Apnea": np.nan,
                "Central_Apnea": np.nan,
            }
        )
        frame.to_csv(folder / f"{name}_whole_df.csv", index=False)
    kept = [3, 4, 5, 7, 8, 9, 12, 14]
    return {
        "subjects": sorted(subjects, key=lambda s: int(s[1:])),
        "n_windows": len(WINDOW_STAGES),
        "kept": np.array(kept),
        "sleep_5class": np.array([FIVE[WINDOW_STAGES[i].strip()] for i in kept]),
    }


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "dreamt_fixture")
    info = make(out)
    print(f"wrote {len(info['subjects'])} subjects to {out}")
