import json

import numpy as np
import pytest

from ppgbench_pl.data.processed import GroupData, ProcessedDataset
from ppgbench_pl.data.processed_writer import open_writer
from ppgbench_pl.data.registry import get_task
from ppgbench_pl.data.synthetic import SyntheticPPGDataset
from ppgbench_pl.data.task_data import load_task, load_windows
from ppgbench_pl.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def small():
    return SyntheticPPGDataset(n_subjects=8, windows_per_subject=5, seed=3)


def test_synthetic_tree_has_the_processed_layout(tmp_path, small):
    path = small.build(tmp_path, 64)
    assert path == tmp_path / "fs_64" / "Synthetic"
    marker = json.loads((path / "preprocessing.json").read_text())
    assert marker["target_fs"] == 64 and marker["groups"] == [f"S{i:02d}" for i in range(1, 9)]
    store = ProcessedDataset(path)
    assert store.groups == marker["groups"]
    ppg = store.ppg("S01")
    assert ppg.shape == (5, 640) and ppg.dtype == np.float32
    assert store.target("S01", "activity").dtype == np.int64
    assert store.target("S01", "hr").dtype == np.float32
    assert {"subject", "ppg_mean", "ppg_std"} <= set(store.stats("S01"))
    assert (path / "S01" / "metadata.csv").read_text().startswith("subject,window_idx,start_sec")


def test_synthetic_is_deterministic_and_rate_consistent(tmp_path, small):
    a = load_windows(ProcessedDataset(small.build(tmp_path / "a", 64)))
    b = load_windows(ProcessedDataset(SyntheticPPGDataset(8, 5, seed=3).build(tmp_path / "b", 64)))
    np.testing.assert_array_equal(a.x, b.x)
    c = load_windows(ProcessedDataset(small.build(tmp_path / "a", 125)))
    assert c.x.shape == (40, 1250)
    store64, store125 = ProcessedDataset(tmp_path / "a" / "fs_64" / "Synthetic"), ProcessedDataset(tmp_path / "a" / "fs_125" / "Synthetic")
    for target in ("hr", "activity", "stiffness", "age"):
        np.testing.assert_array_equal(store64.target("S02", target), store125.target("S02", target))
    other = load_windows(ProcessedDataset(SyntheticPPGDataset(8, 5, seed=4).build(tmp_path / "c", 64)))
    assert not np.allclose(a.x, other.x)


def test_synthetic_ground_truth(small):
    profiles = small.subjects()
    assert sum(p.stiff for p in profiles) == 4  # balanced at the cohort median
    stiff = [p.reflection_delay_s for p in profiles if p.stiff]
    soft = [p.reflection_delay_s for p in profiles if not p.stiff]
    assert max(stiff) < min(soft)  # stiff arteries reflect earlier


def test_synthetic_task_views(tmp_path, small):
    store = ProcessedDataset(small.build(tmp_path, 64))
    windows = load_windows(store)
    hr = load_task(store, windows, get_task("synthetic-hr"))
    act = load_task(store, windows, get_task("synthetic-activity"))
    assert len(hr) == 40 and set(np.unique(act.y)) <= {0, 1, 2}
    by_activity = [hr.y[act.y == a].mean() for a in range(3) if (act.y == a).any()]
    assert by_activity == sorted(by_activity)  # activity raises heart rate


def test_rerun_is_a_noop_and_other_settings_regenerate(tmp_path, small):
    path = small.build(tmp_path, 64)
    before = (path / "S01" / "ppg.npy").stat().st_mtime_ns
    small.build(tmp_path, 64)
    assert (path / "S01" / "ppg.npy").stat().st_mtime_ns == before
    SyntheticPPGDataset(n_subjects=9, windows_per_subject=5, seed=3).build(tmp_path, 64)
    assert len(ProcessedDataset(path).groups) == 9


def test_too_few_synthetic_subjects():
    with pytest.raises(ConfigError, match="at least 5"):
        SyntheticPPGDataset(n_subjects=4)


def test_writer_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "fs_64" / "X"
    with pytest.raises(RuntimeError), open_writer(final, {"k": 1}) as writer:
        writer.add_group(GroupData("g1", np.zeros((2, 4), np.float32), {"y": np.zeros(2)}, {"subject": "g1", "ppg_mean": 0, "ppg_std": 1}))
        raise RuntimeError("interrupted")
    assert not final.exists()
    assert not list(tmp_path.rglob("*.building-*"))


def test_writer_refuses_mismatched_lengths(tmp_path):
    with pytest.raises(DataError, match="target 'y' has 3 rows for 2 windows"), open_writer(tmp_path / "o", {}) as writer:
        writer.add_group(GroupData("g1", np.zeros((2, 4), np.float32), {"y": np.zeros(3)}, {"subject": "g1", "ppg_mean": 0, "ppg_std": 1}))


def test_reader_checks_label_counts_and_accepts_1d(tmp_path):
    group = tmp_path / "G1"
    group.mkdir()
    np.save(group / "ppg.npy", np.arange(10, dtype=np.float32))  # one window stored as 1-D
    np.save(group / "hr.npy", np.array([60.0, 70.0], dtype=np.float32))
    (group / "stats.json").write_text(json.dumps({"subject": "G1", "ppg_mean": 0.0, "ppg_std": 1.0}))
    store = ProcessedDataset(tmp_path)
    assert store.ppg("G1").shape == (1, 10)
    with pytest.raises(DataError, match=r"hr.npy: 2 labels for 1 windows"):
        store.target("G1", "hr", n_windows=1)
    (group / "stats.json").write_text("{not json")
    with pytest.raises(DataError, match="stats.json: not valid JSON"):
        store.stats("G1")
