"""Tiny BIDMC raw data: ``bidmc_csv/bidmc_<NN>_Signals.csv`` (125 Hz) and ``_Numerics.csv`` (1 Hz).

Headers are padded as in the real files (``Time [s], RESP, PLETH, V, AVR, II``). Record 01 is
clean; record 02 lacks the numerics row at 15 s (window 1), has a NaN PLETH stretch in the middle of
window 2 and an empty SpO2 cell at 43 s (window 4); record 03's numerics stop after 30 s.
Run ``python tests/data/bidmc/make_data.py <folder>`` to write it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

FS = 125
DURATION_S = 65
SIGNAL_HEADER = ["Time [s]", " RESP", " PLETH", " V", " AVR", " II"]
NUMERIC_HEADER = ["Time [s]", " HR", " PULSE", " RESP", " SpO2"]


def _pleth(rng: np.random.Generator, n: int) -> np.ndarray:
    """A normalised PLETH-like pulse train (0-1 range) at about 80 bpm."""
    t = np.arange(n) / FS
    phase = (t * 80 / 60.0) % 1.0
    wave = np.exp(-0.5 * ((phase - 0.25) / 0.08) ** 2) + 0.3 * np.exp(-0.5 * ((phase - 0.55) / 0.1) ** 2)
    return np.round(0.3 + 0.5 * wave + 0.005 * rng.standard_normal(n), 5)


def write_record(
    folder: Path, number: str, rng: np.random.Generator, numerics_s: int, defects: bool
) -> dict[str, Any]:
    """Write one record's two CSV files and return its per-second RESP and SpO2 labels."""
    n = DURATION_S * FS
    pleth = _pleth(rng, n)
    if defects:
        mid = int(25 * FS)
        pleth[mid - 3 : mid + 3] = np.nan
    other = np.round(rng.standard_normal((n, 4)), 4)
    signals = pd.DataFrame(
        {
            SIGNAL_HEADER[0]: np.round(np.arange(n) / FS, 3),
            SIGNAL_HEADER[1]: other[:, 0],
            SIGNAL_HEADER[2]: pleth,
            SIGNAL_HEADER[3]: other[:, 1],
            SIGNAL_HEADER[4]: other[:, 2],
            SIGNAL_HEADER[5]: other[:, 3],
        }
    )
    signals.to_csv(folder / f"bidmc_{number}_Signals.csv", index=False, na_rep="NaN")
    seconds = np.arange(numerics_s)
    resp = np.round(14 + 4 * np.sin(seconds / 9.0), 1)
    spo2 = np.round(96 + 2 * np.cos(seconds / 7.0))
    numerics = pd.DataFrame(
        {
            NUMERIC_HEADER[0]: seconds,
            NUMERIC_HEADER[1]: np.full(numerics_s, 80),
            NUMERIC_HEADER[2]: np.full(numerics_s, 79),
            NUMERIC_HEADER[3]: resp,
            NUMERIC_HEADER[4]: spo2.astype(object),
        }
    )
    if defects:
        numerics.loc[43, NUMERIC_HEADER[4]] = ""
        numerics = numerics[numerics[NUMERIC_HEADER[0]] != 15]
    numerics.to_csv(folder / f"bidmc_{number}_Numerics.csv", index=False)
    return {"resp": resp, "spo2": spo2}


def expected_labels(per_second: np.ndarray, windows: list[int]) -> np.ndarray:
    """Mean of the ten 1 Hz values inside each kept 10 s window."""
    return np.array([per_second[10 * w : 10 * w + 10].mean() for w in windows])


def make(root: Path, seed: int = 0) -> dict[str, Any]:
    """Write the tiny dataset under ``root``.

    Returns:
        ``{group: {"windows": kept window indices, "resp": labels, "spo2": labels}}``.
    """
    rng = np.random.default_rng(seed)
    folder = Path(root) / "bidmc_csv"
    folder.mkdir(parents=True, exist_ok=True)
    plan = {
        "01": (DURATION_S, False, [0, 1, 2, 3, 4, 5]),
        "02": (DURATION_S, True, [0, 3, 5]),
        "03": (30, False, [0, 1, 2]),
    }
    expected: dict[str, Any] = {}
    for number, (numerics_s, defects, windows) in plan.items():
        labels = write_record(folder, number, rng, numerics_s, defects)
        expected[f"bidmc{number}"] = {
            "windows": windows,
            "resp": expected_labels(labels["resp"], windows),
            "spo2": expected_labels(labels["spo2"], windows),
        }
    return expected


if __name__ == "__main__":
    make(Path(sys.argv[1] if len(sys.argv) > 1 else "bidmc_raw"))
