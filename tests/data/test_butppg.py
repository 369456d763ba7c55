"""BUT PPG preprocessing (PROTOCOL.md 1.8) on tiny WFDB records and BOM-prefixed CSV files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppgbench_pl.data.datasets.butppg import ButPPGDataset, blood_pressure
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.signal import resample
from ppgbench_pl.errors import DataError
from tests.data.butppg.make_data import make


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[int, ProcessedDataset]]:
    root = tmp_path_factory.mktemp("butppg")
    expected = make(root / "raw")
    out = {fs: ProcessedDataset(ButPPGDataset(root / "raw").build(root / "out", fs)) for fs in (30, 50, 125)}
    return expected, out


def test_only_quality_1_records_grouped_by_participant(built: Any) -> None:
    expected, out = built
    assert out[50].groups == ["100", "101", "103"] == sorted(expected["records"])
    meta = (out[50].directory / "100" / "metadata.csv").read_text().splitlines()
    assert [line.split(",")[1] for line in meta[1:]] == ["100001", "100002"]


def test_all_three_header_shapes_yield_the_green_ppg(built: Any) -> None:
    expected, out = built
    for participant, records in expected["records"].items():
        ppg = out[30].ppg(participant)  # native rate: no resampling
        for row, record in enumerate(records):
            np.testing.assert_array_equal(ppg[row], expected["green"][record])


@pytest.mark.parametrize(("fs", "samples"), [(50, 500), (125, 1250)])
def test_each_record_is_resampled_on_its_own(built: Any, fs: int, samples: int) -> None:
    expected, out = built
    ppg = out[fs].ppg("100")
    assert ppg.shape == (2, samples)
    np.testing.assert_allclose(ppg[1], resample(expected["green"]["100002"], 30, fs), rtol=1e-6)


def test_labels(built: Any) -> None:
    _, out = built
    data = out[50]
    np.testing.assert_allclose(data.target("100", "hr"), [72.0, 75.0])
    np.testing.assert_allclose(data.target("100", "sbp"), [128.0, 131.0])
    np.testing.assert_allclose(data.target("100", "dbp"), [85.0, 88.0])
    np.testing.assert_allclose(data.target("100", "spo2"), [97.0, 98.0])
    np.testing.assert_allclose(data.target("100", "glyc"), [5.4, 5.1], rtol=1e-6)
    for key in ("sbp", "dbp", "spo2", "glyc"):  # "NA", "" and "x" become NaN
        assert np.isnan(data.target("101", key)).all()
        assert data.target("101", key).dtype == np.float32
    np.testing.assert_allclose(data.target("103", "sbp"), [110.0])


def test_blood_pressure_text() -> None:
    assert blood_pressure("128/85") == (128.0, 85.0)
    assert blood_pressure(" 110 / 70 mmHg") == (110.0, 70.0)
    assert np.isnan(blood_pressure("120")).all() and np.isnan(blood_pressure("")).all()


def test_stats_pool_the_participants_records(built: Any) -> None:
    _, out = built
    ppg = out[125].ppg("100").astype(np.float64)
    stats = out[125].stats("100")
    assert stats["subject"] == "100"
    assert stats["ppg_mean"] == pytest.approx(ppg.mean(), rel=1e-6)
    assert stats["ppg_std"] == pytest.approx(ppg.std(), rel=1e-6)


def test_rerun_is_a_noop_and_changes_are_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    first = ButPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50)
    stamp = (first / "preprocessing.json").stat().st_mtime_ns
    assert ButPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50) == first
    assert (first / "preprocessing.json").stat().st_mtime_ns == stamp
    dat = tmp_path / "raw" / "101001" / "101001_PPG.dat"
    dat.write_bytes(dat.read_bytes()[::-1])
    with pytest.raises(DataError, match="raw_files_sha256"):
        ButPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50)


def _refused(root: Path, needle: str) -> str:
    out = root / "out"
    with pytest.raises(DataError) as info:
        ButPPGDataset(root / "raw").build(out, 50)
    message = str(info.value)
    assert "\n" not in message and needle in message
    assert not out.exists()
    return message


def test_truncated_signal_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    dat = tmp_path / "raw" / "100001" / "100001_PPG.dat"
    dat.write_bytes(dat.read_bytes()[:1000])
    assert "unreadable WFDB record samples" in _refused(tmp_path, "100001_PPG.dat")


def test_wrong_length_signal_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    folder = tmp_path / "raw" / "103001"
    np.zeros(250, dtype="<i2").tofile(folder / "103001_PPG.dat")
    assert "250 values" in _refused(tmp_path, "103001_PPG.hea")


def test_missing_good_record_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    for path in (tmp_path / "raw" / "101001").iterdir():
        path.unlink()
    assert "not found" in _refused(tmp_path, "101001_PPG.hea")


def test_missing_column_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    path = tmp_path / "raw" / "quality-hr-ann.csv"
    path.write_text(path.read_text(encoding="utf-8-sig").replace("Quality", "Qual"), encoding="utf-8-sig")
    assert "'Quality'" in _refused(tmp_path, "quality-hr-ann.csv")


def test_bad_record_id_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    path = tmp_path / "raw" / "quality-hr-ann.csv"
    path.write_text(path.read_text(encoding="utf-8-sig").replace("103001", "10301"), encoding="utf-8-sig")
    assert "'10301'" in _refused(tmp_path, "quality-hr-ann.csv")


def test_no_good_record_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    path = tmp_path / "raw" / "quality-hr-ann.csv"
    path.write_text("ID,Quality,HR\n100001,0,70\n")
    assert "Quality == 1" in _refused(tmp_path, "quality-hr-ann.csv")
