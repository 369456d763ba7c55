import numpy as np

from ppgbench_pl.data.datasets import REAL_DATASETS, preprocessor
from ppgbench_pl.data.processed import ProcessedDataset
from ppgbench_pl.data.registry import DATASETS
from tests.cli_helpers import run_cli as run
from tests.data.bidmc import make_data as bidmc_data


def test_every_real_dataset_has_a_preprocessor():
    assert set(REAL_DATASETS) == set(DATASETS) - {"synthetic"}
    for key in REAL_DATASETS:
        assert preprocessor(key).key == key


def test_preprocess_command_builds_each_rate_and_reruns_as_noop(tmp_path, capsys):
    expected = bidmc_data.make(tmp_path / "raw" / "bidmc")
    args = ["preprocess", "bidmc", "--raw-root", str(tmp_path / "raw"), "--fs", "64", "125", "--output", str(tmp_path / "out")]
    code, out, err = run(args, capsys)
    assert code == 0, err
    for fs, n in ((64, 640), (125, 1250)):
        store = ProcessedDataset(tmp_path / "out" / f"fs_{fs}" / "BIDMC")
        assert store.groups == sorted(expected)
        assert store.ppg(store.groups[0]).shape[1] == n
    stamp = (tmp_path / "out/fs_64/BIDMC/preprocessing.json").stat().st_mtime_ns
    assert run(args, capsys)[0] == 0
    assert (tmp_path / "out/fs_64/BIDMC/preprocessing.json").stat().st_mtime_ns == stamp


def test_preprocess_errors_are_one_line(tmp_path, capsys):
    code, _, err = run(["preprocess", "bidmc", "--raw-root", str(tmp_path / "missing"), "--fs", "64"], capsys)
    assert code == 2 and err.startswith("ppgbench: error:") and err.count("\n") == 1
    code, _, err = run(["preprocess", "nope", "--fs", "64"], capsys)
    assert code == 2 and "unknown dataset(s) nope" in err
    (tmp_path / "raw" / "bidmc" / "bidmc_csv").mkdir(parents=True)
    (tmp_path / "raw" / "bidmc" / "bidmc_csv" / "bidmc_01_Signals.csv").write_text("Time [s], PLETH\n0.0,")
    code, _, err = run(["preprocess", "bidmc", "--raw-root", str(tmp_path / "raw"), "--fs", "64",
                        "--output", str(tmp_path / "out")], capsys)
    assert code == 2 and "bidmc_01" in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "fs_64" / "BIDMC").exists()
    assert np.asarray(list((tmp_path / "out").rglob("*.npy")) if (tmp_path / "out").exists() else []).size == 0
