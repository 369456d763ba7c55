"""BLAS threads of the non-neural probes (one by default: a second one mostly spins, docs/performance.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

_controller: Any = None
_modules_seen = -1


def _blas_controller() -> Any:
    """A threadpoolctl controller of the libraries loaded now (rebuilt only after an import: building costs ms)."""
    global _controller, _modules_seen
    if _controller is None or len(sys.modules) != _modules_seen:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _modules_seen = len(sys.modules)
    return _controller


@contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` BLAS threads (``None``: leave the process's setting as it is)."""
    with nullcontext() if n is None else _blas_controller().limit(limits=int(n), user_api="blas"):
        yield


def current_blas_threads() -> list[int]:
    """Thread counts of the BLAS libraries loaded now (for tests and diagnostics)."""
    from threadpoolctl import threadpool_info

    return [int(entry["num_threads"]) for entry in threadpool_info() if entry.get("user_api") == "blas"]


@contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op and BLAS/OpenMP threads, then restore both (``None``: leave)."""
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
