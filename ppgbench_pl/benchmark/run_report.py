"""How a command ends: SIGINT/SIGTERM stop the job loop (exit 130/143), outputs written undisturbed, an account."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from ppgbench_pl.errors import DataError

#: Signals received in this run: a job's cleanup code (a zip file closing) can mask the handler's exception.
SIGNALLED: list[int] = []


class Interrupted(BaseException):
    """The run was stopped by SIGINT or SIGTERM (a ``BaseException``, so no job swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum  # as shells report it: 130 for SIGINT, 143 for SIGTERM


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


#: SIGINT and SIGTERM raise :class:`Interrupted` in the main thread for the duration of the block.
signals_interrupt = partial(_handled, _raise)
#: Ignore SIGINT and SIGTERM while the final summary and status are written (a second Ctrl-C breaks nothing).
signals_deferred = partial(_handled, signal.SIG_IGN)


def import_output_libraries() -> None:
    """Import what the final summary needs before signals raise (a signal inside a first import half-initialises it)."""
    import pandas  # noqa: F401
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401


@dataclass
class RunReport:
    """What one command did (this command's plan) and where the folder stands."""

    planned: int
    completed: int
    skipped: int
    failed: list[str] = field(default_factory=list)
    failed_ids: set[str] = field(default_factory=set)
    not_evaluable: int = 0
    summary_path: Path | None = None
    cache: dict[str, int] = field(default_factory=dict)
    interrupted: int | None = None


def end_of_command(report: RunReport) -> RunReport:
    """The report, its records written; says how an interrupted run resumes, refuses one that evaluated nothing."""
    if report.interrupted is not None:
        print(f"interrupted after {report.completed + report.skipped} of {report.planned} jobs; "
              "run the same command to resume", file=sys.stderr)
    elif report.planned and report.not_evaluable == report.planned:
        raise DataError(f"nothing was evaluated: all {report.planned} jobs of this command are not evaluable (listed "
                        "above; status.json lists them under not_evaluable_jobs)")
    return report


def print_report(report: RunReport, output_dir: Path) -> None:
    """A short account of the run on stdout, failures on stderr."""
    import pandas as pd

    if report.summary_path is not None and report.summary_path.exists():
        table = pd.read_csv(report.summary_path)
        table = table.fillna({c: "" for c in ("unit", "budget") if c in table.columns})
        if len(table):
            cols = [c for c in ("model", "task", "regime", "metric", "unit", "mean", "ci_low", "ci_high", "n_seeds",
                                "n_folds", "budget") if c in table.columns]
            print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    evaluable = f", {report.not_evaluable} not evaluable" if report.not_evaluable else ""
    print(f"{report.completed} jobs run, {report.skipped} already done{evaluable}, {len(report.failed)} failed "
          f"of {report.planned}; results in {output_dir}")
    for line in report.failed[:20]:
        print(f"failed: {line}", file=sys.stderr)
    if len(report.failed) > 20:
        print(f"... and {len(report.failed) - 20} more failures (see {output_dir}/jobs/*/results.json)",
              file=sys.stderr)
