"""Tiny Real-World PPG raw data: ``train8.xlsx`` and ``test8.xlsx``, one record per ``Sheet1`` column.

Excel rows 1-300 hold 50 Hz samples, row 303 the serial and row 305 the participant ID; rows 301,
302 and 304 hold other numbers the reader must ignore. Some columns are unusable on purpose: a
missing sample, a missing ID, a text sample; test8 also has an empty column between records.
Run ``python tests/data/realworldppg/make_data.py <folder>`` to write it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from openpyxl import Workbook

FS = 50
N = 300
#: split -> list of (column, serial, participant ID or None, defect)
LAYOUT: dict[str, list[tuple[int, int, int | None, str]]] = {
    "train": [
        (1, 1, 11, ""),
        (2, 2, 12, ""),
        (3, 3, 11, "missing_sample"),
        (4, 4, None, ""),
        (5, 5, 13, "text"),
    ],
    "test": [(1, 1, 11, ""), (2, 7, 14, ""), (4, 8, 12, "")],
}


def _pulse(rng: np.random.Generator) -> np.ndarray:
    """A 6 s PPG record at 50 Hz around 0, with an individual heart rate."""
    t = np.arange(N) / FS
    phase = (t * rng.uniform(60, 90) / 60.0 + rng.uniform()) % 1.0
    return np.round(np.exp(-0.5 * ((phase - 0.25) / 0.08) ** 2) - 0.4 + 0.01 * rng.standard_normal(N), 6)


def write_workbook(
    path: Path, columns: list[tuple[int, int, int | None, str]], rng: np.random.Generator
) -> dict[int, np.ndarray]:
    """Write one workbook; return the samples of every column."""
    book = Workbook()
    sheet = book.active
    sheet.title = "Sheet1"
    written = {}
    for column, serial, ident, defect in columns:
        samples = _pulse(rng)
        cells: list[Any] = [float(v) for v in samples]
        if defect == "missing_sample":
            cells[149] = None
        if defect == "text":
            cells[9] = "abc"
        for row, value in enumerate(cells, start=1):
            sheet.cell(row=row, column=column, value=value)
        sheet.cell(row=301, column=column, value=-99)
        sheet.cell(row=302, column=column, value=123456)
        sheet.cell(row=303, column=column, value=serial)
        sheet.cell(row=304, column=column, value=-7)
        sheet.cell(row=305, column=column, value=ident)
        written[column] = samples
    book.save(path)
    return written


def make(root: Path, seed: int = 0) -> dict[str, Any]:
    """Write both workbooks under ``root``.

    Returns:
        ``groups``: ``{group name: (participant ID, samples)}`` of the usable records.
    """
    rng = np.random.default_rng(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    groups: dict[str, tuple[int, np.ndarray]] = {}
    for split, columns in LAYOUT.items():
        samples = write_workbook(root / f"{split}8.xlsx", columns, rng)
        for column, serial, ident, defect in columns:
            if ident is not None and not defect:
                groups[f"{split}-{serial:04d}"] = (ident, samples[column])
    return {"groups": groups}


if __name__ == "__main__":
    make(Path(sys.argv[1] if len(sys.argv) > 1 else "realworldppg_raw"))
