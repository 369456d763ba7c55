"""WESAD preprocessing on a tiny Python-2 pickle fixture (PROTOCOL.md 1.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.signal import resample_poly

from ppgbench_pl.data.datasets.wesad import WesadDataset, read_quest
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.safe_pickle import load_pickle
from ppgbench_pl.errors import DataError
from tests.data.py2pickle import write_py2_pickle
from tests.data.wesad.make_data import make, quest_text

META = [
    "subject", "window_idx", "start_sec", "end_sec", "ppg_start", "ppg_end",
    "label_code", "label_purity", "condition_4class", "condition_3class", "valence_reg", "arousal_reg",
]  # fmt: skip
CLASS_TARGETS = ["condition_4class", "condition_3class", "valence_class", "arousal_class"]


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("wesad") / "WESAD"
    return root, make(root)


@pytest.fixture(scope="module")
def built(fixture: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = tmp_path_factory.mktemp("wesad_out")
    return {fs: WesadDataset(fixture[0]).build(out, fs) for fs in (64, 125)}


def _no_tree(out: Path, fs: int = 64) -> bool:
    parent = out / f"fs_{fs}"
    return not parent.exists() or not any("WESAD" in p.name for p in parent.iterdir())


@pytest.mark.parametrize(("fs", "samples"), [(64, 640), (125, 1250)])
def test_windows_and_labels(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int, samples: int
) -> None:
    info = fixture[1]
    kept = info["kept"]
    data = ProcessedDataset(built[fs])
    assert data.groups == sorted(info["subjects"])
    for name in info["subjects"]:
        assert data.ppg(name).shape == (len(kept), samples)
        for target, expected in info["labels"].items():
            values = data.target(name, target, len(kept))
            assert values.dtype == (np.int64 if target in CLASS_TARGETS else np.float32)
            np.testing.assert_array_equal(values, expected[kept].astype(values.dtype), err_msg=target)
        meta = pd.read_csv(built[fs] / name / "metadata.csv")
        assert list(meta.columns) == META
        np.testing.assert_array_equal(meta["window_idx"], kept)
        np.testing.assert_array_equal(meta["ppg_start"], kept * 10 * fs)


def test_purity_threshold_is_inclusive(built: dict[int, Path]) -> None:
    meta = pd.read_csv(built[64] / "S2" / "metadata.csv").set_index("window_idx")
    assert meta.loc[8, "label_purity"] == pytest.approx(0.9) and meta.loc[8, "condition_4class"] == 3
    assert meta.loc[4, "label_purity"] == pytest.approx(0.8) and meta.loc[4, "condition_4class"] == -1
    assert meta.loc[2, "label_purity"] == pytest.approx(0.95) and meta.loc[2, "condition_4class"] == 0


@pytest.mark.parametrize("fs", [64, 125])
def test_stats_cover_the_whole_resampled_bvp(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int
) -> None:
    bvp = fixture[1]["bvp"]["S3"]
    ppg = (bvp if fs == 64 else resample_poly(bvp, 125, 64)).astype(np.float32).astype(np.float64)
    stats = json.loads((built[fs] / "S3" / "stats.json").read_text())
    assert set(stats) == {"subject", "ppg_mean", "ppg_std"} and stats["subject"] == "S3"
    assert stats["ppg_mean"] == pytest.approx(ppg.mean(), rel=1e-9, abs=1e-9)
    assert stats["ppg_std"] == pytest.approx(ppg.std(), rel=1e-9)


def test_rerun_is_a_noop_and_changed_input_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw", subjects=(2,))
    out = WesadDataset(tmp_path / "raw").build(tmp_path / "out", 64)
    state = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    WesadDataset(tmp_path / "raw").build(tmp_path / "out", 64)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == state
    (tmp_path / "raw" / "S2" / "S2_quest.csv").write_text(quest_text("S2", dims=[(1.0, 1.0)] * 5))
    with pytest.raises(DataError, match="differ"):
        WesadDataset(tmp_path / "raw").build(tmp_path / "out", 64)


def test_quest_parsing(tmp_path: Path) -> None:
    path = tmp_path / "S9_quest.csv"
    path.write_text(quest_text("S9"))
    assert read_quest(path) == {1: (7.0, 3.0), 2: (3.0, 7.0), 3: (8.0, 5.0), 4: (5.5, 1.5)}
    path.write_text(quest_text("S9", order=["Fun", "sRead", "Base"], dims=[(2.0, 4.0), (9.0, 9.0)]))
    assert read_quest(path) == {3: (2.0, 4.0)}
    path.write_text(quest_text("S9").replace("# ORDER", "# ORDR"))
    with pytest.raises(DataError, match="S9_quest.csv: no '# ORDER' row"):
        read_quest(path)
    path.write_text(quest_text("S9").replace("# DIM;3;7", "# DIM;x;7"))
    with pytest.raises(DataError, match="S9_quest.csv: '# DIM' row 2"):
        read_quest(path)
    path.write_bytes(quest_text("S9").encode().replace(b"# Subj", b"# Subj\xe9"))
    assert read_quest(path)[2] == (3.0, 7.0)


@pytest.fixture()
def raw(tmp_path: Path) -> Path:
    make(tmp_path / "raw", subjects=(2, 3))
    return tmp_path / "raw"


def _edit(path: Path, key: str, value: Any) -> None:
    record = load_pickle(path)
    if value is None:
        record.pop(key)
    else:
        record[key] = value
    write_py2_pickle(path, record)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("label", np.zeros(11 * 7000, dtype=np.int32), "gives 11 windows at 700 Hz for 12 PPG windows"),
        ("label", np.full(12 * 7000, 1.5), "not integer condition codes"),
        ("label", None, "missing key 'label'"),
        ("signal", {"wrist": {"BVP": np.ones((320, 1))}}, "less than one 10 s window"),
        ("signal", {"chest": {}}, "missing key 'signal/wrist'"),
    ],
)
def test_bad_records(raw: Path, tmp_path: Path, key: str, value: Any, message: str) -> None:
    _edit(raw / "S3" / "S3.pkl", key, value)
    with pytest.raises(DataError) as info:
        WesadDataset(raw).build(tmp_path / "out", 64)
    assert "S3.pkl" in str(info.value) and message in str(info.value) and "\n" not in str(info.value)
    assert _no_tree(tmp_path / "out")


def test_missing_quest_and_corrupt_pickle(raw: Path, tmp_path: Path) -> None:
    (raw / "S3" / "S3_quest.csv").unlink()
    with pytest.raises(DataError, match="S3_quest.csv: questionnaire file not found"):
        WesadDataset(raw).build(tmp_path / "out", 64)
    (raw / "S3" / "S3.pkl").write_bytes(b"\x80\x02}q\x00(U\x06signal")
    with pytest.raises(DataError, match="S3.pkl: not a readable pickle"):
        WesadDataset(raw).build(tmp_path / "out", 64)
    assert _no_tree(tmp_path / "out")
