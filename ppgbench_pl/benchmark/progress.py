"""Progress over a run's jobs: a live bar with an ETA on a terminal, a sparse line log elsewhere.

On a terminal the bar (tqdm) refreshes as jobs finish and shows the ETA across the whole plan. In a log
file (CI, SLURM) a bar would write one refresh per job, so a line is printed only when another 5 % of
the plan is done or a minute has passed since the last line.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Jobs done out of a plan, shown on ``stream`` (stderr by default).

    Args:
        total: Jobs in the plan.
        initial: Jobs already done before this command.
        enabled: Show anything at all.
        stream: Where to write.
        every_fraction: Line-log step as a fraction of the plan.
        every_s: Line-log step in seconds.
    """

    def __init__(self, total: int, initial: int = 0, enabled: bool = True, stream: TextIO | None = None,
                 every_fraction: float = 0.05, every_s: float = 60.0) -> None:
        self.total, self.done, self.initial = total, initial, initial
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.every_fraction, self.every_s = every_fraction, every_s
        self.start = self.last_time = time.monotonic()
        self.last_done = initial
        self.bar: Any = None
        if self.enabled and self.stream.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc="jobs", unit="job", file=self.stream,
                            dynamic_ncols=True, mininterval=0.2)

    def eta(self) -> float | None:
        """Seconds left at the pace of this command's jobs so far (None before the first)."""
        ran = self.done - self.initial
        if ran <= 0:
            return None
        return (time.monotonic() - self.start) / ran * (self.total - self.done)

    def line(self) -> str:
        """The log line for the current state."""
        eta = self.eta()
        pct = 100.0 * self.done / max(self.total, 1)
        return (f"jobs {self.done}/{self.total} ({pct:.0f}%), {_clock(time.monotonic() - self.start)} elapsed"
                + (f", ETA {_clock(eta)}" if eta is not None else ""))

    def update(self, label: str = "") -> None:
        """One more job finished."""
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
            return
        now = time.monotonic()
        step = max(1, int(self.total * self.every_fraction))
        if self.done - self.last_done >= step or now - self.last_time >= self.every_s or self.done == self.total:
            print(self.line(), file=self.stream, flush=True)
            self.last_done, self.last_time = self.done, now

    def close(self) -> None:
        """Close the bar (the line log needs nothing)."""
        if self.bar is not None:
            self.bar.close()
