"""Write a tiny ECSMP raw tree: ``E4/<id>/BVP.csv``, ``EEG_downsample/*_<id>.mat`` and ``scale.xlsx``.

Every subject has 203 s of 64 Hz BVP (20 full 10 s windows) and the same six video intervals
(``INTERVALS``), presented in a subject-specific order. Windows fully inside a video: 11; window 18
lies in a flat stretch. Subjects: 001 (kept), 002 (kept, tied felt scores in its third video, EEG file
name not zero-padded), 003 (skipped: CESAF order differs from the events), 005 (skipped: no SDS row),
004 (BVP only) and 006 (EEG only). Run ``python -m tests.data.ecsmp.make_data OUT`` to write one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pandas as pd
import scipy.io

FS, EEG_FS, WINDOW_S, DURATION_S, START_UTC = 64, 250.0, 10, 203, 1600000000.0
VIDEO_NAMES = ("neutral", "fear", "sad", "happy", "anger", "disgust")
#: (start s, end s, code of the end event) of the videos in presentation order.
INTERVALS = [(10, 30, 20), (35, 58, 12), (60, 85, 20), (90, 110, 20), (115, 139.5, 20), (140, 170, 20)]
#: Window index -> presentation position of the video it lies inside.
WINDOW_VIDEO = {1: 0, 2: 0, 4: 1, 6: 2, 7: 2, 9: 3, 10: 3, 12: 4, 14: 5, 15: 5, 16: 5}
FLAT, FLAT_WINDOW = (179.0, 191.0), 18
N_WINDOWS = 20
SDS = {"001": 45.0, "002": 55.0, "003": 50.0}


def write_bvp(path: Path, values: np.ndarray, rate: str = "64.000000", start: float = START_UTC) -> None:
    """An Empatica ``BVP.csv``: start time, rate, then one value per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([f"{start:.6f}", rate, *(f"{v:.2f}" for v in values)]) + "\n")


def events(order: list[int]) -> tuple[list[Any], list[float]]:
    """EEGLAB ``urevent`` types and latencies (samples at 250 Hz) for videos shown in ``order``."""
    rows: list[tuple[Any, float]] = [(1, 0.0), (20, 5.0), ("boundary", 87.0), (12, 31.0)]
    for position, (start, end, end_code) in enumerate(INTERVALS):
        rows += [(101 + order[position], start), (end_code, end)]
    rows.sort(key=lambda row: row[1])
    return [code for code, _ in rows], [seconds * EEG_FS for _, seconds in rows]


