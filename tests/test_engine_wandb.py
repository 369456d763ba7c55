"""W&B says what summary.csv says (issue 11, items 4 and 5), read back from the offline run files.

One W&B run per (model, task, regime) cell and per constant-baseline row: its summary holds only the cell's
aggregates, equal to its summary.csv row, per-fold values are in its history; its config is flat scalars
beside the structured dict, grouped by ``<task>/<regime>``, typed by regime and tagged with task, regime,
dataset and budget; a rerun that changes the cell resumes the same W&B run id; every file goes under
``--output_dir``.
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
    out: dict[str, Any] = {"summary": {}, "config": {}, "history": []}
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
        elif kind == "history":
            out["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                   for i in record.history.item})
    return out


def cell_runs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The latest offline run of each W&B run name (a resumed run has one folder per resume)."""
    out: dict[str, dict[str, Any]] = {}
    for folder in offline_runs(run_dir):
        logged = read_offline_run(folder)
        out[logged["name"]] = logged
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

    folders = offline_runs(run_dir)  # one cell (small_cnn x synthetic-hr x linear) and its constant baseline
    runs = cell_runs(run_dir)
    assert len(folders) == 2 and set(runs) == {"small_cnn/synthetic-hr/linear", "constant/synthetic-hr/linear"}
    logged = runs["small_cnn/synthetic-hr/linear"]
    (folder,) = [f for f in folders if read_offline_run(f)["name"] == logged["name"]]
    row = pd.read_csv(run_dir / "summary.csv").set_index("model").loc["small_cnn"]
    assert logged["summary"]["mean"] == pytest.approx(row["mean"], rel=1e-12)
    assert logged["summary"]["n_folds"] == row["n_folds"] == 2 and logged["summary"]["n_seeds"] == 1
    assert logged["config"]["metric"] == row["metric"] == "mae" and logged["config"]["unit"] == "bpm"
    assert logged["group"] == "synthetic-hr/linear" and {"synthetic-hr", "linear", "synthetic", "published"} <= \
        set(logged["tags"])
    assert logged["job_type"] == "linear" and logged["name"] == "small_cnn/synthetic-hr/linear"
    structured = logged["config"]["benchmark"]
    assert isinstance(structured, dict) and structured["data"]["init_args"]["folds"] == [0, 1]
    assert logged["config"]["task"] == "synthetic-hr" and logged["config"]["regime"] == "linear"

    # Nothing new: nothing logged again. One more fold: the same W&B run id, the new summary row.
    assert run(["--config", str(path)], "fit") == 0
    assert offline_runs(run_dir) == folders
    assert run(["--config", str(path), "--data.init_args.folds", "[0, 1, 2]"], "fit") == 0
    runs = [r for f in offline_runs(run_dir) if (r := read_offline_run(f))["name"] == logged["name"]]
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


#: Keys W&B itself adds to every summary.
WANDB_OWN = ("_runtime", "_step", "_timestamp", "_wandb")


