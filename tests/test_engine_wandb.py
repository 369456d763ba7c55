"""W&B says what summary.csv says (issue 11, items 4 and 5), read back from the offline run files.

One W&B run per (model, task, regime) cell: its summary is the cell's summary.csv row, its config a
structured dict, grouped by model and tagged with task and regime; a rerun that changes the cell
resumes the same W&B run id; every file goes under ``--output_dir``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.benchmark.helpers import LINEAR, run, suite_config, write_config

BLOCK = 32768  # the .wandb file is a LevelDB-style log: 32 KiB blocks of (crc, length, type) chunks


@pytest.fixture(autouse=True)
def _fresh_wandb_session() -> Iterator[None]:
    """wandb keeps process-wide settings after its first init; reset them around each test."""
    import wandb

    wandb.teardown()
    yield
    wandb.teardown()


def wandb_records(path: Path) -> Iterator[Any]:
    """The protobuf records of an offline ``run-<id>.wandb`` file."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, pending = path.read_bytes(), 7, b""  # 7 bytes of file header
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:  # block padding
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (2, 3):  # first, middle
            pending += chunk
            continue
        record = pb.Record()  # type: ignore[attr-defined]
        record.ParseFromString(pending + chunk)  # full, or last
        pending = b""
        yield record


def read_offline_run(folder: Path) -> dict[str, Any]:
    """Id, group, tags, job type, config and final summary of one offline run folder."""
    (path,) = folder.glob("run-*.wandb")
    out: dict[str, Any] = {"summary": {}, "config": {}}
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            out.update(id=r.run_id, group=r.run_group, tags=list(r.tags), job_type=r.job_type,
                       name=r.display_name)
            out["config"].update({u.key: json.loads(u.value_json) for u in r.config.update})
        elif kind == "config":
            out["config"].update({u.key: json.loads(u.value_json) for u in record.config.update if u.key})
        elif kind == "summary":
            out["summary"].update({u.key: json.loads(u.value_json) for u in record.summary.update if u.key})
    return out


def offline_runs(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "wandb").glob("offline-run-*"))


def test_the_cell_run_mirrors_summary_csv_and_resumes_its_id(tmp_path, engine_root, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    run_dir = tmp_path / "out" / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1],
                          data={"synthetic_windows": 4}, wandb="group", wandb_project="ppgbench-tests")
    path = write_config(tmp_path / "config.yaml", config)
    assert run(["--config", str(path)], "fit") == 0

    (folder,) = offline_runs(run_dir)  # one cell: small_cnn x synthetic-hr x linear
    logged = read_offline_run(folder)
    row = pd.read_csv(run_dir / "summary.csv").set_index("model").loc["small_cnn"]
    assert logged["summary"]["mean"] == pytest.approx(row["mean"], rel=1e-12)
    assert logged["summary"]["n_folds"] == row["n_folds"] == 2 and logged["summary"]["n_seeds"] == 1
    assert logged["summary"]["metric"] == row["metric"] == "mae"
    assert logged["group"] == "small_cnn" and {"synthetic-hr", "linear"} <= set(logged["tags"])
    assert logged["job_type"] == "linear" and logged["name"] == "small_cnn/synthetic-hr/linear"
    structured = logged["config"]["benchmark"]
    assert isinstance(structured, dict) and structured["data"]["init_args"]["folds"] == [0, 1]
    assert logged["config"]["task"] == "synthetic-hr" and logged["config"]["regime"] == "linear"

    # Nothing new: nothing logged again. One more fold: the same W&B run id, the new summary row.
    assert run(["--config", str(path)], "fit") == 0
    assert offline_runs(run_dir) == [folder]
    assert run(["--config", str(path), "--data.init_args.folds", "[0, 1, 2]"], "fit") == 0
    runs = [read_offline_run(f) for f in offline_runs(run_dir)]
    assert {r["id"] for r in runs} == {logged["id"]}  # offline: one folder per resume, one W&B run
    row = pd.read_csv(run_dir / "summary.csv").set_index("model").loc["small_cnn"]
    latest = max(runs, key=lambda r: r["summary"]["n_folds"])
    assert latest["summary"]["n_folds"] == row["n_folds"] == 3
    assert latest["summary"]["mean"] == pytest.approx(row["mean"], rel=1e-12)

    assert list(cwd.iterdir()) == []  # nothing in the working directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "cwd", "out"]


def test_wandb_writes_nothing_outside_the_run_folder(tmp_path, engine_root, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    for name, value in {"HOME": home, "XDG_DATA_HOME": home / ".local/share",
                        "XDG_CACHE_HOME": home / ".cache", "XDG_CONFIG_HOME": home / ".config"}.items():
        monkeypatch.setenv(name, str(value))
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1],
                          data={"synthetic_windows": 4}, wandb="group")
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 0
    assert offline_runs(run_dir)
    # (library caches such as matplotlib's font list may appear; W&B's files must not)
    assert [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and "wandb" in str(p)] == []
