"""BIDMC preprocessing (PROTOCOL.md 1.7) on tiny CSV records in the real padded-header layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ppgbench_pl.data.datasets.bidmc import BidmcDataset
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.signal import resample
from ppgbench_pl.errors import DataError
from tests.data.bidmc.make_data import make

CSV = Path("bidmc_csv")
Built = tuple[Path, dict[str, Any], dict[int, ProcessedDataset]]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("bidmc")
    expected = make(root / "raw")
    out = {fs: ProcessedDataset(BidmcDataset(root / "raw").build(root / "out", fs)) for fs in (50, 125)}
    return root, expected, out


@pytest.mark.parametrize(("fs", "samples"), [(50, 500), (125, 1250)])
def test_windows_shapes_and_labels(built: Any, fs: int, samples: int) -> None:
    _, expected, out = built
    data = out[fs]
    assert data.groups == ["bidmc01", "bidmc02", "bidmc03"]
    for name, exp in expected.items():
        ppg = data.ppg(name)
        assert ppg.shape == (len(exp["windows"]), samples)
        assert np.isfinite(ppg).all()
        np.testing.assert_allclose(data.target(name, "resp", len(ppg)), exp["resp"], rtol=1e-6)
        np.testing.assert_allclose(data.target(name, "spo2", len(ppg)), exp["spo2"], rtol=1e-6)
        assert data.target(name, "resp").dtype == np.float32
        meta = pd.read_csv(data.directory / name / "metadata.csv")
        assert meta["window_idx"].tolist() == exp["windows"]


def test_windows_are_cut_from_the_whole_resampled_pleth(built: Any) -> None:
    root, _, out = built
    pleth = pd.read_csv(root / "raw" / CSV / "bidmc_01_Signals.csv")[" PLETH"].to_numpy()
    whole = resample(pleth, 125, 50)
    np.testing.assert_allclose(out[50].ppg("bidmc01")[2], whole[1000:1500], rtol=1e-6)
    stats = out[50].stats("bidmc01")
    assert stats["subject"] == "bidmc01"
    assert stats["ppg_mean"] == pytest.approx(whole.astype(np.float64).mean(), rel=1e-6)
    assert stats["ppg_std"] == pytest.approx(whole.astype(np.float64).std(), rel=1e-5)
    assert out[50].stats("bidmc02")["ppg_mean"] is not None  # a NaN stretch does not poison the stats


def test_rerun_is_a_noop_and_changes_are_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    first = BidmcDataset(tmp_path / "raw").build(tmp_path / "out", 125)
    stamp = (first / "preprocessing.json").stat().st_mtime_ns
    assert BidmcDataset(tmp_path / "raw").build(tmp_path / "out", 125) == first
    assert (first / "preprocessing.json").stat().st_mtime_ns == stamp
    numerics = tmp_path / "raw" / CSV / "bidmc_03_Numerics.csv"
    numerics.write_text(numerics.read_text() + "30,80,79,15.0,97\n")
    with pytest.raises(DataError, match="raw_files_sha256"):
        BidmcDataset(tmp_path / "raw").build(tmp_path / "out", 125)


def _refused(root: Path, needle: str) -> str:
    out = root / "out"
    with pytest.raises(DataError) as info:
        BidmcDataset(root / "raw").build(out, 50)
    message = str(info.value)
    assert "\n" not in message and needle in message
    assert not out.exists()
    return message


def test_missing_column_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    path = tmp_path / "raw" / CSV / "bidmc_02_Numerics.csv"
    path.write_text(path.read_text().replace(" SpO2", " SpO2%", 1))
    assert "'SpO2'" in _refused(tmp_path, "bidmc_02_Numerics.csv")


def test_missing_numerics_file_is_refused(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    (tmp_path / "raw" / CSV / "bidmc_03_Numerics.csv").unlink()
    assert "not found" in _refused(tmp_path, "bidmc_03_Numerics.csv")


HEADER_ONLY = "Time [s], RESP, PLETH, V, AVR, II\n"


@pytest.mark.parametrize(("content", "needle"), [("", "unreadable CSV"), (HEADER_ONLY, "no data rows")])
def test_empty_or_headless_signals_are_refused(tmp_path: Path, content: str, needle: str) -> None:
    make(tmp_path / "raw")
    (tmp_path / "raw" / CSV / "bidmc_01_Signals.csv").write_text(content)
    assert needle in _refused(tmp_path, "bidmc_01_Signals.csv")


def test_record_without_any_valid_window_is_left_out(tmp_path: Path) -> None:
    make(tmp_path / "raw")
    path = tmp_path / "raw" / CSV / "bidmc_03_Numerics.csv"
    table = pd.read_csv(path)
    table[" RESP"] = np.nan
    table.to_csv(path, index=False)
    data = ProcessedDataset(BidmcDataset(tmp_path / "raw").build(tmp_path / "out", 50))
    assert data.groups == ["bidmc01", "bidmc02"]
