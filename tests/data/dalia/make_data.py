"""Write a tiny PPG-DaLiA raw tree: ``S<k>/S<k>.pkl`` Python-2 pickles in the real nested layout.

Each subject has ``duration_s`` of 64 Hz wrist BVP, activity at 4 Hz in three 20 s blocks (IDs 0, 1, 2,
so windows straddling a block edge are impure) and a flat stretch from 19 s to 33 s, which makes
windows 10-12 (20-28 s ... 24-32 s) flat. Run ``python -m tests.data.dalia.make_data OUT`` to write one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests.data.py2pickle import write_py2_pickle

FS, ACTIVITY_FS, WINDOW_S, STRIDE_S = 64, 4, 8, 2
FLAT = (19.0, 33.0)


def window_count(duration_s: float) -> int:
    """8 s / 2 s windows in a recording of that length."""
    return int((duration_s - WINDOW_S) // STRIDE_S) + 1


def make(
    root: Path,
    seed: int = 0,
    subjects: tuple[int, ...] = (1, 2, 10),
    duration_s: int = 60,
    extra_hr_labels: int = 0,
) -> dict[str, Any]:
    """Write the subjects' pickles under ``root`` and return what the tests should find.

    Args:
        root: Folder to write into (created).
        seed: Seed of the random signals and HR labels.
        subjects: Participant numbers.
        duration_s: Recording length of every subject.
        extra_hr_labels: Added to the number of HR labels (non-zero makes the counts disagree).

    Returns:
        ``subjects`` (names in participant order), ``n_windows``, ``impure`` and ``flat`` (window indices),
        ``kept`` (indices kept), ``hr`` (name -> all HR labels), ``activity`` (activity ID of every window).
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    n_windows = window_count(duration_s)
    t = np.arange(duration_s * FS) / FS
    activity = (np.arange(duration_s * ACTIVITY_FS) // (20 * ACTIVITY_FS)).astype(np.float64)
    starts = np.arange(n_windows) * STRIDE_S
    first, last = activity[starts * ACTIVITY_FS], activity[(starts + WINDOW_S) * ACTIVITY_FS - 1]
    impure = np.flatnonzero(first != last)
    flat = np.flatnonzero((starts >= FLAT[0]) & (starts + WINDOW_S <= FLAT[1]))
    kept = np.setdiff1d(np.arange(n_windows), np.union1d(impure, flat))
    hr_all: dict[str, np.ndarray] = {}
    names = []
    for k in subjects:
        name = f"S{k}"
        names.append(name)
        bvp = 40 * np.sin(2 * np.pi * rng.uniform(1.0, 1.6) * t) + rng.normal(0, 5, len(t))
        bvp[(t >= FLAT[0]) & (t < FLAT[1])] = 3.5
        hr = rng.uniform(60, 110, n_windows + extra_hr_labels)
        hr_all[name] = hr
        record = {
            "rpeaks": np.sort(rng.integers(0, duration_s * 700, 20)),
            "signal": {
                "chest": {"ECG": rng.normal(size=(70, 1)), "Resp": rng.normal(size=(70, 1))},
                "wrist": {
                    "ACC": rng.normal(size=(duration_s * 32, 3)),
                    "BVP": bvp.reshape(-1, 1),
                    "EDA": rng.uniform(0, 1, (duration_s * 4, 1)),
                    "TEMP": np.full((duration_s * 4, 1), 32.5),
                },
            },
            "label": hr,
            "activity": activity.reshape(-1, 1),
            "questionnaire": {"AGE": 30 + k, "Gender": " m", "WEIGHT": np.float64(70.5), "SKIN": 3},
            "subject": name,
        }
        write_py2_pickle(root / name / f"{name}.pkl", record)
    return {
        "subjects": names,
        "n_windows": n_windows,
        "impure": impure,
        "flat": flat,
        "kept": kept,
        "hr": hr_all,
        "activity": first.astype(np.int64),
    }


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "dalia_fixture")
    info = make(out)
    print(f"wrote {len(info['subjects'])} subjects to {out}")
