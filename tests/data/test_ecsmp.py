"""ECSMP preprocessing on a tiny E4 / EEGLAB / workbook fixture (PROTOCOL.md 1.5)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.io
from scipy.signal import resample_poly

from ppgbench_pl.data.datasets.ecsmp import EcsmpDataset, video_intervals
from ppgbench_pl.data.datasets.ecsmp_io import read_bvp_csv, read_eeg_events
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.errors import DataError
from tests.data.ecsmp.make_data import (
    INTERVALS,
    events,
    make,
    write_bvp,
    write_eeg,
    write_eeg_v73,
    write_scales,
)

META = [
    "subject", "window_idx", "start_sec", "end_sec", "ppg_start", "ppg_end", "has_video_label",
    "video_idx", "stimulus", "felt_argmax", "felt_tie", "sds_score", "sds_class",
]  # fmt: skip
STATS = {
    "subject", "ppg_mean", "ppg_std", "sds_score", "sds_class", "bvp_start_utc", "bvp_fs_original",
    "target_fs",
    "eeg_fs", "eeg_file", "n_windows_total", "n_windows_kept", "n_windows_rejected", "n_windows_video",
}  # fmt: skip
EEG_001 = "EEG_downsample/ECSMP_EEG_001.mat"


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("ecsmp") / "ECSMP"
    return root, make(root)


@pytest.fixture(scope="module")
def built(fixture: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = tmp_path_factory.mktemp("ecsmp_out")
    return {fs: EcsmpDataset(fixture[0]).build(out, fs) for fs in (64, 125)}


def _no_tree(out: Path, fs: int = 64) -> bool:
    parent = out / f"fs_{fs}"
    return not parent.exists() or not any("ECSMP" in p.name for p in parent.iterdir())


def _expected(info: dict[str, Any], sid: str) -> dict[str, np.ndarray]:
    truth, kept = info[sid], info["kept"]
    position = np.array([info["window_video"].get(int(w), -1) for w in kept])
    scores = np.full((len(kept), 6), np.nan)
    felt, tie = np.full(len(kept), -1), np.zeros(len(kept), dtype=bool)
    for i, p in enumerate(position):
        if p >= 0:
            row = truth["scores"][p]
            scores[i] = row
            tie[i] = (row == row.max()).sum() > 1
            felt[i] = -1 if tie[i] else int(row.argmax())
    return {
        "has_video_label": position >= 0,
        "cesaf_scores": scores,
        "stimulus": np.array([truth["order"][p] if p >= 0 else -1 for p in position]),
        "felt_argmax": felt,
        "felt_tie": tie,
        "sds_score": np.full(len(kept), truth["sds"]),
        "sds_class": np.full(len(kept), int(truth["sds"] >= 50)),
    }


@pytest.mark.parametrize(("fs", "samples"), [(64, 640), (125, 1250)])
def test_windows_and_video_labels(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int, samples: int
) -> None:
    info = fixture[1]
    data = ProcessedDataset(built[fs])
    assert data.groups == info["subjects"]
    kept = info["kept"]
    for sid in info["subjects"]:
        assert data.ppg(sid).shape == (len(kept), samples)
        for target, expected in _expected(info, sid).items():
            np.testing.assert_array_equal(data.target(sid, target, len(kept)), expected, err_msg=target)
        assert data.target(sid, "cesaf_scores").dtype == np.float32
        assert data.target(sid, "sds_class").dtype == np.int64
        reject = np.load(built[fs] / sid / "reject_idx.npy")
        assert reject.dtype == bool and len(reject) == info["n_windows"]
        assert list(np.flatnonzero(reject)) == [18]
        meta = pd.read_csv(built[fs] / sid / "metadata.csv", dtype={"subject": str})
        assert list(meta.columns) == META and (meta["subject"] == sid).all()
        np.testing.assert_array_equal(meta["window_idx"], kept)
    assert np.load(built[fs] / "002" / "felt_tie.npy").sum() == 2


@pytest.mark.parametrize("fs", [64, 125])
def test_stats(fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int) -> None:
    _, _, bvp = read_bvp_csv(fixture[0] / "E4" / "001" / "BVP.csv")
    ppg = (bvp if fs == 64 else resample_poly(bvp, 125, 64)).astype(np.float32).astype(np.float64)
    stats = json.loads((built[fs] / "001" / "stats.json").read_text())
    assert set(stats) == STATS
    assert stats["ppg_mean"] == pytest.approx(ppg.mean(), rel=1e-9, abs=1e-9)
    assert stats["ppg_std"] == pytest.approx(ppg.std(), rel=1e-9)
    assert (stats["sds_score"], stats["sds_class"], stats["bvp_start_utc"]) == (45.0, 0, 1600000000.0)
    assert (stats["bvp_fs_original"], stats["target_fs"], stats["eeg_fs"]) == (64, fs, 250.0)
    assert stats["eeg_file"] == "ECSMP_EEG_001.mat"
    assert (stats["n_windows_total"], stats["n_windows_kept"], stats["n_windows_rejected"]) == (20, 19, 1)
    assert stats["n_windows_video"] == 11


def _dropped(tree: Path) -> dict[str, dict[str, int]]:
    return dict(json.loads((tree / "preprocessing.json").read_text())["dropped_windows"])


def test_skipped_subjects_are_logged_and_counted_in_the_marker(
    fixture: tuple[Path, dict[str, Any]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dataset = EcsmpDataset(fixture[0])
    with caplog.at_level(logging.WARNING):
        tree = dataset.build(tmp_path, 64)
    assert set(dataset.skipped) == {"003", "005"}
    assert "differs from CESAF" in dataset.skipped["003"] and "SDS" in dataset.skipped["005"]
    assert "ECSMP subject 003 skipped" in caplog.text and "ECSMP subject 005 skipped" in caplog.text
    dropped = _dropped(tree)
    for sid in ("003", "005"):
        assert dropped[sid] == {f"skipped: {dataset.skipped[sid]}": 1}


def test_rerun_is_noop_and_changed_raw_file_is_refused(
    fixture: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    raw = tmp_path / "raw"
    make(raw)
    out = EcsmpDataset(raw).build(tmp_path / "out", 64)
    state = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert EcsmpDataset(raw).build(tmp_path / "out", 64) == out
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == state
    write_eeg_v73(raw / EEG_001, *events(fixture[1]["001"]["order"]))
    with pytest.raises(DataError, match="raw_files_sha256"):
        EcsmpDataset(raw).build(tmp_path / "out", 64)


@pytest.fixture()
def raw(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    return tmp_path / "raw", make(tmp_path / "raw")


def test_matlab_v73_events_give_the_same_result(
    raw: tuple[Path, dict[str, Any]], built: dict[int, Path]
) -> None:
    root, info = raw
    types, latencies = events(info["001"]["order"])
    write_eeg_v73(root / EEG_001, types, latencies)
    srate, codes, lats = read_eeg_events(root / EEG_001)
    assert srate == 250.0 and np.isnan(codes[types.index("boundary")])
    np.testing.assert_array_equal(lats, latencies)
    out = EcsmpDataset(root).build(root.parent / "out", 64)
    for name in ("ppg", "cesaf_scores", "felt_argmax", "has_video_label"):
        expected = np.load(built[64] / "001" / f"{name}.npy")
        np.testing.assert_array_equal(np.load(out / "001" / f"{name}.npy"), expected)


def _drop(types: list[Any], latencies: list[float], code: int, at_s: float) -> tuple[list[Any], list[float]]:
    pairs = [(t, v) for t, v in zip(types, latencies, strict=True) if (t, v) != (code, at_s * 250.0)]
    return [t for t, _ in pairs], [v for _, v in pairs]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("drop_start", "5 video start events"),
        ("drop_end", "has no end event"),
        ("short_bvp", "lies outside the"),
    ],
)
def test_subject_checks_skip_not_fail(raw: tuple[Path, dict[str, Any]], change: str, reason: str) -> None:
    root, info = raw
    order = info["001"]["order"]
    types, latencies = events(order)
    if change == "drop_start":
        write_eeg(root / EEG_001, *_drop(types, latencies, 101 + order[3], 90))
    elif change == "drop_end":
        write_eeg(root / EEG_001, *_drop(types, latencies, 12, 58))
    else:
        _, _, bvp = read_bvp_csv(root / "E4" / "001" / "BVP.csv")
        write_bvp(root / "E4" / "001" / "BVP.csv", bvp[: 160 * 64])
    dataset = EcsmpDataset(root)
    out = dataset.build(root.parent / "out", 64)
    assert reason in dataset.skipped["001"] and ProcessedDataset(out).groups == ["002"]
    assert _dropped(out)["001"] == {f"skipped: {dataset.skipped['001']}": 1}


def test_code_20_wins_over_code_12_and_fallback_end(raw: tuple[Path, dict[str, Any]]) -> None:
    srate, codes, lats = read_eeg_events(raw[0] / EEG_001)
    intervals = video_intervals(codes, lats, srate)
    assert [(b, e) for _, b, e in intervals] == [(b, e) for b, e, _ in INTERVALS]
    assert INTERVALS[1][2] == 12  # the second video ends on the fallback code


def test_all_subjects_skipped_is_an_error(raw: tuple[Path, dict[str, Any]]) -> None:
    root, _ = raw
    write_scales(root / "scale.xlsx", [], [])
    with pytest.raises(DataError, match="no group produced any window"):
        EcsmpDataset(root).build(root.parent / "out", 64)
    assert _no_tree(root.parent / "out")


BVP_CASES = {
    "rate": ("1600000000.0\n62.5\n1\n2\n", "sampling rate '62.5' on line 2 is not a positive integer"),
    "value": ("1600000000.0\n64.0\n1\n2\nabc\n", "line 5 ('abc') is not a number"),
    "header only": ("1600000000.0\n64.0\n", "no samples after the two header lines"),
    "empty": ("", "unreadable Empatica CSV"),
    "no start": ("x\n64\n1\n", "lacks the start-time and sampling-rate lines"),
    "short": ("1600000000.0\n64.0\n" + "1.0\n" * 100, "less than one 10 s window"),
}


@pytest.mark.parametrize("case", sorted(BVP_CASES))
def test_bad_bvp_files(raw: tuple[Path, dict[str, Any]], case: str) -> None:
    root, _ = raw
    content, message = BVP_CASES[case]
    path = root / "E4" / "002" / "BVP.csv"
    path.write_text(content)
    dataset = EcsmpDataset(root)
    if case == "short":  # the videos no longer fit: a published skip, not an error
        dataset.build(root.parent / "out", 64)
        assert "outside" in dataset.skipped["002"]
        return
    with pytest.raises(DataError) as info:
        dataset.build(root.parent / "out", 64)
    assert str(path) in str(info.value) and message in str(info.value) and "\n" not in str(info.value)
    assert _no_tree(root.parent / "out")


def test_bad_eeg_and_workbook_files(raw: tuple[Path, dict[str, Any]]) -> None:
    root, info = raw
    out = root.parent / "out"
    cases: list[tuple[Path, bytes | None, str]] = [
        (root / "scale.xlsx", b"PK\x03\x04 not a zip", "scale.xlsx: unreadable workbook"),
        (root / EEG_001, b"MATLAB 5.0 junk" * 20, "ECSMP_EEG_001.mat: unreadable MATLAB file"),
        (root / "EEG_downsample" / "other_1.mat", None, "two EEG files for subject 001"),
    ]
    for path, content, message in cases:
        original = path.read_bytes() if path.exists() else None
        if content is None:
            write_eeg(path, *events(info["001"]["order"]))
        else:
            path.write_bytes(content)
        with pytest.raises(DataError, match=message):
            EcsmpDataset(root).build(out, 64)
        assert _no_tree(out)
        if original is None:
            path.unlink()
        else:
            path.write_bytes(original)
    scipy.io.savemat(root / EEG_001, {"EEGX": {"srate": 1.0}})
    with pytest.raises(DataError, match="no EEG struct with 'srate' and 'urevent'"):
        EcsmpDataset(root).build(out, 64)


def test_workbook_layout_errors(raw: tuple[Path, dict[str, Any]]) -> None:
    root, _ = raw
    path = root / "scale.xlsx"
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        pd.DataFrame([[1] * 48]).to_excel(writer, sheet_name="CESAF", header=False, index=False)
    with pytest.raises(DataError, match="scale.xlsx: no 'SDS' sheet"):
        EcsmpDataset(root).build(root.parent / "out", 64)
    with pd.ExcelWriter(path, engine="openpyxl") as writer:
        pd.DataFrame([[1, 2]]).to_excel(writer, sheet_name="CESAF", header=False, index=False)
        pd.DataFrame([[1] * 26]).to_excel(writer, sheet_name="SDS", header=False, index=False)
    with pytest.raises(DataError, match="sheet 'CESAF' has 2 columns, expected at least 48"):
        EcsmpDataset(root).build(root.parent / "out", 64)
