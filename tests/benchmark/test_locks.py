"""Job locks: a dead holder's lock is taken over at once; a stuck holder is named while others wait."""

import multiprocessing
import os
import time

import pytest

from ppgbench_pl.locks import LockBusy, file_lock, lock_holder


def _hold(path, ready, seconds):
    with file_lock(path):
        ready.set()
        time.sleep(seconds)


def _hold_and_die(path, ready):
    with file_lock(path):
        ready.set()
        os._exit(1)  # killed while holding the lock: no cleanup runs


def test_a_dead_holders_lock_is_taken_over_at_once(tmp_path):
    path = tmp_path / "job.lock"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_and_die, args=(path, ready))
    proc.start()
    assert ready.wait(10)
    proc.join(10)
    start = time.monotonic()
    with file_lock(path, blocking=False):
        pass
    assert time.monotonic() - start < 1.0


def test_a_stuck_holder_is_named_with_its_pid_and_age(tmp_path, capsys):
    path = tmp_path / "job.lock"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold, args=(path, ready, 1.5))
    proc.start()
    try:
        assert ready.wait(10)
        assert lock_holder(path).startswith(f"pid {proc.pid} on ")
        with pytest.raises(LockBusy, match=f"held by pid {proc.pid}"):
            with file_lock(path, blocking=False):
                pass
        with file_lock(path, notice_every_s=0.2):  # waits, says who holds it, then gets it
            pass
    finally:
        proc.join(10)
    err = capsys.readouterr().err
    assert f"waiting for the lock {path}: held by pid {proc.pid}" in err
