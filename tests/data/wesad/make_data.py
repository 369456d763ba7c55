"""Write a tiny WESAD raw tree: ``S<k>/S<k>.pkl`` (Python-2 pickle) and ``S<k>/S<k>_quest.csv``.

Every subject has 125 s of 64 Hz wrist BVP (12 full 10 s windows and a 5 s tail) and 700 Hz condition
codes laid out per window as in ``WINDOW_CODES``: pure windows, a 95 % and an exact 90 % majority
(both pure), an 80 % one (impure), codes without a class, and a flat BVP stretch over window 9.
Run ``python -m tests.data.wesad.make_data OUT`` to write one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests.data.py2pickle import write_py2_pickle

FS, LABEL_FS, WINDOW_S, DURATION_S = 64, 700, 10, 125
#: Per 10 s window: (majority code, fraction, minority code).
WINDOW_CODES: list[tuple[int, float, int]] = [
    (0, 1.0, 0),
    (1, 1.0, 1),
    (1, 0.95, 2),
    (2, 1.0, 2),
    (2, 0.8, 3),
    (3, 1.0, 3),
    (4, 1.0, 4),
    (5, 1.0, 5),
    (4, 0.9, 0),
    (1, 1.0, 1),
    (6, 1.0, 6),
    (7, 1.0, 7),
]
FLAT = (89.0, 101.0)
FLAT_WINDOW = 9
ORDER = ["Base", "TSST", "Medi 1", "Fun", "Medi 2", "sRead", "fRead"]
DIMS = [(7.0, 3.0), (3.0, 7.0), (6.0, 2.0), (8.0, 5.0), (5.0, 1.0)]
#: What the questionnaire above gives per code (the two meditations averaged).
RATINGS = {1: (7.0, 3.0), 2: (3.0, 7.0), 3: (8.0, 5.0), 4: (5.5, 1.5)}


def quest_text(name: str, order: list[str] = ORDER, dims: list[tuple[float, float]] = DIMS) -> str:
    """A ``_quest.csv`` in the study's semicolon layout (only ORDER and DIM rows matter)."""
    width = 26
    rows = [
        ["# Subj", name],
        ["# ORDER", *order],
        ["# START", "7.08", "39.55", "70.19", "85.1", "100.2", "2.3", "5.1"],
        ["# END", "26.32", "50.3", "77.1", "90.2", "107.3", "3.3", "6.2"],
        [],
        ["# PANAS", *[str(v) for v in range(1, 25)]],
        ["# STAI", "1", "2", "3", "4", "1", "2"],
        *[["# DIM", f"{v:g}", f"{a:g}"] for v, a in dims],
        ["# SSSQ", "5", "4", "3"],
    ]
    return "\n".join(";".join(row + [""] * (width - len(row))) for row in rows) + "\n"


def expected_labels() -> dict[str, np.ndarray]:
    """Labels of all 12 windows before rejection."""
    code = np.array([c if frac >= 0.9 else -1 for c, frac, _ in WINDOW_CODES])
    four = {1: 0, 2: 1, 3: 2, 4: 3}
    valence = np.array([RATINGS.get(int(c), (np.nan, np.nan))[0] for c in code])
    arousal = np.array([RATINGS.get(int(c), (np.nan, np.nan))[1] for c in code])
    return {
        "condition_4class": np.array([four.get(int(c), -1) for c in code]),
        "condition_3class": np.array([four.get(int(c), -1) if c != 4 else -1 for c in code]),
        "valence_reg": valence,
        "arousal_reg": arousal,
        "valence_class": np.where(np.isnan(valence), -1, valence > 5),
        "arousal_class": np.where(np.isnan(arousal), -1, arousal > 5),
    }


def make(
    root: Path, seed: int = 0, subjects: tuple[int, ...] = (2, 3, 11), label_windows: int = 12
) -> dict[str, Any]:
    """Write the subjects' pickles and questionnaires under ``root``.

    Args:
        root: Folder to write into (created).
        seed: Seed of the random signals.
        subjects: Participant numbers.
        label_windows: Full 10 s windows covered by the 700 Hz label (12 matches the BVP).

    Returns:
        ``subjects`` (names in participant order), ``n_windows``, ``kept`` (window indices),
        ``labels`` (target -> all 12 windows' values), ``bvp`` (name -> raw 64 Hz BVP).
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    window = WINDOW_S * LABEL_FS
    position = np.arange(window)
    blocks = [np.where(position < round(frac * window), major, minor) for major, frac, minor in WINDOW_CODES]
    codes = np.concatenate([*blocks, np.zeros(5 * LABEL_FS)])
    wanted = label_windows * window + 5 * LABEL_FS
    codes = np.concatenate([codes, np.zeros(max(0, wanted - len(codes)))])[:wanted].astype(np.int32)
    t = np.arange(DURATION_S * FS) / FS
    names, raw = [], {}
    for k in subjects:
        name = f"S{k}"
        names.append(name)
        bvp = 60 * np.sin(2 * np.pi * rng.uniform(1.0, 1.5) * t) + rng.normal(0, 8, len(t))
        bvp[(t >= FLAT[0]) & (t < FLAT[1])] = -2.0
        raw[name] = bvp
        record = {
            "signal": {
                "chest": {"ECG": rng.normal(size=(70, 1)), "Resp": rng.normal(size=(70, 1))},
                "wrist": {
                    "ACC": rng.normal(size=(DURATION_S * 32, 3)),
                    "BVP": bvp.reshape(-1, 1),
                    "EDA": rng.uniform(0, 1, (DURATION_S * 4, 1)),
                    "TEMP": np.full((DURATION_S * 4, 1), 33.1),
                },
            },
            "label": codes,
            "subject": name,
        }
        write_py2_pickle(root / name / f"{name}.pkl", record)
        (root / name / f"{name}_quest.csv").write_text(quest_text(name))
    n_windows = len(WINDOW_CODES)
    return {
        "subjects": names,
        "n_windows": n_windows,
        "kept": np.setdiff1d(np.arange(n_windows), [FLAT_WINDOW]),
        "labels": expected_labels(),
        "bvp": raw,
    }


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "wesad_fixture")
    info = make(out)
    print(f"wrote {len(info['subjects'])} subjects to {out}")