def write_eeg(path: Path, types: list[Any], latencies: list[float], srate: float = EEG_FS) -> None:
    """An EEGLAB-style ``EEG`` struct (``srate``, ``urevent`` struct array) via ``scipy.io.savemat``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    urevent = np.zeros(len(types), dtype=[("type", object), ("latency", object)])
    urevent["type"] = [float(t) if not isinstance(t, str) else t for t in types]
    urevent["latency"] = [float(v) for v in latencies]
    eeg = {"setname": "ds", "srate": srate, "nbchan": 2.0, "data": np.zeros((2, 8)), "urevent": urevent}
    scipy.io.savemat(path, {"EEG": eeg})


def write_eeg_v73(path: Path, types: list[Any], latencies: list[float], srate: float = EEG_FS) -> None:
    """The same struct as MATLAB v7.3 (HDF5) stores it: struct-array fields as object references."""
    with h5py.File(path, "w", userblock_size=512) as file:
        eeg, refs = file.create_group("EEG"), file.create_group("#refs#")
        eeg["srate"] = np.array([[srate]])
        urevent = eeg.create_group("urevent")
        for field, values in (("type", types), ("latency", latencies)):
            handles = []
            for i, value in enumerate(values):
                if isinstance(value, str):
                    chars = np.array([[ord(c)] for c in value], dtype=np.uint16)
                    data = refs.create_dataset(f"{field}{i}", data=chars)
                    data.attrs["MATLAB_class"] = np.bytes_("char")
                else:
                    data = refs.create_dataset(f"{field}{i}", data=np.array([[float(value)]]))
                    data.attrs["MATLAB_class"] = np.bytes_("double")
                handles.append(data.ref)
            urevent.create_dataset(field, data=np.array(handles, dtype=h5py.ref_dtype).reshape(-1, 1))
    with path.open("r+b") as handle:
        handle.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64".ljust(116) + bytes(8) + b"\x00\x02IM")


def write_scales(path: Path, cesaf_rows: list[list[Any]], sds_rows: list[list[Any]]) -> None:
    """``scale.xlsx`` with the CESAF (2 header rows) and SDS (1 header row) sheets."""
    videos = [f"video{v + 1}" for v in range(6) for _ in range(6)]
    cesaf_header = [["id", "info", "", "", "", *videos, "", *[""] * 6]]
    stimuli = [f"S{v}" for v in range(6)]
    cesaf_header.append(["ID", "name", "age", "sex", "hand", *(VIDEO_NAMES * 6), "note", *stimuli])
    sds_header = [["ID", *[f"Q{i}" for i in range(1, 25)], "SDS"]]
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        cesaf = pd.DataFrame(cesaf_header + cesaf_rows)
        cesaf.to_excel(writer, sheet_name="CESAF", header=False, index=False)
        pd.DataFrame(sds_header + sds_rows).to_excel(writer, sheet_name="SDS", header=False, index=False)


def make(root: Path, seed: int = 0) -> dict[str, Any]:
    """Write the tree under ``root`` and return what preprocessing should produce.

    Returns:
        ``subjects`` (kept ids), ``skipped`` (id -> reason keyword), ``n_windows``, ``kept`` (window indices),
        ``window_video``, and per kept id: ``order`` (emotion index per position), ``scores`` [6, 6]
        (rows in presentation order), ``sds``.
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    t = np.arange(DURATION_S * FS) / FS
    cesaf_rows: list[list[Any]] = [[0, "nobody", 0, "f", "r", *[5] * 36, "", *VIDEO_NAMES]]
    sds_rows: list[list[Any]] = [[0, *[1] * 24, 99]]
    truth: dict[str, Any] = {}
    for sid in ("001", "002", "003", "004", "005", "006"):
        order = [int(i) for i in rng.permutation(6)]
        scores = rng.integers(0, 8, (6, 6)).astype(float)
        scores[np.arange(6), rng.integers(0, 6, 6)] = 9.0
        if sid == "002":
            scores[2, :2] = 9.0
        if sid != "006":
            bvp = 50 * np.sin(2 * np.pi * rng.uniform(1.0, 1.4) * t) + rng.normal(0, 6, len(t))
            bvp[(t >= FLAT[0]) & (t < FLAT[1])] = 0.0
            write_bvp(root / "E4" / sid / "BVP.csv", bvp)
        if sid != "004":
            name = "sub_2.mat" if sid == "002" else f"ECSMP_EEG_{sid}.mat"
            write_eeg(root / "EEG_downsample" / name, *events(order))
        stimuli = [VIDEO_NAMES[i] for i in order]
        if sid == "003":
            stimuli[0], stimuli[1] = stimuli[1], stimuli[0]
        if sid == "002":
            stimuli = [f" {s.capitalize()} " for s in stimuli]
        cell_id: Any = {"001": 1, "002": "002", "003": 3.0}.get(sid, int(sid))
        cesaf_rows.append([cell_id, f"p{sid}", 30, "m", "r", *scores.ravel().tolist(), "", *stimuli])
        if sid in SDS:
            sds_rows.append([cell_id, *rng.integers(1, 5, 24).tolist(), SDS[sid]])
        truth[sid] = {"order": order, "scores": scores, "sds": SDS.get(sid)}
    write_scales(root / "scale.xlsx", cesaf_rows, sds_rows)
    return {
        "subjects": ["001", "002"],
        "skipped": {"003": "order", "005": "SDS"},
        "n_windows": N_WINDOWS,
        "kept": np.setdiff1d(np.arange(N_WINDOWS), [FLAT_WINDOW]),
        "window_video": WINDOW_VIDEO,
        **truth,
    }


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "ecsmp_fixture")
    make(out)
    print(f"wrote ECSMP fixture to {out}")
