"""How a run meets SIGINT and SIGTERM: stop the job loop at once, then write the outputs undisturbed.

The coordinator raises :class:`Interrupted` in the main thread while jobs run, ignores both signals while
the summary and status are written, and exits 130 or 143 as a shell would report the signal.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any

#: Exit status of a run stopped by a signal (128 + signal number, as shells report it).
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
#: Signals received in this run: a job's cleanup code (a zip file closing) can mask the handler's exception.
SIGNALLED: list[int] = []


class Interrupted(BaseException):
    """The run was stopped by SIGINT or SIGTERM (a ``BaseException``, so no job swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM."""
        return SIGNAL_EXIT.get(signal.Signals(self.signum), 128 + self.signum)


def _raise(signum: int, frame: FrameType | None) -> None:
    SIGNALLED.append(signum)
    raise Interrupted(signum)


@contextmanager
def _handled(handler: Any) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` for the block (only the main thread can set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if handler is _raise:
        SIGNALLED.clear()
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def signals_interrupt() -> AbstractContextManager[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread for the duration of the block."""
    return _handled(_raise)


def signals_deferred() -> AbstractContextManager[None]:
    """Ignore SIGINT and SIGTERM while the final summary and status are written (a second Ctrl-C breaks nothing)."""
    return _handled(signal.SIG_IGN)


def import_output_libraries() -> None:
    """Import what the final summary needs before signals raise.

    A signal inside a C extension's first import half-initialises it, and the summary written after the
    signal then fails to import it (exit 1 and a traceback instead of 143).
    """
    import pandas  # noqa: F401
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401
