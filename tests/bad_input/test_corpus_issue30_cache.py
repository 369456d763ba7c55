"""The bad-input corpus, issue 30 items 3 and 5: a shared cache trusts and deletes only its own entries.

``cache clear`` pointed at a data folder deletes nothing; a cache location that is a file is refused before
anything is written; a cache from before markers is adopted; a forged entry (values and SHA-256 rewritten)
is found by the spot check, named and recomputed, and the run's results equal an unforged run's; a run
whose named task is not evaluable in every fold ends non-zero with ``complete: false``. The rules and the
tiny suite are those of :mod:`tests.bad_input.test_corpus`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ppgbench_pl.benchmark.cache import EmbeddingCache
from ppgbench_pl.benchmark.cache_store import MARKER, entries, evict
from tests.bad_input.test_corpus import _one_class, check, copy_root, copy_run, fit, make_base
from tests.benchmark.helpers import VOLATILE, record_files, records, status, tree
from tests.cli_helpers import run_cli


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """This module's own one-job run: tests/bad_input/test_corpus.py damages its shared cache on purpose."""
    return make_base(tmp_path_factory, "bad_input30")


def _subject(root: Path) -> Path:
    """A processed subject folder: ppg.npy and its label files."""
    return sorted((root / "fs_64" / "Synthetic").glob("S*"))[0]


