"""PPG-BP preprocessing (PROTOCOL.md 1.6) on a tiny raw dataset in the real xlsx + txt layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openpyxl import load_workbook

from ppgbench_pl.data.datasets.ppgbp import PPGBPDataset
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.errors import DataError
from tests.data.ppgbp.make_data import make

WORKBOOK = "PPG-BP dataset.xlsx"
CLASS_LABELS = ("hypertension", "hypertension_binary", "diabetes", "cerebral_infarction")
CLASS_LABELS += ("cerebrovascular_disease",)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[int, ProcessedDataset]]:
    root = tmp_path_factory.mktemp("ppgbp")
    expected = make(root / "raw")
    out = {fs: ProcessedDataset(PPGBPDataset(root).build(root / "out", fs)) for fs in (50, 125)}
    return expected, out


@pytest.mark.parametrize(("fs", "samples"), [(50, 105), (125, 263)])
def test_segments_shapes_and_rejections(built: Any, fs: int, samples: int) -> None:
    expected, out = built
    data = out[fs]
    assert data.groups == ["2", "3", "6"]  # 231 excluded
    for name in data.groups:
        ppg = data.ppg(name)
        assert ppg.shape == (len(expected["kept"][name]), samples)
        assert ppg.dtype == np.float32 and np.isfinite(ppg).all()
    meta = (data.directory / "6" / "metadata.csv").read_text().splitlines()
    assert [line.split(",")[1] for line in meta[1:]] == ["1", "2"]  # flat segment 3 rejected


def test_labels_and_dtypes(built: Any) -> None:
    expected, out = built
    data = out[50]
    for name in data.groups:
        n = len(data.ppg(name))
        labels = expected["labels"][name]
        for key in ("age", "bmi", "sysbp", "diasbp", "hr"):
            values = data.target(name, key, n)
            assert values.dtype == np.float32
            np.testing.assert_allclose(values, labels[key], rtol=1e-6)
        for key in CLASS_LABELS:
            values = data.target(name, key, n)
            assert values.dtype == np.int64
            assert (values == labels[key]).all()
    assert data.target("6", "hypertension")[0] == 2 and data.target("3", "diabetes")[0] == 1


def test_stats_use_valid_segments_before_the_flatline_rule(built: Any, tmp_path: Path) -> None:
    _, out = built
    stats = out[125].stats("6")
    assert stats["subject"] == "6"
    kept = out[125].ppg("6").astype(np.float64)
    assert stats["ppg_mean"] < kept.mean() * 0.8  # the flat all-zero segment pulls the mean down
    assert stats["ppg_mean"] == pytest.approx(kept.sum() / (3 * kept.shape[1]), rel=1e-5)


def test_subject_231_option_and_settings(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    ds = PPGBPDataset(tmp_path / "raw", exclude_subjects=())
    assert ds.settings()["exclude_subjects"] == []
    assert PPGBPDataset(tmp_path / "raw").settings()["exclude_subjects"] == [231]
    data = ProcessedDataset(ds.build(tmp_path / "all", 50))
    assert data.groups == ["2", "231", "3", "6"]
    assert (data.target("231", "hypertension") == 3).all()
    assert (data.target("231", "cerebrovascular_disease") == 1).all()


def test_rerun_is_a_noop_and_changes_are_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    first = PPGBPDataset(tmp_path / "raw").build(tmp_path / "out", 50)
    stamp = (first / "preprocessing.json").stat().st_mtime_ns
    assert PPGBPDataset(tmp_path / "raw").build(tmp_path / "out", 50) == first
    assert (first / "preprocessing.json").stat().st_mtime_ns == stamp
    with pytest.raises(DataError, match="settings"):
        PPGBPDataset(tmp_path / "raw", exclude_subjects=()).build(tmp_path / "out", 50)
    (tmp_path / "raw" / "0_subject" / "2_1.txt").write_text("1\t2\n")
    with pytest.raises(DataError, match="raw_files_sha256"):
        PPGBPDataset(tmp_path / "raw").build(tmp_path / "out", 50)
    assert (first / "preprocessing.json").stat().st_mtime_ns == stamp


def _refused(root: Path, needle: str) -> str:
    out = root / "out"
    with pytest.raises(DataError) as info:
        PPGBPDataset(root / "raw").build(out, 50)
    message = str(info.value)
    assert "\n" not in message and needle in message
    assert not out.exists()
    return message


def _edit_workbook(path: Path, edit: Any) -> None:
    book = load_workbook(path)
    edit(book.active)
    book.save(path)


def test_unknown_hypertension_string_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    lower_case = "stage 1 hypertension"  # the protocol's strings are exact
    _edit_workbook(tmp_path / "raw" / WORKBOOK, lambda s: s.cell(row=4, column=11, value=lower_case))
    assert "'stage 1 hypertension'" in _refused(tmp_path, WORKBOOK)


def test_missing_column_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    _edit_workbook(tmp_path / "raw" / WORKBOOK, lambda s: s.cell(row=2, column=4, value="Age"))
    assert "'Age(year)'" in _refused(tmp_path, WORKBOOK)


def test_non_numeric_label_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    _edit_workbook(tmp_path / "raw" / WORKBOOK, lambda s: s.cell(row=3, column=4, value="forty"))
    assert "'forty'" in _refused(tmp_path, WORKBOOK)


def test_corrupt_workbook_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    path = tmp_path / "raw" / WORKBOOK
    path.write_bytes(path.read_bytes()[:500])
    assert "unreadable workbook" in _refused(tmp_path, WORKBOOK)


def test_missing_segment_file_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    os.remove(tmp_path / "raw" / "0_subject" / "6_2.txt")
    assert "not found" in _refused(tmp_path, "6_2.txt")


def test_subject_without_a_valid_segment_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    for k in (1, 2, 3):
        (tmp_path / "raw" / "0_subject" / f"2_{k}.txt").write_text("\t".join(["2000"] * 2099) + "\n")
    assert "subject 2 has no valid segment" in _refused(tmp_path, "0_subject")


def test_wrong_length_and_empty_segments_are_dropped(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    (tmp_path / "raw" / "0_subject" / "2_1.txt").write_text("")
    (tmp_path / "raw" / "0_subject" / "2_2.txt").write_text("\t".join(["2000"] * 2101) + "\n")
    data = ProcessedDataset(PPGBPDataset(tmp_path / "raw").build(tmp_path / "out", 50))
    assert data.ppg("2").shape == (1, 105)
