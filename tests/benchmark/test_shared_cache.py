"""One embedding cache for every run folder: computed once, recorded per folder, capped by LRU, listed and cleared."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ppgbench_pl.benchmark.cache import EmbeddingCache
from ppgbench_pl.benchmark.cache_store import cache_root, entries, entry_lock, evict, size_cap_bytes
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import file_lock
from tests.benchmark.helpers import LINEAR, CountingCNN, run, suite_config, write_config
from tests.cli_helpers import run_cli

COUNTING = {"class_path": "tests.benchmark.helpers.CountingCNN"}


def test_two_run_folders_compute_an_encoders_embeddings_once(tmp_path, bench_root):
    CountingCNN.windows_seen = 0
    folders = [tmp_path / "run-a", tmp_path / "run-b"]
    for i, run_dir in enumerate(folders):
        config = suite_config(bench_root, run_dir, encoders=[COUNTING], folds=[0], regimes=[LINEAR])
        assert run(["--config", str(write_config(tmp_path / f"{i}.yaml", config))]) == 0
    assert CountingCNN.windows_seen == 10 * 6  # one encoder pass over the tiny dataset, for both folders
    statuses = [json.loads((d / "status.json").read_text())["cache"] for d in folders]
    assert statuses[0]["misses"] == 1 and statuses[1]["misses"] == 0
    root = cache_root()
    assert root == Path(os.environ["PPGBENCH_CACHE_DIR"]).resolve()  # the test's cache, never the user's
    used = [{p.stem: json.loads(p.read_text()) for p in d.glob("embeddings/*.json")} for d in folders]
    assert used[0].keys() == used[1].keys() and len(used[0]) == 1
    key, meta = next(iter(used[0].items()))
    assert meta["encoder"] == "counting_cnn" and meta["cache"] == str(root / f"{key}.npy")
    for d in folders:  # the folder's entry is a link to the shared one
        assert (d / "embeddings" / f"{key}.npy").resolve() == root / f"{key}.npy"


def test_cache_dir_moves_the_cache(tmp_path, bench_root):
    run_dir, moved = tmp_path / "run", tmp_path / "elsewhere"
    config = suite_config(bench_root, run_dir, encoders=[COUNTING], folds=[0], regimes=[LINEAR])
    assert run(["--config", str(write_config(tmp_path / "c.yaml", config)), "--cache_dir", str(moved)]) == 0
    assert len(list(moved.glob("*.npy"))) == 1 and not list(cache_root().glob("*.npy"))


def _fill(cache: EmbeddingCache, key: str, age: float) -> None:
    cache.get_or_compute(key, lambda: np.zeros((10, 10), dtype=np.float32))  # 528 bytes on disk
    os.utime(cache.root / f"{key}.json", (1e9 + age, 1e9 + age))


def test_size_cap_evicts_least_recently_used_and_spares_busy_entries(tmp_path):
    writer = EmbeddingCache(tmp_path)
    for age, key in enumerate(("old", "mid", "new")):
        _fill(writer, key, age)
    EmbeddingCache(tmp_path)._read("old")  # another process reads "old": it becomes the most recent
    assert evict(tmp_path, 1200) == ["mid"]
    with file_lock(entry_lock(tmp_path, "new")):  # "new" is being read or written elsewhere: kept
        assert evict(tmp_path, 600) == ["old"]
    assert [e["key"] for e in entries(tmp_path)] == ["new"]
    capped = EmbeddingCache(tmp_path, size_cap=1200)
    for key in ("a", "b", "c"):
        capped.get_or_compute(key, lambda: np.ones((10, 10), dtype=np.float32))
    assert sum(e["bytes"] for e in entries(tmp_path)) <= 1200 and (tmp_path / "c.npy").exists()
    with pytest.raises(ConfigError, match="more than the whole cache may hold"):
        capped.check_space(10_000, None, {"encoder": "x"})


def test_size_cap_settings_are_checked(monkeypatch):
    monkeypatch.setenv("PPGBENCH_CACHE_GB", "2.5")
    assert size_cap_bytes() == 2.5e9 and size_cap_bytes(1.0) == 1e9
    monkeypatch.setenv("PPGBENCH_CACHE_GB", "lots")
    with pytest.raises(ConfigError, match="PPGBENCH_CACHE_GB"):
        size_cap_bytes()
    with pytest.raises(ConfigError, match="--cache_size_gb must be positive"):
        size_cap_bytes(0)


def test_cache_list_and_clear_commands(tmp_path, capsys):
    cache = EmbeddingCache(tmp_path)
    cache.get_or_compute("k1", lambda: np.zeros((4, 3), dtype=np.float32), {"encoder": "enc", "dataset": "dalia",
                                                                           "fs": 64.0})
    code, out, err = run_cli(["cache", "list", "--cache_dir", str(tmp_path)], capsys)
    assert code == 0, err
    assert "1 entries" in out and "enc  dalia  64.0 Hz  4x3" in out
    code, out, _ = run_cli(["cache", "list", "--cache_dir", str(tmp_path), "--json"], capsys)
    assert json.loads(out)[0]["key"] == "k1"
    code, out, _ = run_cli(["cache", "clear", "--cache_dir", str(tmp_path)], capsys)
    assert code == 0 and "removed 1 entries" in out and not list(tmp_path.glob("*.npy"))