def _shared_cache(run_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the cache a run used, and its one entry there."""
    entry = sorted((run_dir / "embeddings").glob("*.npy"))[0].resolve()
    copy = tmp_path / "cache"
    shutil.copytree(entry.parent, copy)
    return copy, copy / entry.name


def _results(run_dir: Path) -> dict[str, object]:
    """What each job computed (not when, where or from which cache state), and its prediction arrays."""
    out: dict[str, object] = {}
    for jid, record in records(run_dir).items():
        out[jid] = {k: v for k, v in record.items() if k not in (*VOLATILE, "embedding_cache")}
        for path in sorted((run_dir / "jobs" / jid).glob("predictions*.npz")):
            with np.load(path) as arrays:
                out[f"{jid}/{path.name}"] = {k: arrays[k].tolist() for k in arrays.files}
    return out


# -- the cache deletes only its own entries -------------------------------------------------------------------
@pytest.mark.parametrize("how", ["flag", "env"])
def test_cache_clear_on_a_subject_folder_deletes_nothing(base, tmp_path, capsys, monkeypatch, how):
    subject = _subject(copy_root(base, tmp_path))
    before = tree(subject)
    assert {"ppg.npy", "hr.npy"} <= set(before)
    if how == "env":
        monkeypatch.setenv("PPGBENCH_CACHE_DIR", str(subject))
    args = ["--cache_dir", str(subject)] if how == "flag" else []
    for action in ("clear", "list"):
        check(run_cli(["cache", action, *args], capsys), 2,
              r"^ppgbench: error: (--cache_dir|\$PPGBENCH_CACHE_DIR)=.*S\d+: not a ppgbench embedding cache \(no "
              r"\.ppgbench-cache\.json, and it holds \w+\.npy, which ppgbench did not write\)")
    assert tree(subject) == before


def test_clear_and_eviction_touch_only_entries_that_name_themselves(tmp_path, capsys):
    cache = EmbeddingCache(tmp_path)
    cache.get_or_compute("k1", lambda: np.zeros((4, 3), dtype=np.float32), {"encoder": "enc"})
    assert (tmp_path / MARKER).exists()
    np.save(tmp_path / "mine.npy", np.ones(3))  # someone else's files in the marked folder
    (tmp_path / "mine.json").write_text(json.dumps({"sha256": "0" * 64, "shape": [3], "bytes": 1}))
    np.save(tmp_path / "other.npy", np.ones(3))
    assert [e["key"] for e in entries(tmp_path)] == ["k1"]
    assert evict(tmp_path, 0) == ["k1"]
    cache.get_or_compute("k2", lambda: np.zeros((4, 3), dtype=np.float32))
    code, out, err = run_cli(["cache", "clear", "--cache_dir", str(tmp_path)], capsys)
    assert code == 0 and "removed 1 entries" in out, err
    assert sorted(p.name for p in tmp_path.glob("*.npy")) == ["mine.npy", "other.npy"]


def test_clear_and_eviction_refuse_a_folder_without_the_marker(tmp_path, capsys):
    from ppgbench_pl.errors import ConfigError

    (tmp_path / "empty").mkdir()
    check(run_cli(["cache", "clear", "--cache_dir", str(tmp_path / "empty")], capsys), 2,
          r"empty: not a ppgbench embedding cache \(no \.ppgbench-cache\.json\); nothing was removed$")
    np.save(tmp_path / "data.npy", np.ones(3))
    with pytest.raises(ConfigError, match="nothing was removed"):
        evict(tmp_path, 0)
    assert (tmp_path / "data.npy").exists()


@pytest.mark.parametrize("how", ["flag", "env", "under_a_file"])
def test_a_cache_location_that_is_a_file_is_refused_before_anything_is_written(base, tmp_path, capsys,
                                                                               monkeypatch, how):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    where = taken / "cache" if how == "under_a_file" else taken
    args = ["--config", str(base["config"]), "--output_dir", str(tmp_path / "run")]
    if how == "env":
        monkeypatch.setenv("PPGBENCH_CACHE_DIR", str(where))
    else:
        args += ["--cache_dir", str(where)]
    check(fit(capsys, *args), 2, re.escape(str(where)) + r": is (a file|inside .*taken, which is a file); the "
                                                            r"embedding cache needs a folder$")
    assert not (tmp_path / "run").exists() and taken.read_text() == "not a folder"


# -- caches from before markers --------------------------------------------------------------------------------
def _unmark(cache: Path) -> None:
    """The cache as the previous version wrote it: no marker, descriptions without the ppgbench tag."""
    (cache / MARKER).unlink()
    for meta_path in cache.glob("*.json"):
        meta = json.loads(meta_path.read_text())
        meta.pop("ppgbench"), meta.pop("key")
        meta_path.write_text(json.dumps(meta))


def test_an_old_cache_of_recognisable_entries_is_adopted_and_used(base, tmp_path, capsys, monkeypatch):
    cache, entry = _shared_cache(base["run"], tmp_path)
    _unmark(cache)
    monkeypatch.setenv("PPGBENCH_CACHE_DIR", str(cache))
    out = tmp_path / "run"
    err = check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0,
                r"^embedding cache: adopted 1 entries written before cache markers in ")
    assert status(out)["cache"]["misses"] == 0  # used, not recomputed
    assert (cache / MARKER).exists() and [e["key"] for e in entries(cache)] == [entry.stem], err


def test_an_old_cache_holding_another_file_is_refused_untouched(base, tmp_path, capsys, monkeypatch):
    cache, _ = _shared_cache(base["run"], tmp_path)
    _unmark(cache)
    (cache / "notes.txt").write_text("mine")
    before = tree(cache)
    monkeypatch.setenv("PPGBENCH_CACHE_DIR", str(cache))
    check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(tmp_path / "run")), 2,
          r"\$PPGBENCH_CACHE_DIR=.*: not a ppgbench embedding cache \(.*holds notes\.txt")
    check(run_cli(["cache", "clear"], capsys), 2, r"holds notes\.txt")
    assert tree(cache) == before and not (tmp_path / "run").exists()


# -- a forged entry is found by the spot check -------------------------------------------------------------------
def _forge(entry: Path, values: np.ndarray) -> None:
    """Rewrite an entry's values and the size and SHA-256 of its description, as a forger with write access would."""
    np.save(entry, values.astype(np.float32))
    meta = json.loads(entry.with_suffix(".json").read_text())
    meta.update(bytes=entry.stat().st_size, sha256=hashlib.sha256(entry.read_bytes()).hexdigest())
    entry.with_suffix(".json").write_text(json.dumps(meta))


@pytest.mark.parametrize("forgery", ["constant", "shuffled_rows"])
def test_a_forged_entry_is_detected_named_recomputed_and_changes_no_result(base, tmp_path, capsys,
                                                                           monkeypatch, forgery):
    cache, entry = _shared_cache(base["run"], tmp_path)
    good = np.load(entry)
    forged = np.full_like(good, 0.5) if forgery == "constant" else good[np.random.default_rng(0).permutation(len(good))]
    _forge(entry, forged)
    monkeypatch.setenv("PPGBENCH_CACHE_DIR", str(cache))
    out = copy_run(base, tmp_path)
    shutil.rmtree(out / "jobs")  # the job runs again and reads the forged entry
    err = check(fit(capsys, "--config", str(base["config"]), "--output_dir", str(out)), 0,
                rf"^embedding cache: {re.escape(str(entry))} \(encoder small_cnn, dataset synthetic, fs 64.0\) is "
                rf"damaged \(window \d+ of {len(good)} differs from a fresh embedding by [\d.e+-]+ \(relative L2, "
                r"tolerance 0.01\): a forged or stale entry\); recomputing it$")
    assert status(out)["cache"]["misses"] == 1, err
    np.testing.assert_array_equal(np.load(entry), good)
    assert len(record_files(out)) == 1 and _results(out) == _results(base["run"])


def test_spot_check_tolerates_numerical_noise_and_not_a_changed_row():
    from ppgbench_pl.benchmark.cache import SpotCheck, check_rows, tolerance_for

    values = np.random.default_rng(1).standard_normal((50, 16)).astype(np.float32)
    noisy = SpotCheck(lambda rows: values[rows] * (1 + 1e-5), tolerance_for("32-true"))
    assert check_rows("k", values, noisy, seed=3) is None
    changed = values.copy()
    changed[:, 0] += 1.0  # every row off by more than the tolerance
    assert "differs from a fresh embedding" in str(check_rows("k", changed, noisy, seed=3))
    assert tolerance_for("bf16-mixed") > tolerance_for(32) and tolerance_for(None) == tolerance_for("32-true")
    wide = SpotCheck(lambda rows: np.zeros((len(rows), 8)))
    assert "wide where the encoder gives" in str(check_rows("k", values, wide, seed=3))


# -- a run that evaluated nothing ---------------------------------------------------------------------------------
def test_a_run_whose_named_task_is_not_evaluable_anywhere_fails_and_is_not_complete(base, tmp_path, capsys):
    root = copy_root(base, tmp_path)
    _one_class(root)
    out = tmp_path / "run"
    args = ["--config", str(base["config"]), "--output_dir", str(out), "--data.init_args.root", str(root),
            "--data.init_args.tasks", "[synthetic-activity]"]
    for _ in range(2):  # the rerun (everything already recorded as not evaluable) ends the same way
        check(fit(capsys, *args), 2, r"^ppgbench: error: nothing was evaluated: all 1 jobs of this command are not "
                                     r"evaluable")
        state = status(out)
        assert (state["complete"], state["completed"], state["not_evaluable"]) == (False, 0, 1), state
    assert os.path.exists(out / "summary.csv")
