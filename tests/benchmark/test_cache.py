"""The embedding cache: one miss per (encoder, dataset, rate), hits for every task and regime, one writer."""

from __future__ import annotations

import hashlib
import json
import threading
import time

import numpy as np

from ppgbench_pl.benchmark.cache import EmbeddingCache
from tests.benchmark.helpers import CNN, HALF, LINEAR, CountingCNN, run, suite_config, write_config

COUNTING = {"class_path": "tests.benchmark.helpers.CountingCNN"}


def test_each_window_goes_through_each_encoder_once(tmp_path, bench_root):
    run_dir = tmp_path / "run"
    config = suite_config(bench_root, run_dir, encoders=[CNN, COUNTING], folds=[0], regimes=[LINEAR])
    CountingCNN.windows_seen = 0
    assert run(["--config", str(write_config(tmp_path / "a.yaml", config))]) == 0
    status = json.loads((run_dir / "status.json").read_text())
    # 2 encoders (64 and 32 Hz) x 2 tasks x 1 seed x 1 fold: one miss per encoder and rate, then hits only.
    assert status["cache"] == {"misses": 2, "hits": 4}
    entries = sorted(run_dir.glob("embeddings/*.npy"))
    assert len(entries) == 2
    n_windows = 10 * 6  # subjects x windows of the tiny synthetic dataset
    assert CountingCNN.windows_seen == n_windows
    jobs = [json.loads(p.read_text()) for p in run_dir.glob("jobs/*/results.json")]
    assert [r["embedding_cache"] for r in jobs] == ["hit"] * 4  # the coordinator computed both entries first
    described = {json.loads(p.with_suffix(".json").read_text())["encoder"] for p in entries}
    assert described == {"small_cnn", "counting_cnn"}

    # More regimes and folds later in the same folder: no encoder pass; a hit for each of the two entries
    # when the coordinator checks them before fanning out, and one for every frozen job.
    config["trainer"]["callbacks"] = [LINEAR, HALF]
    config["data"]["init_args"]["folds"] = [0, 1]
    assert run(["--config", str(write_config(tmp_path / "b.yaml", config))]) == 0
    status = json.loads((run_dir / "status.json").read_text())
    assert status["cache"] == {"misses": 0, "hits": 2 + 12} and status["complete"]
    assert CountingCNN.windows_seen == n_windows


def test_concurrent_writers_compute_an_entry_once(tmp_path):
    calls = []

    def compute() -> np.ndarray:
        calls.append(1)
        time.sleep(0.3)  # long enough that every thread arrives while the first computes
        return np.arange(12, dtype=np.float32).reshape(4, 3)

    caches = [EmbeddingCache(tmp_path) for _ in range(4)]  # as if four processes
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda c=c: results.append(np.asarray(c.get_or_compute("k", compute))))
               for c in caches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert all(np.array_equal(r, results[0]) for r in results) and len(results) == 4
    assert sum(c.misses for c in caches) == 1 and sum(c.hits for c in caches) == 3
    assert not list(tmp_path.glob(".k.*"))  # no temporary file left behind


def test_key_changes_with_precision_and_data_not_with_speed_settings(tmp_path):
    from ppgbench_pl.encoders.prv import PublishedPRVEncoder

    cache = EmbeddingCache(tmp_path)
    (tmp_path / "d1" / "g").mkdir(parents=True)
    (tmp_path / "d1" / "g" / "ppg.npy").write_bytes(b"x" * 10)
    base = cache.key(PublishedPRVEncoder(n_jobs=1), tmp_path / "d1", 100.0)
    assert cache.key(PublishedPRVEncoder(n_jobs=4), tmp_path / "d1", 100.0) == base
    assert cache.key(PublishedPRVEncoder(n_jobs=1), tmp_path / "d1", 100.0, "32-true") == base
    assert cache.key(PublishedPRVEncoder(n_jobs=1), tmp_path / "d1", 100.0, "bf16-mixed") != base
    (tmp_path / "d1" / "g" / "ppg.npy").write_bytes(b"x" * 11)
    assert cache.key(PublishedPRVEncoder(n_jobs=1), tmp_path / "d1", 100.0) != base


def test_a_reader_never_removes_an_entry_its_writer_is_still_describing(tmp_path):
    """The array is in place but its description is not yet written: the writer holds the lock, so another
    process must wait for it rather than call the entry damaged and delete it (a CI race, stop 23)."""
    from ppgbench_pl.atomic_io import save_npy_atomic
    from ppgbench_pl.benchmark.cache_store import claim, entry_lock
    from ppgbench_pl.locks import file_lock

    writer, reader = EmbeddingCache(tmp_path), EmbeddingCache(tmp_path)
    claim(tmp_path)  # the writer's first use marked the folder
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    got: list[np.ndarray] = []

    def read() -> None:
        got.append(np.asarray(reader.get_or_compute("k", lambda: values * 0)))

    with file_lock(entry_lock(tmp_path, "k")):
        save_npy_atomic(writer.path("k"), values)  # what the writer has done so far
        thread = threading.Thread(target=read)
        thread.start()
        time.sleep(0.3)
        assert writer.path("k").exists(), "the reader deleted an entry that was being written"
        digest = hashlib.sha256(writer.path("k").read_bytes()).hexdigest()
        (tmp_path / "k.json").write_text(json.dumps({"ppgbench": "embedding cache entry", "key": "k", "shape": [2, 3],
                                                     "bytes": writer.path("k").stat().st_size, "sha256": digest}))
    thread.join(10)
    np.testing.assert_array_equal(got[0], values)  # the writer's entry, not a recomputation
