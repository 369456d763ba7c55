"""The process executor's pool: ``spawn`` workers holding one job each; a dead one loses only it and is replaced."""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable, Generator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from ppgbench_pl.benchmark.worker import JobLost, JobOutcome, JobSpec, init_worker

Finished = tuple[JobSpec, JobOutcome | BaseException]


def serve(fn: Callable[[JobSpec], JobOutcome], conn: Connection, threads: int | None, gpu: int | None) -> None:
    """A worker's loop: run each spec received, send back its outcome (or the exception); ``None`` ends it."""
    init_worker(threads, gpu)
    while True:
        try:
            spec = conn.recv()
        except (EOFError, OSError):  # the coordinator went away
            return
        if spec is None:
            return
        try:
            reply: tuple[str, Any] = ("ok", fn(spec))
        except Exception as exc:  # noqa: BLE001 - sent back as a lost job
            reply = ("error", exc)
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an exception that does not pickle
            conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


class _Worker:
    """One worker process, its pipe and the spec it holds."""

    def __init__(self, context: Any, fn: Callable[[JobSpec], JobOutcome], threads: int | None,
                 gpu: int | None) -> None:
        self.gpu = gpu
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(fn, child, threads, gpu), daemon=True,
                                       name="ppgbench-worker")
        self.process.start()
        child.close()
        self.spec: JobSpec | None = None

    def give(self, spec: JobSpec) -> None:
        self.spec = spec
        self.conn.send(spec)

    def death(self) -> str:
        """Why the process ended, in words."""
        self.process.join(1.0)
        code = self.process.exitcode
        if code is not None and code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"

    def stop(self, now: bool) -> None:
        if not now and self.process.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(5.0)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5.0)
        self.conn.close()


def run_pool(fn: Callable[[JobSpec], JobOutcome], specs: Sequence[JobSpec], workers: int,
             threads: int | None, gpus: list[int] | None) -> Generator[Finished, None, None]:
    """Run ``fn`` on every spec in ``workers`` processes; yield ``(spec, outcome or exception)`` as they end."""
    context = multiprocessing.get_context("spawn")
    todo = deque(specs)
    pool = [_Worker(context, fn, threads, gpus[i % len(gpus)] if gpus else None)
            for i in range(min(workers, len(specs)))]
    for worker in pool:
        worker.give(todo.popleft())
    finished = False
    try:
        while any(w.spec is not None for w in pool):
            busy = {w.conn: w for w in pool if w.spec is not None}
            sentinels = {w.process.sentinel: w for w in busy.values()}
            for ready in wait([*busy, *sentinels]):
                worker = busy.get(ready) or sentinels[ready]  # type: ignore[call-overload]
                if worker.spec is None:  # pipe and sentinel of one worker both ready: handled
                    continue
                spec, result = worker.spec, _result(worker)
                worker.spec = None
                if isinstance(result, JobLost) and todo:  # the process is gone: a new one takes its place
                    pool[pool.index(worker)] = worker = _Worker(context, fn, threads, worker.gpu)
                if todo and worker.process.is_alive():
                    worker.give(todo.popleft())
                yield spec, result
        finished = True
    finally:
        for worker in pool:  # interrupted (SIGINT/SIGTERM): stop the workers now; their jobs rerun next time
            worker.stop(now=not finished)


def _result(worker: _Worker) -> JobOutcome | BaseException:
    """The held job's outcome, its exception, or :class:`JobLost` when the worker died holding it."""
    try:
        if worker.conn.poll():
            _, value = worker.conn.recv()  # ("ok", outcome) or ("error", exception)
            return value  # type: ignore[no-any-return]
    except (EOFError, OSError):
        pass
    assert worker.spec is not None
    return JobLost(f"process-pool worker pid {worker.process.pid} {worker.death()} while running it")
