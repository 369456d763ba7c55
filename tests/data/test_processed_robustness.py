"""Damaged processed trees, atomic writes under the umask, concurrent and interrupted builds."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from ppgbench_pl.atomic_io import atomic_open, save_npy_atomic, write_json_atomic, write_text_atomic
from ppgbench_pl.data import processed_writer
from ppgbench_pl.data.datasets.bidmc import BidmcDataset
from ppgbench_pl.data.processed import MARKER, GroupData, ProcessedDataset
from ppgbench_pl.data.processed_writer import MarkerMismatch, clean_abandoned_builds, open_writer
from ppgbench_pl.data.synthetic import SyntheticPPGDataset
from ppgbench_pl.data.task_data import load_windows
from ppgbench_pl.errors import DataError
from tests.data.bidmc import make_data as bidmc_data


@pytest.fixture
def umask():
    """Set the umask for one test and restore it."""
    saved = os.umask(0o022)
    os.umask(saved)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(saved)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def tree(tmp_path):
    return SyntheticPPGDataset(n_subjects=5, windows_per_subject=3, seed=1).build(tmp_path, 32)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_respect_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    write_json_atomic(tmp_path / "a.json", {"x": float("nan")})
    with atomic_open(tmp_path / "b.bin") as handle:
        handle.write(b"abc")
    write_text_atomic(tmp_path / "sub" / "c.txt", "é")
    save_npy_atomic(tmp_path / "d.npy", np.arange(3))
    for name in ("a.json", "b.bin", "sub/c.txt", "d.npy"):
        assert mode(tmp_path / name) == expected, name
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": None}
    assert (tmp_path / "sub" / "c.txt").read_text() == "é"
    np.testing.assert_array_equal(np.load(tmp_path / "d.npy"), np.arange(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.bin", "d.npy", "sub"]  # no temp left


def test_atomic_write_failure_leaves_the_old_file(tmp_path):
    write_json_atomic(tmp_path / "a.json", {"v": 1})
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "a.json", {"v": object()})
    assert json.loads((tmp_path / "a.json").read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_built_tree_is_readable_per_umask(tmp_path, umask):
    umask(0o022)
    path = SyntheticPPGDataset(n_subjects=5, windows_per_subject=2, seed=1).build(tmp_path, 32)
    assert mode(path) == 0o755 and mode(path / "S01") == 0o755
    assert mode(path / MARKER) == 0o644 and mode(path / "S01" / "ppg.npy") == 0o644


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda g: np.save(g / "ppg.npy", np.full((3, 320), np.nan, np.float32)), "3 of 3 windows hold NaN"),
        (lambda g: _poke(g, 1, np.inf), "1 of 3 windows hold NaN or inf (first: window 1)"),
        (lambda g: np.save(g / "ppg.npy", np.zeros((3, 320), np.int64)), "float windows, got dtype int64"),
        (lambda g: np.save(g / "ppg.npy", np.zeros((3, 2, 320), np.float32)), "got shape (3, 2, 320)"),
        (lambda g: np.save(g / "ppg.npy", np.zeros((0, 320), np.float32)), "got shape (0, 320)"),
        (lambda g: (g / "ppg.npy").write_bytes(b"\x93NUMPY garbage"), "unreadable .npy file"),
    ],
)
def test_damaged_windows_are_one_line_naming_dataset_group_and_file(tree, damage, expected):
    damage(tree / "S02")
    with pytest.raises(DataError) as err:
        load_windows(ProcessedDataset(tree))
    message = str(err.value)
    assert "\n" not in message and expected in message
    assert "S02" in message and "ppg.npy" in message and "Synthetic" in message


def _poke(group: Path, window: int, value: float) -> None:
    ppg = np.load(group / "ppg.npy")
    ppg[window, 5] = value
    np.save(group / "ppg.npy", ppg)


@pytest.mark.parametrize("value", ["NaN", "null", '"a"', "Infinity"])
def test_non_finite_stats_are_refused(tree, value):
    stats_path = tree / "S03" / "stats.json"
    text = stats_path.read_text()
    stats = json.loads(text)
    stats_path.write_text(text.replace(json.dumps(stats["ppg_std"]), value, 1))
    with pytest.raises(DataError, match=r"group S03: .*stats.json: 'ppg_std' is .*not a finite number"):
        load_windows(ProcessedDataset(tree))


def test_group_in_marker_without_ppg_is_an_error(tree):
    (tree / "S02" / "ppg.npy").unlink()
    with pytest.raises(DataError, match=r"group S02: .*S02/ppg.npy not found, but preprocessing.json lists"):
        ProcessedDataset(tree).groups  # noqa: B018


def test_group_not_in_marker_is_an_error(tree):
    (tree / "S09").mkdir()
    np.save(tree / "S09" / "ppg.npy", np.zeros((2, 320), np.float32))
    with pytest.raises(DataError, match="S09/ppg.npy: group not listed in preprocessing.json"):
        ProcessedDataset(tree).groups  # noqa: B018


def test_tree_without_group_list_is_read_from_disk(tree):
    marker = json.loads((tree / MARKER).read_text())
    del marker["groups"]
    (tree / MARKER).write_text(json.dumps(marker))
    (tree / "S02" / "ppg.npy").unlink()  # the published tooling's trees carry no list to check against
    assert ProcessedDataset(tree).groups == ["S01", "S03", "S04", "S05"]


def test_corrupt_marker_is_one_line(tree):
    (tree / MARKER).write_text("{not json")
    with pytest.raises(DataError, match="preprocessing.json: unreadable marker"):
        ProcessedDataset(tree).groups  # noqa: B018


def test_content_digest_follows_the_windows(tmp_path, tree):
    first = load_windows(ProcessedDataset(tree))
    digest = first.content_digest()
    assert len(digest) == 64 and first.content_digest() == digest
    again = SyntheticPPGDataset(n_subjects=5, windows_per_subject=3, seed=1).build(tmp_path / "again", 32)
    assert load_windows(ProcessedDataset(again)).content_digest() == digest  # same content, other folder
    _poke(tree / "S01", 0, 0.5)
    assert load_windows(ProcessedDataset(tree)).content_digest() != digest
    stats = json.loads((tree / "S04" / "stats.json").read_text())
    stats["ppg_mean"] += 1
    (tree / "S04" / "stats.json").write_text(json.dumps(stats))
    changed = load_windows(ProcessedDataset(again))
    changed.ppg_mean = changed.ppg_mean + 1
    assert changed.content_digest() != digest


def _group(name: str, value: float = 1.0) -> GroupData:
    ppg = np.random.default_rng(0).normal(size=(2, 8)).astype(np.float32) + value
    return GroupData(name=name, ppg=ppg, targets={}, stats={"subject": name, "ppg_mean": 0.0, "ppg_std": 1.0},
                     dropped={"flat": 1})


def test_second_of_two_overlapping_builds_is_a_noop(tmp_path):
    final = tmp_path / "fs_8" / "Demo"
    marker = {"settings": {"name": "demo"}}
    with open_writer(final, marker) as outer:
        outer.add_group(_group("A"))
        with open_writer(final, marker) as inner:
            inner.add_group(_group("A"))
        first = (final / "A" / "ppg.npy").read_bytes()
    assert (final / "A" / "ppg.npy").read_bytes() == first
    assert json.loads((final / MARKER).read_text())["dropped_windows"] == {"A": {"flat": 1}}
    assert [p.name for p in final.parent.iterdir()] == ["Demo"]  # no build folder or lock left


def test_overlapping_build_with_other_marker_is_refused(tmp_path):
    final = tmp_path / "fs_8" / "Demo"
    with pytest.raises(MarkerMismatch, match="made from other inputs"):
        with open_writer(final, {"settings": {"name": "a"}}) as outer:
            outer.add_group(_group("A"))
            with open_writer(final, {"settings": {"name": "b"}}) as inner:
                inner.add_group(_group("A"))
    assert json.loads((final / MARKER).read_text())["settings"] == {"name": "b"}
    assert [p.name for p in final.parent.iterdir()] == ["Demo"]


def test_abandoned_build_folders_are_removed(tmp_path):
    final = tmp_path / "fs_8" / "Demo"
    final.parent.mkdir(parents=True)
    dead = final.parent / ".Demo.building-999999-abc"  # its process died: the lock file is free
    dead.mkdir()
    (dead / "x.npy").write_bytes(b"x")
    dead.with_name(dead.name + ".lock").write_text("")
    old = final.parent / ".Demo.building-old"  # an older version's folder, no lock, an hour old
    old.mkdir()
    os.utime(old, (0, 0))
    fresh = final.parent / ".Demo.building-fresh"  # just made by a live process about to lock it
    fresh.mkdir()
    with open_writer(final, {"settings": {}}) as writer:
        alive = writer.work_dir
        assert clean_abandoned_builds(final) == []  # a running build is never taken
        writer.add_group(_group("A"))
    assert not dead.exists() and not old.exists() and fresh.exists() and not alive.exists()
    assert sorted(p.name for p in final.parent.iterdir()) == [".Demo.building-fresh", "Demo"]


class _SlowBidmc(BidmcDataset):
    """Waits for the other process at the first group, so both are past the "already built?" check."""

    barrier = None

    def iter_groups(self, fs):
        for i, group in enumerate(super().iter_groups(fs)):
            if i == 0 and self.barrier is not None:
                self.barrier.wait(timeout=60)
            yield group


def _build_in_child(raw: str, out: str, barrier, results) -> None:
    _SlowBidmc.barrier = barrier
    try:
        results.put(("ok", str(_SlowBidmc(raw).build(out, 64))))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def test_two_concurrent_preprocess_processes_both_succeed(tmp_path):
    bidmc_data.make(tmp_path / "raw")
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(2), context.Queue()
    children = [context.Process(target=_build_in_child, args=(str(tmp_path / "raw"), str(tmp_path / "out"),
                                                              barrier, results)) for _ in range(2)]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=30)
    assert outcomes == [("ok", str(tmp_path / "out" / "fs_64" / "BIDMC"))] * 2, outcomes
    assert [p.name for p in (tmp_path / "out" / "fs_64").iterdir()] == ["BIDMC"]
    assert len(ProcessedDataset(tmp_path / "out" / "fs_64" / "BIDMC").groups) == 3


def test_marker_identity_ignores_what_the_writer_added(tmp_path):
    path = SyntheticPPGDataset(n_subjects=5, windows_per_subject=2, seed=1).build(tmp_path, 32)
    marker = json.loads((path / MARKER).read_text())
    assert set(processed_writer.WRITER_KEYS) <= set(marker)
    assert marker["n_windows"] == {f"S0{i}": 2 for i in range(1, 6)}
    identity = {k: v for k, v in marker.items() if k not in processed_writer.WRITER_KEYS}
    assert processed_writer.check_existing(path, identity)


@pytest.mark.parametrize("bad", ["ppg", "stats"])
def test_writer_never_writes_what_the_reader_refuses(tmp_path, bad):
    group = _group("A")
    if bad == "ppg":
        group.ppg[1, 3] = np.nan
    else:
        group.stats["ppg_std"] = float("nan")
    with pytest.raises(DataError, match="group A: "):
        with open_writer(tmp_path / "fs_8" / "Demo", {}) as writer:
            writer.add_group(group)
    assert not (tmp_path / "fs_8").exists()
