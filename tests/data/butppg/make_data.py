"""Tiny BUT PPG raw data: ``subject-info.csv``, ``quality-hr-ann.csv`` and WFDB ``<rec>/<rec>_PPG``.

Both CSV files start with a UTF-8 BOM. The good records cover the three header shapes: 100001 has
3 signals x 300 samples with ``PPG_G`` second (case b), 100002 is 300 signals x 1 sample (case a),
101001 has one signal named ``PPG`` (case b, signal 0) and 103001 has a header without a sample count
(case c). Quality-0 records (one without files) and a participant with no good record are skipped.
Run ``python tests/data/butppg/make_data.py <folder>`` to write it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import wfdb

FS = 30
N = 300
INFO_COLUMNS = [
    "ID", "Gender", "Age [years]", "Height [cm]", "Weight [kg]", "Ear/finger", "Motion",
    "Blood pressure [mmHg]", "SpO2 [%]", "Glycaemia [mmol/l]",
]  # fmt: skip
#: record: (quality, HR, blood pressure, SpO2, glycaemia, layout)
RECORDS: dict[str, tuple[int, float, str, str, str, str]] = {
    "100001": (1, 72.0, "128/85", "97", "5.4", "three"),
    "100002": (1, 75.0, "131/88", "98", "5.1", "per_sample"),
    "100003": (0, 80.0, "125/80", "97", "5.0", "three"),
    "101001": (1, 64.0, "NA", "", "x", "single"),
    "101002": (0, 66.0, "120/70", "96", "4.8", "none"),
    "102001": (0, 90.0, "140/90", "95", "6.0", "single"),
    "103001": (1, 58.0, "110/70 mmHg", "99", "4.9", "no_length"),
}


def _pulse(rng: np.random.Generator, hr: float) -> np.ndarray:
    """A camera-PPG-like int16 pulse train (300 samples at 30 Hz)."""
    t = np.arange(N) / FS
    phase = (t * hr / 60.0 + rng.uniform()) % 1.0
    wave = np.exp(-0.5 * ((phase - 0.3) / 0.1) ** 2)
    return np.round(-2000 * wave + 40 * rng.standard_normal(N)).astype(np.int64)


def write_record(folder: Path, record: str, layout: str, green: np.ndarray, rng: np.random.Generator) -> None:
    """Write ``<record>/<record>_PPG.hea/.dat`` in one of the header shapes of PROTOCOL.md 1.8."""
    name = f"{record}_PPG"
    out = folder / record
    out.mkdir(parents=True, exist_ok=True)
    if layout == "three":
        others = np.stack([_pulse(rng, 70), green, _pulse(rng, 70)], axis=1)
        _wrsamp(out, name, others, ["PPG_R", "PPG_G", "PPG_B"])
    elif layout == "single":
        _wrsamp(out, name, green[:, None], ["PPG"])
    elif layout == "per_sample":
        _wrsamp(out, name, green[None, :], [f"PPG_{i}" for i in range(N)])
    elif layout == "no_length":
        green.astype("<i2").tofile(out / f"{name}.dat")
        (out / f"{name}.hea").write_text(f"{name} 1 {FS}\n{name}.dat 16 1(0)/NU 16 0 0 0 0 PPG\n")


def _wrsamp(out: Path, name: str, digital: np.ndarray, names: list[str]) -> None:
    k = digital.shape[1]
    wfdb.wrsamp(
        name, fs=FS, units=["NU"] * k, sig_name=names, d_signal=digital, fmt=["16"] * k,
        adc_gain=[1.0] * k, baseline=[0] * k, write_dir=str(out),
    )  # fmt: skip


def make(root: Path, seed: int = 0) -> dict[str, Any]:
    """Write the tiny dataset under ``root``.

    Returns:
        ``records``: ``{participant: [good record IDs]}``; ``green``: the PPG each good record must
        yield (int values); ``rows``: the RECORDS table.
    """
    rng = np.random.default_rng(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    info, quality, green_of = [], [], {}
    for record, (q, hr, bp, spo2, glyc, layout) in RECORDS.items():
        green = _pulse(rng, hr)
        if layout != "none":
            write_record(root, record, layout, green, rng)
        green_of[record] = green
        quality.append({"ID": record, "Quality": q, "HR": hr})
        cells = [record, "M", 30, 180, 80, "finger", 0, bp, spo2, glyc]
        info.append(dict(zip(INFO_COLUMNS, cells, strict=True)))
    pd.DataFrame(info).to_csv(root / "subject-info.csv", index=False, encoding="utf-8-sig")
    pd.DataFrame(quality).to_csv(root / "quality-hr-ann.csv", index=False, encoding="utf-8-sig")
    good = {r: row for r, row in RECORDS.items() if row[0] == 1}
    participants: dict[str, list[str]] = {}
    for record in sorted(good):
        participants.setdefault(record[:3], []).append(record)
    return {"records": participants, "green": {r: green_of[r] for r in good}, "rows": RECORDS}


if __name__ == "__main__":
    make(Path(sys.argv[1] if len(sys.argv) > 1 else "butppg_raw"))
