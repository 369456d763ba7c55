"""How many BLAS threads the non-neural probes get (one by default), and the per-job thread scope.

A probe's grid search is a long sequence of small dense products (scikit-learn's lbfgs on a few thousand
rows of a 64- to 1,024-d embedding). On a 2-vCPU machine OpenBLAS's second thread mostly spins: a
linear-regime run of 3,000 windows x 64-d cost 36-51 CPU seconds with the default two threads and 13-14
with one, with identical selections and metrics (tools/bench_engine.py, docs/performance.md). The limit
is scoped to the probe fit, so torch (encoders, embedding passes) keeps its own thread count.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_controller: Any = None
_modules_seen = -1


def _blas_controller() -> Any:
    """A threadpoolctl controller of the libraries loaded now.

    Building one scans the process's shared libraries (2-10 ms), so it is rebuilt only after an import
    (the only way a new BLAS can appear); using a built one costs about 20 microseconds.
    """
    global _controller, _modules_seen
    if _controller is None or len(sys.modules) != _modules_seen:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _modules_seen = len(sys.modules)
    return _controller


@contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` BLAS threads (``None``: leave the process's setting as it is)."""
    if n is None:
        yield
        return
    with _blas_controller().limit(limits=int(n), user_api="blas"):
        yield


def current_blas_threads() -> list[int]:
    """Thread counts of the BLAS libraries loaded now (for tests and diagnostics)."""
    from threadpoolctl import threadpool_info

    return [int(entry["num_threads"]) for entry in threadpool_info() if entry.get("user_api") == "blas"]


@contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads and ``n`` BLAS/OpenMP threads, then restore both.

    The thread policy's per-job scope (``benchmark/thread_policy.py``): a probe job runs at one thread and
    the embedding pass or a finetuning job in the same process keeps its own count. ``None`` leaves both.
    """
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        with _blas_controller().limit(limits=int(n)):
            yield
    finally:
        torch.set_num_threads(before)
