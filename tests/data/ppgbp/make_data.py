"""Tiny PPG-BP raw data: ``PPG-BP dataset.xlsx`` plus ``0_subject/<id>_<k>.txt`` segment files.

The workbook has the real shape (title row, header on row 2, 14 columns); each segment file is one
line of 2100 tab-separated integers at 1000 Hz. Subject 3 has a too-short and a NaN segment, subject
6 a flat (all-zero) segment and trailing tabs, and subject 231 is present so its exclusion shows.
Run ``python tests/data/ppgbp/make_data.py <folder>`` to write it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from openpyxl import Workbook

HEADER = [
    "Num.",
    "subject_ID",
    "Sex(M/F)",
    "Age(year)",
    "Height(cm)",
    "Weight(kg)",
    "Systolic Blood Pressure(mmHg)",
    "Diastolic Blood Pressure(mmHg)",
    "Heart Rate(b/m)",
    "BMI(kg/m^2)",
    "Hypertension",
    "Diabetes",
    "cerebral infarction",
    "cerebrovascular disease",
]
#: subject: (age, sbp, dbp, hr, bmi, hypertension, diabetes, cerebral infarction, cerebrovascular disease)
SUBJECTS: dict[int, tuple[Any, ...]] = {
    2: (45, 118, 76, 70, 22.5, "Normal", None, None, None),
    3: (61, 132, 84, 66, 27.1, "Prehypertension", "Type 2 Diabetes", None, None),
    6: (70, 151, 92, 81, 24.0, "Stage 1 hypertension", None, "cerebral infarction", None),
    231: (58, 168, 101, 75, 29.3, "Stage 2 hypertension", None, None, "cerebral ischaemia"),
}
STAGES = ["Normal", "Prehypertension", "Stage 1 hypertension", "Stage 2 hypertension"]
FS = 1000
SAMPLES = 2100


def pulse_segment(rng: np.random.Generator, hr: float, n: int = SAMPLES, fs: int = FS) -> np.ndarray:
    """An ADC-like fingertip pulse wave: systolic and diastolic bumps at ``hr`` bpm, around 2000."""
    t = np.arange(n) / fs
    phase = (t * hr / 60.0 + rng.uniform()) % 1.0
    wave = np.exp(-0.5 * ((phase - 0.2) / 0.07) ** 2) + 0.35 * np.exp(-0.5 * ((phase - 0.5) / 0.09) ** 2)
    return np.round(2000 + 300 * wave + 3 * rng.standard_normal(n))


def write_segment(path: Path, values: np.ndarray, trailing_tab: bool = False) -> None:
    """One line of tab-separated numbers, as the dataset stores each segment."""
    text = "\t".join("nan" if not np.isfinite(v) else str(int(v)) for v in values)
    path.write_text(text + ("\t" if trailing_tab else "") + "\n")


def write_workbook(path: Path, subjects: dict[int, tuple[Any, ...]]) -> None:
    """Title row, header on row 2, one row per subject from row 3."""
    book = Workbook()
    sheet = book.active
    sheet.title = "cardiovascular dataset"
    sheet.append(["PPG-BP dataset: cardiovascular information of the participants"])
    sheet.append(HEADER)
    for num, (sid, (age, sbp, dbp, hr, bmi, ht, dia, ci, cvd)) in enumerate(subjects.items(), start=1):
        sex = "Female" if sid % 2 else "Male"
        sheet.append([num, sid, sex, age, 165, 70, sbp, dbp, hr, bmi, ht, dia, ci, cvd])
    book.save(path)


def make(root: Path, seed: int = 0) -> dict[str, Any]:
    """Write the tiny dataset under ``root`` and return the expected outcome.

    Returns:
        ``kept``: segments kept per group name (subject 231 excluded); ``labels``: per-group labels;
        ``subjects``: the workbook rows.
    """
    rng = np.random.default_rng(seed)
    root = Path(root)
    seg_dir = root / "0_subject"
    seg_dir.mkdir(parents=True, exist_ok=True)
    write_workbook(root / "PPG-BP dataset.xlsx", SUBJECTS)
    for sid, row in SUBJECTS.items():
        for k in (1, 2, 3):
            values = pulse_segment(rng, hr=row[3])
            if sid == 3 and k == 2:
                values = values[:2000]
            if sid == 3 and k == 3:
                values[1000] = np.nan
            if sid == 6 and k == 3:
                values = np.zeros(SAMPLES)
            write_segment(seg_dir / f"{sid}_{k}.txt", values, trailing_tab=sid == 6)
    labels = {
        str(sid): {
            "age": row[0],
            "sysbp": row[1],
            "diasbp": row[2],
            "hr": row[3],
            "bmi": row[4],
            "hypertension": STAGES.index(row[5]),
            "hypertension_binary": int(row[5] != "Normal"),
            "diabetes": int(row[6] is not None),
            "cerebral_infarction": int(row[7] is not None),
            "cerebrovascular_disease": int(row[8] is not None),
        }
        for sid, row in SUBJECTS.items()
    }
    kept = {"2": [1, 2, 3], "3": [1], "6": [1, 2], "231": [1, 2, 3]}
    return {"kept": kept, "labels": labels, "subjects": SUBJECTS}


if __name__ == "__main__":
    make(Path(sys.argv[1] if len(sys.argv) > 1 else "ppgbp_raw"))
