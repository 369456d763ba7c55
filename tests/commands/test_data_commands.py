import numpy as np
import pytest

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


def test_preprocess_after_a_killed_build_cleans_up_and_reruns_as_noop(tmp_path, capsys):
    bidmc_data.make(tmp_path / "raw" / "bidmc")
    out = tmp_path / "out"
    args = ["preprocess", "bidmc", "--raw-root", str(tmp_path / "raw"), "--fs", "64", "--output", str(out)]
    leftover = out / "fs_64" / ".BIDMC.building-4242-abcd"  # what kill -9 during a build leaves
    leftover.mkdir(parents=True)
    (leftover / "bidmc01").mkdir()
    leftover.with_name(leftover.name + ".lock").write_text("")
    code, _, err = run(args, capsys)
    assert code == 0, err
    assert sorted(p.name for p in (out / "fs_64").iterdir()) == ["BIDMC"]
    leftover.mkdir()
    leftover.with_name(leftover.name + ".lock").write_text("")
    assert run(args, capsys)[0] == 0  # a no-op rerun cleans up too
    assert sorted(p.name for p in (out / "fs_64").iterdir()) == ["BIDMC"]


def test_preprocess_of_two_concurrent_processes_both_succeed(tmp_path):
    import subprocess
    import sys

    bidmc_data.make(tmp_path / "raw" / "bidmc")
    out = tmp_path / "out"
    script = ("import argparse, sys; from ppgbench_pl.commands.data import add_data_parsers; "
              "p = argparse.ArgumentParser(); add_data_parsers(p.add_subparsers()); "
              "ns = p.parse_args(sys.argv[1:]); ns.func(ns)")  # the command without the CLI's slow imports
    command = [sys.executable, "-c", script, "preprocess", "bidmc",
               "--raw-root", str(tmp_path / "raw"), "--fs", "64", "--output", str(out)]
    env = {**__import__("os").environ, "WANDB_MODE": "disabled"}
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for _ in range(2)]
    results = [child.communicate(timeout=120) for child in children]
    for child, (stdout, stderr) in zip(children, results, strict=True):
        assert child.returncode == 0, stderr
        assert "Traceback" not in stderr and "bidmc @ 64 Hz" in stdout
    assert sorted(p.name for p in (out / "fs_64").iterdir()) == ["BIDMC"]
    assert len(ProcessedDataset(out / "fs_64" / "BIDMC").groups) == 3


def test_damaged_processed_tree_is_reported_by_preprocess_rerun(tmp_path, capsys):
    bidmc_data.make(tmp_path / "raw" / "bidmc")
    out = tmp_path / "out"
    args = ["preprocess", "bidmc", "--raw-root", str(tmp_path / "raw"), "--fs", "64", "--output", str(out)]
    assert run(args, capsys)[0] == 0
    (out / "fs_64" / "BIDMC" / "preprocessing.json").write_text("{broken")
    code, _, err = run(args, capsys)
    assert code == 2 and err.count("\n") == 1 and "preprocessing.json: unreadable marker" in err


@pytest.mark.parametrize(("option", "value", "needle"), [
    ("--stall-timeout", "0", "--stall-timeout must be a positive number"),
    ("--stall-timeout", "nan", "--stall-timeout must be a positive number"),
    ("--retries", "-1", "--retries must be 0 or more"),
])
def test_download_settings_are_checked_before_fetching(tmp_path, capsys, option, value, needle):
    code, _, err = run(["download", "bidmc", "--raw-root", str(tmp_path), option, value], capsys)
    assert code == 2 and err.count("\n") == 1 and needle in err
    assert not (tmp_path / "bidmc").exists()


def test_download_force_reaches_the_client(tmp_path, capsys, monkeypatch):
    seen = {}

    def fake_download(keys, raw_root, **kw):
        seen.update(kw, keys=keys)
        return {key: "ok: 0 fetched, 0 already present" for key in keys}

    monkeypatch.setattr("ppgbench_pl.data.download.download", fake_download)
    code, out, _ = run(["download", "bidmc", "--raw-root", str(tmp_path), "--force", "--stall-timeout", "5",
                        "--retries", "0", "--no-progress"], capsys)
    assert code == 0 and "bidmc: ok" in out
    assert seen == {"keys": ["bidmc"], "physionet_user": None, "progress": False, "force": True,
                    "stall_s": 5.0, "retries": 0}
