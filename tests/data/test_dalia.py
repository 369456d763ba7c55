"""DaLiA preprocessing on a tiny Python-2 pickle fixture (PROTOCOL.md 1.2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.signal import resample_poly

from ppgbench_pl.data.datasets.dalia import DaliaDataset
from ppgbench_pl.data.processed import MARKER, ProcessedDataset
from ppgbench_pl.data.safe_pickle import load_pickle
from ppgbench_pl.errors import DataError
from tests.data.dalia.make_data import make
from tests.data.py2pickle import write_py2_pickle

META = ["subject", "window_idx", "start_sec", "end_sec", "ppg_start", "ppg_end", "hr", "activity"]


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("dalia")
    return root / "download", make(root / "download" / "PPG_FieldStudy")


@pytest.fixture(scope="module")
def built(fixture: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = tmp_path_factory.mktemp("dalia_out")
    return {fs: DaliaDataset(fixture[0]).build(out, fs) for fs in (64, 125)}


def _tree_state(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def _no_tree(out: Path, fs: int = 64) -> bool:
    parent = out / f"fs_{fs}"
    return not parent.exists() or not any(p.name.startswith((".Dalia", "Dalia")) for p in parent.iterdir())


def test_root_is_found_from_a_parent_folder(fixture: tuple[Path, dict[str, Any]]) -> None:
    assert DaliaDataset(fixture[0]).raw_root.name == "PPG_FieldStudy"


@pytest.mark.parametrize(("fs", "samples"), [(64, 512), (125, 1000)])
def test_windows_labels_and_files(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int, samples: int
) -> None:
    info = fixture[1]
    data = ProcessedDataset(built[fs])
    assert data.groups == sorted(info["subjects"])
    assert data.marker()["groups"] == sorted(info["subjects"])
    kept = info["kept"]
    assert len(kept) == 18 and list(info["flat"]) == [10, 11, 12]
    assert set(info["impure"]) == {7, 8, 9, 17, 18, 19}
    for name in info["subjects"]:
        ppg = np.load(built[fs] / name / "ppg.npy")
        assert ppg.shape == (len(kept), samples) and ppg.dtype == np.float32
        hr = data.target(name, "hr", len(kept))
        assert hr.dtype == np.float32
        np.testing.assert_allclose(hr, info["hr"][name][kept].astype(np.float32))
        activity = data.target(name, "activity", len(kept))
        assert activity.dtype == np.int64
        np.testing.assert_array_equal(activity, info["activity"][kept])
        meta = pd.read_csv(built[fs] / name / "metadata.csv")
        assert list(meta.columns) == META
        np.testing.assert_array_equal(meta["window_idx"], kept)
        np.testing.assert_allclose(meta["start_sec"], kept * 2.0)
        np.testing.assert_allclose(meta["end_sec"], kept * 2.0 + 8)
        np.testing.assert_array_equal(meta["ppg_start"], kept * 2 * fs)
        assert (meta["subject"] == name).all()


@pytest.mark.parametrize("fs", [64, 125])
def test_stats_use_all_overlapping_windows(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int
) -> None:
    root = fixture[0] / "PPG_FieldStudy"
    bvp = load_pickle(root / "S2" / "S2.pkl")["signal"]["wrist"]["BVP"][:, 0]
    ppg = bvp if fs == 64 else resample_poly(bvp, 125, 64)
    ppg = ppg.astype(np.float32).astype(np.float64)
    windows = np.concatenate([ppg[s : s + 8 * fs] for s in range(0, len(ppg) - 8 * fs + 1, 2 * fs)])
    stats = json.loads((built[fs] / "S2" / "stats.json").read_text())
    assert stats["subject"] == "S2"
    assert stats["ppg_mean"] == pytest.approx(windows.mean(), rel=1e-9, abs=1e-9)
    assert stats["ppg_std"] == pytest.approx(windows.std(), rel=1e-9)
    assert stats["ppg_std"] != pytest.approx(ppg.std(), rel=1e-6)  # overlap counts samples several times


def test_rerun_is_a_noop_and_other_settings_are_refused(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path]
) -> None:
    before = _tree_state(built[64])
    marker = json.loads((built[64] / MARKER).read_text())
    assert marker["settings"]["transient_as_class"] is True and marker["target_fs"] == 64
    assert marker["settings"]["window_s"] == 8 and marker["settings"]["stride_s"] == 2
    assert DaliaDataset(fixture[0]).build(built[64].parent.parent, 64) == built[64]
    assert _tree_state(built[64]) == before
    with pytest.raises(DataError, match="settings"):
        DaliaDataset(fixture[0], transient_as_class=False).build(built[64].parent.parent, 64)
    assert _tree_state(built[64]) == before


def test_transient_option_invalidates_only_activity_zero(
    fixture: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    info = fixture[1]
    out = DaliaDataset(fixture[0], transient_as_class=False).build(tmp_path, 64)
    activity = np.load(out / "S1" / "activity.npy")
    expected = info["activity"][info["kept"]]
    np.testing.assert_array_equal(activity, np.where(expected == 0, -1, expected))
    assert len(np.load(out / "S1" / "hr.npy")) == len(info["kept"])


@pytest.fixture()
def raw(tmp_path: Path) -> Path:
    make(tmp_path / "raw", subjects=(1, 2))
    return tmp_path / "raw"


def test_changed_raw_file_is_refused(raw: Path, tmp_path: Path) -> None:
    out = DaliaDataset(raw).build(tmp_path / "out", 64)
    before = _tree_state(out)
    make(raw, seed=1, subjects=(2,))
    with pytest.raises(DataError, match="raw_files_sha256"):
        DaliaDataset(raw).build(tmp_path / "out", 64)
    assert _tree_state(out) == before


def _edit(path: Path, change: Callable[[dict], None]) -> None:
    record = load_pickle(path)
    change(record)
    write_py2_pickle(path, record)


def _set_bvp(record: dict, bvp: np.ndarray) -> None:
    record["signal"]["wrist"]["BVP"] = bvp


BAD_RECORDS: dict[str, tuple[Callable[[dict], None], str]] = {
    "missing BVP": (lambda r: r["signal"]["wrist"].pop("BVP"), "missing key 'signal/wrist/BVP'"),
    "missing activity": (lambda r: r.pop("activity"), "missing key 'activity'"),
    "wrist not a dict": (lambda r: r["signal"].__setitem__("wrist", [1]), "not a dict"),
    "hr count": (lambda r: r.__setitem__("label", r["label"][:-1]), "26 heart rates for 27 PPG windows"),
    "empty subject": (lambda r: _set_bvp(r, np.zeros((0, 1))), "0 samples"),
    "short subject": (lambda r: _set_bvp(r, np.ones((300, 1))), "less than one 8 s"),
    "short activity": (lambda r: r.__setitem__("activity", r["activity"][:100]), "'activity' covers"),
    "activity ids": (lambda r: r.__setitem__("activity", r["activity"] + 0.5), "integer activity IDs"),
    "BVP 3 columns": (lambda r: _set_bvp(r, np.zeros((10, 3))), "expected [n] or [n, 1]"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_bad_records_are_one_line_data_errors(raw: Path, tmp_path: Path, case: str) -> None:
    change, message = BAD_RECORDS[case]
    _edit(raw / "S2" / "S2.pkl", change)
    with pytest.raises(DataError) as info:
        DaliaDataset(raw).build(tmp_path / "out", 64)
    assert "S2.pkl" in str(info.value) and message in str(info.value) and "\n" not in str(info.value)
    assert _no_tree(tmp_path / "out")


@pytest.mark.parametrize("fs", [64, 125])
def test_hr_label_count_is_checked_at_each_rate(tmp_path: Path, fs: int) -> None:
    make(tmp_path / "raw", subjects=(1,), extra_hr_labels=1)
    with pytest.raises(DataError, match="28 heart rates for 27 PPG windows"):
        DaliaDataset(tmp_path / "raw").build(tmp_path / "out", fs)
    assert _no_tree(tmp_path / "out", fs)


def test_truncated_and_malicious_pickles(raw: Path, tmp_path: Path) -> None:
    path = raw / "S2" / "S2.pkl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(DataError, match="S2.pkl: not a readable pickle"):
        DaliaDataset(raw).build(tmp_path / "out", 64)
    path.write_bytes(b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.")
    with pytest.raises(DataError, match="'os.system', which is not allowed"):
        DaliaDataset(raw).build(tmp_path / "out", 64)
    assert _no_tree(tmp_path / "out")


def test_subject_with_every_window_rejected_is_left_out(raw: Path, tmp_path: Path) -> None:
    def alternate(record: dict) -> None:
        record["activity"] = (np.arange(len(record["activity"])) % 2).astype(float).reshape(-1, 1)

    _edit(raw / "S2" / "S2.pkl", alternate)
    out = DaliaDataset(raw).build(tmp_path / "out", 64)
    assert ProcessedDataset(out).groups == ["S1"]


def test_missing_raw_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="S1/S1.pkl"):
        DaliaDataset(tmp_path)
