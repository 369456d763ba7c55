"""DREAMT preprocessing on a tiny 64 Hz CSV fixture (PROTOCOL.md 1.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.signal import resample_poly

from ppgbench_pl.data.datasets.dreamt import DreamtDataset
from ppgbench_pl.data.processed import MARKER, ProcessedDataset
from ppgbench_pl.errors import ConfigError, DataError
from tests.data.dreamt.make_data import make

META = [
    "subject", "window_idx", "start_sec", "end_sec", "ppg_start", "ppg_end",
    "sleep_stage", "sleep_3class", "sleep_4class", "sleep_5class",
]  # fmt: skip
FOUR = {0: 0, 1: 1, 2: 1, 3: 2, 4: 3}
THREE = {0: 0, 1: 1, 2: 1, 3: 1, 4: 2}


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("dreamt") / "DREAMT" / "2.1.0"
    return root, make(root)


@pytest.fixture(scope="module")
def built(fixture: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = tmp_path_factory.mktemp("dreamt_out")
    return {fs: DreamtDataset(fixture[0].parent.parent).build(out, fs) for fs in (64, 125)}


def _no_tree(out: Path, fs: int = 64) -> bool:
    parent = out / f"fs_{fs}"
    return not parent.exists() or not any("DREAMT" in p.name for p in parent.iterdir())


@pytest.mark.parametrize(("fs", "samples"), [(64, 640), (125, 1250)])
def test_windows_rejections_and_labels(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int, samples: int
) -> None:
    info = fixture[1]
    kept, five = info["kept"], info["sleep_5class"]
    data = ProcessedDataset(built[fs])
    assert data.groups == info["subjects"]
    for name in info["subjects"]:
        assert data.ppg(name).shape == (len(kept), samples)
        np.testing.assert_array_equal(data.target(name, "sleep_5class", len(kept)), five)
        np.testing.assert_array_equal(data.target(name, "sleep_4class"), [FOUR[c] for c in five])
        np.testing.assert_array_equal(data.target(name, "sleep_3class"), [THREE[c] for c in five])
        assert data.target(name, "sleep_5class").dtype == np.int64
        meta = pd.read_csv(built[fs] / name / "metadata.csv")
        assert list(meta.columns) == META
        np.testing.assert_array_equal(meta["window_idx"], kept)
        assert list(meta["sleep_stage"]) == ["W", "W", "W", "N1", "N1", "N2", "R", "R"]
        np.testing.assert_array_equal(meta["ppg_end"], (kept + 1) * 10 * fs)


def test_groups_in_number_order(fixture: tuple[Path, dict[str, Any]]) -> None:
    names = [p.name.split("_")[0] for p in DreamtDataset(fixture[0]).units()]
    assert names == ["S002", "S003", "S010"]
    with pytest.raises(ConfigError, match="window_s must be positive"):
        DreamtDataset(fixture[0], window_s=0)


@pytest.mark.parametrize("fs", [64, 125])
def test_stats_over_finite_resampled_samples(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], fs: int
) -> None:
    bvp = pd.to_numeric(pd.read_csv(fixture[0] / "data_64Hz" / "S003_whole_df.csv")["BVP"], errors="coerce")
    bvp = bvp.to_numpy(dtype=np.float64)
    ppg = (bvp if fs == 64 else resample_poly(bvp, 125, 64)).astype(np.float32).astype(np.float64)
    assert 1 <= np.isnan(ppg).sum() < 100  # the NaN spreads only over the filter length
    stats = json.loads((built[fs] / "S003" / "stats.json").read_text())
    assert set(stats) == {"subject", "ppg_mean", "ppg_std"} and stats["subject"] == "S003"
    assert stats["ppg_mean"] == pytest.approx(np.nanmean(ppg), rel=1e-9, abs=1e-9)
    assert stats["ppg_std"] == pytest.approx(np.nanstd(ppg), rel=1e-9)


def test_rerun_is_noop_and_window_option_changes_the_marker(
    fixture: tuple[Path, dict[str, Any]], built: dict[int, Path], tmp_path: Path
) -> None:
    root = built[64].parent.parent
    marker = json.loads((built[64] / MARKER).read_text())
    assert marker["settings"]["window_s"] == 10 and marker["settings"]["stride_s"] == 10
    state = {p: p.stat().st_mtime_ns for p in built[64].rglob("*")}
    assert DreamtDataset(fixture[0]).build(root, 64) == built[64]
    assert {p: p.stat().st_mtime_ns for p in built[64].rglob("*")} == state
    with pytest.raises(DataError, match="settings"):
        DreamtDataset(fixture[0], window_s=30).build(root, 64)
    out = DreamtDataset(fixture[0], window_s=30).build(tmp_path, 64)
    # 30 s windows: P, W, W|N1 (mixed), N1/N2 mix, N3/R mix (with the NaN) -> only the W window survives
    assert np.load(out / "S002" / "ppg.npy").shape == (1, 30 * 64)
    np.testing.assert_array_equal(np.load(out / "S002" / "sleep_5class.npy"), [0])


@pytest.fixture()
def raw(tmp_path: Path) -> Path:
    make(tmp_path / "raw", subjects=("S002", "S003"))
    return tmp_path / "raw"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("TIMESTAMP,BVP,HR\n0,1.0,60\n", "missing column(s) Sleep_Stage"),
        ("TIMESTAMP,BVP,Sleep_Stage\n", "0 rows, less than one 10 s window"),
        ("TIMESTAMP,BVP,Sleep_Stage\n0,1.0,W\n1,2.0,W\n", "2 rows, less than one 10 s window"),
        ("", "unreadable CSV"),
        ('TIMESTAMP,BVP,Sleep_Stage\n0,1.0,"W\n', "unreadable CSV"),
    ],
)
def test_bad_csvs_are_one_line_data_errors(raw: Path, tmp_path: Path, content: str, message: str) -> None:
    path = raw / "data_64Hz" / "S003_whole_df.csv"
    path.write_text(content)
    with pytest.raises(DataError) as info:
        DreamtDataset(raw).build(tmp_path / "out", 64)
    assert str(path) in str(info.value) and message in str(info.value) and "\n" not in str(info.value)
    assert _no_tree(tmp_path / "out")


def test_binary_garbage_and_truncated_rows(raw: Path, tmp_path: Path) -> None:
    path = raw / "data_64Hz" / "S003_whole_df.csv"
    path.write_bytes(b"\xff\xfe\x00\x01BVP\x00\x9c" * 50)
    with pytest.raises(DataError, match="S003_whole_df.csv"):
        DreamtDataset(raw).build(tmp_path / "out", 64)
    assert _no_tree(tmp_path / "out")
    lines = (raw / "data_64Hz" / "S002_whole_df.csv").read_text().splitlines()
    lines[1 + 2000] = lines[1 + 2000].split(",")[0]  # a cut-off row in window 3: BVP and stage go missing
    path.write_text("\n".join(lines) + "\n")
    out = DreamtDataset(raw).build(tmp_path / "out", 64)
    meta = pd.read_csv(out / "S003" / "metadata.csv")
    assert list(meta["window_idx"]) == [4, 5, 7, 8, 9, 12, 14]