def test_summaries_hold_only_aggregates_equal_to_summary_csv(tmp_path, engine_root, monkeypatch):
    """Read back with the offline run files: every summary key is an aggregate and equals summary.csv; each
    fold's value is in the history, not the summary; the constant baseline has its run; the API defaults
    to the same W&B setting as the command line."""
    from ppgbench_pl.api import build_config
    from ppgbench_pl.benchmark.setup import RunSettings
    from ppgbench_pl.benchmark.tracking import AGGREGATES

    assert "wandb" not in build_config("small_cnn", dataset="synthetic") and RunSettings("x", {}).wandb == "group"
    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1],
                          seeds=[42, 43], data={"synthetic_windows": 4}, wandb="group")
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 0
    summary = pd.read_csv(run_dir / "summary.csv")
    folds = {(r["seed"], r["fold"]): r for r in (json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json"))
             if r["model"] == "small_cnn"}
    runs = cell_runs(run_dir)
    assert len(runs) == len(summary) == 2  # small_cnn and its constant baseline
    for row in summary.to_dict("records"):
        logged = runs[f"{row['model']}/{row['task']}/{row['regime']}"]
        keys = {k for k in logged["summary"] if not k.startswith(WANDB_OWN)}
        assert keys <= set(AGGREGATES) and {"mean", "ci95", "n_seeds", "n_folds"} <= keys, keys
        for key in keys:  # every logged key equals summary.csv
            assert logged["summary"][key] == pytest.approx(row[key], rel=1e-12), key
        assert logged["group"] == "synthetic-hr/linear" and logged["job_type"] == "linear"
        assert ("baseline" in logged["tags"]) == row["model"].startswith("constant")
        steps = [h for h in logged["history"] if "test/mae" in h]
        assert sorted((h["seed"], h["fold"]) for h in steps) == sorted(folds)
        expected = {k: (r["baseline"]["mae"] if row["model"].startswith("constant")
                        else sum(x["metrics"]["mae"] for x in r["results"]) / len(r["results"]))
                    for k, r in folds.items()}
        for h in steps:
            assert h["test/mae"] == pytest.approx(expected[(h["seed"], h["fold"])], rel=1e-9)


FOREST_DEEP5 = {"class_path": "ppgbench_pl.regimes.RandomForestRegime",
                "init_args": {"backend": "sklearn", "max_depth": [5], "n_jobs": 1}}


def test_the_records_labels_reach_summary_csv_and_every_wandb_run(tmp_path, engine_root, monkeypatch):
    """A setting off the published protocol (max_depth [5]) is in every record, its summary.csv row and the
    cell's W&B run (flat config and a tag), beside the backend that ran, the code version and the overlap
    flag; the per-job runs carry the same labels. Before, W&B had none of them outside the nested config."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[FOREST_DEEP5], tasks=["synthetic-hr"], folds=[0, 1],
                          data={"synthetic_windows": 4}, wandb="per-job")
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 0
    recs = [json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json")]
    assert len(recs) == 2 and all(r["deviations"] == ["max_depth=[5]"] and r["backend"] == "sklearn" for r in recs)
    row = pd.read_csv(run_dir / "summary.csv", keep_default_na=False).set_index("model").loc["small_cnn"]
    assert row["deviations"] == "max_depth=[5]"
    runs = [read_offline_run(f) for f in offline_runs(run_dir)]
    mine = [r for r in runs if r["config"].get("model") == "small_cnn"]
    assert len(mine) == 3  # the cell's run and one per job
    for logged in mine:
        cfg = logged["config"]
        assert cfg["backend"] == "sklearn" and cfg["deviations"] == "max_depth=[5]", cfg
        assert cfg["code_version"] == row["code_version"] and cfg["pretraining_overlap"] == row["pretraining_overlap"]
        assert {"backend:sklearn", "deviations:max_depth=[5]"} <= set(logged["tags"]), logged["tags"]


def test_a_damaged_record_leaves_its_cell_out_of_wandb_not_the_other_cells(tmp_path, engine_root, monkeypatch):
    """An ``ok`` record the summary refuses (left by a rerun that failed) is left out of W&B with a warning;
    the other cells are still logged. Before, it raised inside the tracker and turned W&B off for the run."""
    import warnings as warnings_module

    from ppgbench_pl.benchmark.tracking import CellTracker

    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr", "synthetic-age"],
                          folds=[0], data={"synthetic_windows": 4}, wandb="off")
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 0
    recs = {p: json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json")}
    hr = next(p for p, r in recs.items() if r["task"] == "synthetic-hr")
    damaged = {**recs[hr]}
    del damaged["fold"]
    hr.write_text(json.dumps(damaged))
    cells = {(r["model"], r["task"], r["regime"]): [r["job_id"]] for r in recs.values()}
    rows = pd.read_csv(run_dir / "summary.csv").to_dict("records")

    def summary_of(cell):
        return next((r for r in rows if (r["model"], r["task"], r["regime"]) == cell), None)

    tracker = CellTracker(run_dir, "ppgbench-tests", "uid", {}, cells, [], summary_of=summary_of)
    with warnings_module.catch_warnings(record=True) as caught:
        warnings_module.simplefilter("always")
        tracker.start()
    said = [str(w.message) for w in caught]
    assert tracker.enabled and any("damaged record(s) of small_cnn/synthetic-hr/linear left out" in s for s in said)
    names = {read_offline_run(f)["name"] for f in offline_runs(run_dir)}
    assert "small_cnn/synthetic-age/linear" in names and "small_cnn/synthetic-hr/linear" not in names


def test_an_unreachable_wandb_is_waited_for_once_per_run_not_once_per_job(tmp_path, engine_root, monkeypatch,
                                                                          capfd):
    """Online with a key but no server (a closed port on 127.0.0.1): the first W&B failure turns W&B off for
    the rest of the run, per-job runs in the workers included, so later jobs do not wait out the timeout."""
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "3")
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0, 1, 2],
                          data={"synthetic_windows": 4}, wandb="per-job")
    with pytest.warns(UserWarning) as caught:
        assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 0
    failures = [str(w.message) for w in caught if "W&B logging" in str(w.message)]
    assert len(failures) == 1 and "is off for the rest of this run" in failures[0], failures
    assert (run_dir / "summary.csv").exists()


def test_offline_because_nobody_is_logged_in_is_said_in_one_line(tmp_path, engine_root, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0],
                          data={"synthetic_windows": 4}, wandb="group")
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 0
    err = capsys.readouterr().err
    assert f"W&B: offline (not logged in): runs are written under {run_dir / 'wandb'}" in err
    assert offline_runs(run_dir)


def test_a_cell_run_is_updated_when_its_row_changes_with_the_same_records(tmp_path, engine_root, monkeypatch):
    """Another plan's records in the folder change a cell's summary row while this plan's records stay the
    same: the W&B run is logged again with the new row (the marker holds the row, not only the records)."""
    from ppgbench_pl.benchmark.tracking import CellTracker

    monkeypatch.setenv("WANDB_MODE", "offline")
    run_dir = tmp_path / "run"
    config = suite_config(engine_root, run_dir, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0],
                          data={"synthetic_windows": 4}, wandb="off")
    assert run(["--config", str(write_config(tmp_path / "config.yaml", config))], "fit") == 0
    recs = [json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json")]
    cell = ("small_cnn", "synthetic-hr", "linear")
    cells = {cell: [r["job_id"] for r in recs if r["model"] == "small_cnn"]}
    row = pd.read_csv(run_dir / "summary.csv").set_index("model").loc["small_cnn"].to_dict()
    answers = [{**row, "model": "small_cnn"}, {**row, "model": "small_cnn", "n_folds": 2, "mean": row["mean"] + 1}]
    for answer, logged in ((answers[0], 1), (answers[0], 0), (answers[1], 1)):
        tracker = CellTracker(run_dir, "ppgbench-tests", "uid", {}, cells, [], summary_of=lambda c, a=answer: a)
        tracker.start()
        assert tracker.logged == logged
