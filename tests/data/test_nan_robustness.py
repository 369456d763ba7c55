"""One bad raw sample loses only the windows that hold it, and the marker counts every drop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppgbench_pl.data.datasets.dalia import DaliaDataset
from ppgbench_pl.data.datasets.wesad import WesadDataset
from ppgbench_pl.data.processed import MARKER, ProcessedDataset
from ppgbench_pl.data.safe_pickle import load_pickle
from ppgbench_pl.data.signal import flatline_mask, rejection_counts, resample, resample_gaps
from tests.data.dalia import make_data as dalia_data
from tests.data.py2pickle import write_py2_pickle
from tests.data.wesad import make_data as wesad_data


def _spoil_bvp(pickle_path: Path, seconds: list[float], value: float = np.nan) -> None:
    """Rewrite one subject's pickle with single bad BVP samples at the given times."""
    record = load_pickle(pickle_path)
    bvp = np.asarray(record["signal"]["wrist"]["BVP"], dtype=np.float64).copy()
    for t in seconds:
        bvp[int(t * 64)] = value
    record["signal"]["wrist"]["BVP"] = bvp
    write_py2_pickle(pickle_path, record)


def test_flatline_mask_ignores_non_finite_windows():
    rng = np.random.default_rng(0)
    windows = rng.normal(size=(6, 50))
    windows[4] = 0.0  # flat
    windows[2, 7] = np.nan
    windows[3, 0] = np.inf
    keep = flatline_mask(windows)
    assert keep.tolist() == [True, True, False, False, False, True]
    clean = np.delete(windows, [2, 3], axis=0)
    assert flatline_mask(clean).tolist() == [True, True, False, True]  # finite input: the published rule
    assert rejection_counts(windows, keep) == {"non_finite": 2, "flat": 1}
    assert not flatline_mask(np.full((3, 4), np.nan)).any()


@pytest.mark.parametrize("target", [64, 32, 125])
def test_resample_gaps_keeps_a_nan_local(target):
    x = np.sin(np.arange(64 * 30) / 7.0)
    x[64 * 15] = np.nan
    out, bad = resample_gaps(x, 64, target)
    assert np.isnan(out[bad]).all() and np.isfinite(out[~bad]).all()
    assert 1 <= bad.sum() <= 3  # a few output samples around 15 s, not a filter length
    assert np.flatnonzero(bad).min() >= int(14.9 * target) and np.flatnonzero(bad).max() <= int(15.1 * target)
    clean, none = resample_gaps(np.nan_to_num(x), 64, target)
    np.testing.assert_array_equal(clean, resample(np.nan_to_num(x), 64, target))
    assert not none.any()


@pytest.mark.parametrize("fs", [64, 125])
def test_dalia_nan_sample_loses_only_its_windows(tmp_path, fs):
    info = dalia_data.make(tmp_path / "raw", subjects=(1, 2, 3))
    _spoil_bvp(tmp_path / "raw" / "S2" / "S2.pkl", [51.3])
    tree = ProcessedDataset(DaliaDataset(tmp_path / "raw").build(tmp_path / "out", fs))
    assert tree.groups == ["S1", "S2", "S3"]  # before: S2 lost all windows, "subject left out"
    n_kept = len(info["kept"])
    assert [len(tree.ppg(g)) for g in tree.groups] == [n_kept, n_kept - 4, n_kept]
    marker = json.loads((tree.directory / MARKER).read_text())
    assert marker["dropped_windows"]["S2"] == {"non_finite": 4, "flat": 3, "activity_change": 6}
    assert marker["dropped_windows"]["S1"] == {"flat": 3, "activity_change": 6}
    assert marker["n_windows"] == {"S1": n_kept, "S2": n_kept - 4, "S3": n_kept}
    assert np.isfinite(tree.stats("S2")["ppg_mean"]) and np.isfinite(tree.stats("S2")["ppg_std"])


def test_dalia_subject_with_only_bad_windows_is_counted(tmp_path):
    dalia_data.make(tmp_path / "raw", subjects=(1, 2))
    record_path = tmp_path / "raw" / "S2" / "S2.pkl"
    _spoil_bvp(record_path, list(np.arange(0.5, 60, 2.0)))
    tree = ProcessedDataset(DaliaDataset(tmp_path / "raw").build(tmp_path / "out", 64))
    assert tree.groups == ["S1"]
    dropped = json.loads((tree.directory / MARKER).read_text())["dropped_windows"]
    assert dropped["S2"] == {"non_finite": 27}


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_wesad_bad_sample_drops_its_window_not_the_dataset(tmp_path, value):
    info = wesad_data.make(tmp_path / "raw")
    _spoil_bvp(tmp_path / "raw" / "S3" / "S3.pkl", [25.5], value)
    tree = ProcessedDataset(WesadDataset(tmp_path / "raw").build(tmp_path / "out", 64))
    assert tree.groups == sorted(info["subjects"])  # before: "group S3: ppg must be a non-empty ..." for all
    kept = list(info["kept"])
    assert len(tree.ppg("S3")) == len(kept) - 1 and len(tree.ppg("S2")) == len(kept)
    window_idx = np.loadtxt(tree.directory / "S3" / "metadata.csv", delimiter=",", skiprows=1,
                            usecols=1, dtype=int)
    assert 2 not in window_idx.tolist()
    dropped = json.loads((tree.directory / MARKER).read_text())["dropped_windows"]
    assert dropped["S3"] == {"non_finite": 1, "flat": 1} and dropped["S2"] == {"flat": 1}
    stats = tree.stats("S3")
    assert np.isfinite(stats["ppg_mean"]) and np.isfinite(stats["ppg_std"])


def test_dalia_missing_activity_sample_drops_only_its_windows(tmp_path):
    info = dalia_data.make(tmp_path / "raw", subjects=(1, 2))
    path = tmp_path / "raw" / "S2" / "S2.pkl"
    record = load_pickle(path)
    activity = np.asarray(record["activity"], dtype=np.float64).copy()
    activity[int(51.3 * 4)] = np.nan  # before: "'activity' holds values that are not integer activity IDs"
    record["activity"] = activity
    write_py2_pickle(path, record)
    tree = ProcessedDataset(DaliaDataset(tmp_path / "raw").build(tmp_path / "out", 64))
    assert len(tree.ppg("S2")) == len(info["kept"]) - 4
    dropped = json.loads((tree.directory / MARKER).read_text())["dropped_windows"]
    assert dropped["S2"] == {"flat": 3, "activity_change": 10}


def test_wesad_missing_label_sample_keeps_every_window(tmp_path):
    info = wesad_data.make(tmp_path / "raw")
    reference = ProcessedDataset(WesadDataset(tmp_path / "raw").build(tmp_path / "ref", 64))
    path = tmp_path / "raw" / "S2" / "S2.pkl"
    record = load_pickle(path)
    codes = np.asarray(record["label"], dtype=np.float64).copy()
    codes[5 * 700 + 3] = np.nan  # one of window 0's 7000 label samples
    record["label"] = codes
    write_py2_pickle(path, record)
    tree = ProcessedDataset(WesadDataset(tmp_path / "raw").build(tmp_path / "out", 64))
    assert len(tree.ppg("S2")) == len(info["kept"])
    for target in ("condition_4class", "valence_reg"):
        np.testing.assert_array_equal(tree.target("S2", target), reference.target("S2", target))
