"""Several datasets in one run folder: unique job ids, one embedding cache, one summary, one identity."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pandas as pd

from ppgbench_pl.results.summary import summarise
from tests.benchmark.helpers import LINEAR, records, run, suite_config, write_config


def fake_bidmc(root, fs: int = 64) -> None:
    """A processed BIDMC tree made from the synthetic one (resp and spo2 targets derived from hr)."""
    src, dst = root / f"fs_{fs}" / "Synthetic", root / f"fs_{fs}" / "BIDMC"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    marker = json.loads((dst / "preprocessing.json").read_text())
    (dst / "preprocessing.json").write_text(json.dumps({**marker, "fake": "bidmc"}))  # another tree, another key
    for group in (p for p in dst.iterdir() if p.is_dir()):
        hr = np.load(group / "hr.npy")
        np.save(group / "resp.npy", (hr / 4).astype(np.float32))
        np.save(group / "spo2.npy", (100 - hr / 20).astype(np.float32))


def test_two_datasets_share_a_folder(tmp_path, reference):
    root = tmp_path / "data"
    shutil.copytree(reference["root"], root)  # the synthetic tree the reference built
    fake_bidmc(root)
    run_dir = tmp_path / "run"
    config = suite_config(root, run_dir, regimes=[LINEAR], datasets=["synthetic", "bidmc"],
                          tasks=["synthetic-hr", "bidmc-resp", "bidmc-spo2"])
    assert run(["--config", str(write_config(tmp_path / "c.yaml", config))]) == 0
    done = records(run_dir)
    assert len(done) == 3 * 2 and {r["task"] for r in done.values()} == {"synthetic-hr", "bidmc-resp", "bidmc-spo2"}
    cache = json.loads((run_dir / "status.json").read_text())["cache"]
    assert cache["misses"] == 2  # one entry per (encoder, dataset, rate), shared by both BIDMC tasks
    described = [json.loads(p.read_text()) for p in run_dir.glob("embeddings/*.json")]
    assert sorted(d["dataset"] for d in described) == ["bidmc", "synthetic"]
    summary = pd.read_csv(run_dir / "summary.csv")
    assert set(summary["task"]) == {"synthetic-hr", "bidmc-resp", "bidmc-spo2"}
    # from the full records on disk, through CSV as the file is (empty cells read back as NaN)
    expected = pd.read_csv(io.StringIO(summarise(done.values()).to_csv(index=False)))
    pd.testing.assert_frame_equal(summary, expected, check_dtype=False)
    identity = json.loads((run_dir / "run.json").read_text())["identity"]
    assert set(identity["datasets"]) == {"synthetic", "bidmc"}
