"""Real-World PPG preprocessing (PROTOCOL.md 1.9) on tiny workbooks with one record per column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openpyxl import load_workbook

from ppgbench_pl.data.datasets.realworldppg import RealWorldPPGDataset
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.errors import ConfigError, DataError
from tests.data.realworldppg.make_data import make


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[int, ProcessedDataset]]:
    root = tmp_path_factory.mktemp("rwppg")
    expected = make(root / "raw")
    dataset = RealWorldPPGDataset(root / "raw")
    out = {fs: ProcessedDataset(dataset.build(root / "out", fs)) for fs in (50, 125)}
    return expected, out


def test_both_files_pooled_one_group_per_usable_record(built: Any) -> None:
    expected, out = built
    assert out[50].groups == sorted(expected["groups"])
    assert out[50].groups == ["test-0001", "test-0007", "test-0008", "train-0001", "train-0002"]


@pytest.mark.parametrize(("fs", "samples"), [(50, 300), (125, 750)])
def test_single_window_and_id_label(built: Any, fs: int, samples: int) -> None:
    expected, out = built
    for name, (participant, values) in expected["groups"].items():
        ppg = out[fs].ppg(name)
        assert ppg.shape == (1, samples)
        ident = out[fs].target(name, "id", 1)
        assert ident.dtype == np.int64 and ident.tolist() == [participant]
        if fs == 50:  # native rate: samples as stored in rows 1-300
            np.testing.assert_allclose(ppg[0], values, rtol=1e-6, atol=1e-7)


def test_stats_are_per_record(built: Any) -> None:
    _, out = built
    stats = out[125].stats("train-0002")
    ppg = out[125].ppg("train-0002").astype(np.float64)
    assert stats["subject"] == "train-0002" and stats["split"] == "train"
    assert stats["serial"] == 2 and stats["participant_id"] == 12
    assert stats["ppg_mean"] == pytest.approx(ppg.mean(), rel=1e-6, abs=1e-7)
    assert stats["ppg_std"] == pytest.approx(ppg.std(), rel=1e-6)


def test_min_records_option_drops_rare_participants(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    ds = RealWorldPPGDataset(tmp_path / "raw", min_records_per_participant=2)
    assert ds.settings()["min_records_per_participant"] == 2
    assert RealWorldPPGDataset(tmp_path / "raw").settings()["min_records_per_participant"] == 1
    data = ProcessedDataset(ds.build(tmp_path / "out", 50))
    # participant 14 has a single record
    assert data.groups == ["test-0001", "test-0008", "train-0001", "train-0002"]
    with pytest.raises(ConfigError):
        RealWorldPPGDataset(tmp_path / "raw", min_records_per_participant=0)


def test_rerun_is_a_noop_and_changes_are_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    first = RealWorldPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50)
    stamp = (first / "preprocessing.json").stat().st_mtime_ns
    assert RealWorldPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50) == first
    assert (first / "preprocessing.json").stat().st_mtime_ns == stamp
    with pytest.raises(DataError, match="settings"):
        RealWorldPPGDataset(tmp_path / "raw", min_records_per_participant=3).build(tmp_path / "out", 50)
    _edit(tmp_path / "raw" / "test8.xlsx", lambda s: s.cell(row=1, column=1, value=0.5))
    with pytest.raises(DataError, match="raw_files_sha256"):
        RealWorldPPGDataset(tmp_path / "raw").build(tmp_path / "out", 50)


def _edit(path: Path, edit: Any) -> None:
    book = load_workbook(path)
    edit(book["Sheet1"])
    book.save(path)


def _refused(root: Path, needle: str) -> str:
    out = root / "out"
    with pytest.raises(DataError) as info:
        RealWorldPPGDataset(root / "raw").build(out, 50)
    message = str(info.value)
    assert "\n" not in message and needle in message
    assert not out.exists()
    return message


def test_missing_sheet_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    _edit(tmp_path / "raw" / "test8.xlsx", lambda s: setattr(s, "title", "Data"))
    assert "no sheet 'Sheet1'" in _refused(tmp_path, "test8.xlsx")


def test_missing_test_file_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    (tmp_path / "raw" / "test8.xlsx").unlink()
    assert "not found" in _refused(tmp_path, "test8.xlsx")


def test_corrupt_workbook_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    path = tmp_path / "raw" / "train8.xlsx"
    path.write_bytes(b"not a zip file at all")
    assert "unreadable workbook" in _refused(tmp_path, "train8.xlsx")


def test_repeated_serial_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    _edit(tmp_path / "raw" / "test8.xlsx", lambda s: s.cell(row=303, column=4, value=7))
    assert "serial 7" in _refused(tmp_path, "test8.xlsx")


def test_non_integer_id_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    _edit(tmp_path / "raw" / "train8.xlsx", lambda s: s.cell(row=305, column=2, value=12.5))
    assert "column B" in _refused(tmp_path, "train8.xlsx")


def _dropped(tree: Path) -> dict[str, Any]:
    return dict(json.loads((tree / "preprocessing.json").read_text())["dropped_windows"])


def test_skipped_columns_are_counted_per_workbook_and_reason(built: Any) -> None:
    _, out = built
    # train8: column C misses a sample and D its ID, E holds text; test8's empty column C is no record
    assert _dropped(out[50].directory) == {"train8.xlsx": {"missing_cell": 2, "non_finite": 1}}


def test_records_below_min_records_are_counted(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    _edit(tmp_path / "raw" / "test8.xlsx", lambda s: setattr(s.cell(row=200, column=1), "value", None))
    tree = RealWorldPPGDataset(tmp_path / "raw", min_records_per_participant=2).build(tmp_path / "out", 50)
    # test-0001 is skipped (an empty sample cell), which leaves participant 11 with train-0001 only
    assert _dropped(tree) == {
        "train8.xlsx": {"missing_cell": 2, "non_finite": 1},
        "test8.xlsx": {"missing_cell": 1},
        "test-0007": {"below_min_records_per_participant": 1},
        "train-0001": {"below_min_records_per_participant": 1},
    }
    assert ProcessedDataset(tree).groups == ["test-0008", "train-0002"]
