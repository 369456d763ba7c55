"""WildPPG preprocessing (PROTOCOL.md 1.10) on a tiny raw dataset in the real .mat layout."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.io import loadmat, savemat

from ppgbench_pl.data.datasets.wildppg import WildPPGDataset
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.errors import DataError
from tests.data.wildppg.make_data import make

Built = tuple[Path, dict[str, Any], dict[int, ProcessedDataset]]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("wildppg")
    expected = make(root / "raw", seed=0, mat73=("cn2",))
    out = {fs: ProcessedDataset(WildPPGDataset(root / "raw").build(root / "out", fs)) for fs in (50, 125)}
    return root, expected, out


@pytest.mark.parametrize(("fs", "samples"), [(50, 400), (125, 1000)])
def test_windows_shapes_and_hr_labels(built: Any, fs: int, samples: int) -> None:
    _, expected, out = built
    data = out[fs]
    assert data.groups == ["an0", "bn1", "cn2"]
    for name, exp in expected.items():
        ppg = data.ppg(name)
        hr = data.target(name, "hr", len(ppg))
        assert ppg.shape == (len(exp["kept"]), samples)
        assert hr.dtype == np.float32
        np.testing.assert_array_equal(np.isnan(hr), np.isnan(exp["hr"]))
        np.testing.assert_allclose(hr[np.isfinite(hr)], exp["hr"][np.isfinite(exp["hr"])], atol=1.0)


def test_nan_window_dropped_and_ecg_gap_unlabelled(built: Any) -> None:
    _, _, out = built
    meta = (out[50].directory / "bn1" / "metadata.csv").read_text().splitlines()
    window_idx = [int(line.split(",")[1]) for line in meta[1:]]
    assert window_idx == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    hr = out[50].target("cn2", "hr")
    assert np.isnan(hr[5:8]).all() and np.isfinite(hr[:5]).all() and np.isfinite(hr[8:]).all()


def test_stats_cover_saved_windows_and_native_rates(built: Any) -> None:
    _, _, out = built
    for name in out[125].groups:
        ppg = out[125].ppg(name).astype(np.float64)
        stats = out[125].stats(name)
        assert stats["subject"] == name and stats["ppg_channel"] == "green"
        assert stats["native_ppg_fs"] == 128 and stats["native_ecg_fs"] == 128
        assert stats["ppg_mean"] == pytest.approx(ppg.mean(), rel=1e-5)
        assert stats["ppg_std"] == pytest.approx(ppg.std(), rel=1e-4)


def test_rerun_is_a_noop_and_changes_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path / "raw", names=("an0", "bn1"), duration_s=32.0)
    first = WildPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50)
    stamp = (first / "preprocessing.json").stat().st_mtime_ns
    assert WildPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50) == first
    assert (first / "preprocessing.json").stat().st_mtime_ns == stamp
    with_ecg = WildPPGDataset(tmp_path / "raw").marker(50)["source_sha256"]
    monkeypatch.setattr(WildPPGDataset, "helper_modules", ())  # the ECG pipeline's source counts too
    assert WildPPGDataset(tmp_path / "raw").marker(50)["source_sha256"] != with_ecg
    monkeypatch.undo()
    raw = tmp_path / "raw" / "WildPPG_Part_an0.mat"
    os.utime(raw, ns=(raw.stat().st_atime_ns, raw.stat().st_mtime_ns + 10**9))
    with pytest.raises(DataError, match="raw_files_sha256"):
        WildPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50)


def _refused(tmp_path: Path, needle: str) -> str:
    out = tmp_path / "out"
    with pytest.raises(DataError) as info:
        WildPPGDataset(tmp_path / "raw").build(out, 50)
    message = str(info.value)
    assert "\n" not in message and needle in message
    assert not out.exists()
    return message


def _rewrite(path: Path, change: Any) -> None:
    data = loadmat(path, simplify_cells=True)
    payload = {k: v for k, v in data.items() if not k.startswith("__")}
    change(payload)
    savemat(path, payload)


def test_non_integer_native_rate_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw", names=("an0",), duration_s=24.0, ppg_fs=127.5)
    assert "sampling rate 127.5" in _refused(tmp_path, "WildPPG_Part_an0.mat")


def test_missing_sternum_struct_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw", names=("an0", "bn1"), duration_s=24.0)
    _rewrite(tmp_path / "raw" / "WildPPG_Part_bn1.mat", lambda d: d.pop("sternum"))
    assert "sternum.ecg" in _refused(tmp_path, "WildPPG_Part_bn1.mat")


def test_truncated_file_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw", names=("an0",), duration_s=24.0)
    path = tmp_path / "raw" / "WildPPG_Part_an0.mat"
    path.write_bytes(path.read_bytes()[:3000])
    _refused(tmp_path, "WildPPG_Part_an0.mat")


def test_participant_without_a_finite_window_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw", names=("an0", "bn1"), duration_s=24.0)

    def blank(d: dict[str, Any]) -> None:
        d["wrist"]["ppg_g"]["v"] = np.full_like(d["wrist"]["ppg_g"]["v"], np.nan)

    _rewrite(tmp_path / "raw" / "WildPPG_Part_bn1.mat", blank)
    assert "no full 8 s window" in _refused(tmp_path, "WildPPG_Part_bn1.mat")


def test_ecg_rate_too_low_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw", names=("an0",), duration_s=24.0, ecg_fs=32.0)
    assert "sternum.ecg" in _refused(tmp_path, "WildPPG_Part_an0.mat")


def test_unlabelled_windows_are_counted_in_the_marker(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    expected = make(tmp_path / "raw", names=("an0", "bn1", "cn2"), duration_s=40.0)

    def one_nan(d: dict[str, Any]) -> None:
        d["sternum"]["ecg"]["v"][len(d["sternum"]["ecg"]["v"]) // 2] = np.nan

    _rewrite(tmp_path / "raw" / "WildPPG_Part_an0.mat", one_nan)
    with caplog.at_level(logging.WARNING, logger="ppgbench_pl.data.datasets.wildppg"):
        tree = WildPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50)
    dropped = json.loads((tree / "preprocessing.json").read_text())["dropped_windows"]
    # one NaN ECG sample: every window of an0 keeps its PPG but has no HR label, as published
    assert np.isnan(ProcessedDataset(tree).target("an0", "hr")).all()
    assert dropped["an0"] == {"no_hr_label": expected["an0"]["n_windows"]}
    assert dropped["bn1"] == {"non_finite": 1}
    assert "WildPPG_Part_an0.mat: 1 of" in caplog.text and "non-finite" in caplog.text
    assert "WildPPG_Part_bn1.mat" not in caplog.text
