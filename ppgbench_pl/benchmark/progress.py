"""Progress over a run's jobs (a bar on a terminal, a line every 5 % or minute elsewhere), ETA from the estimate."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ppgbench_pl.hpo.search_events import EpochEvent

LINE_EVERY_S = 60.0


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


@dataclass
class PlanCost:
    """The pending jobs' estimate: seconds per job id, and the ``searched`` ones' ``trials`` and ``trial_epochs``."""

    job_seconds: dict[str, float] = field(default_factory=dict)
    searched: set[str] = field(default_factory=set)
    wall_seconds: float = 0.0
    trials: int = 0
    trial_epochs: float = 0.0


class Progress:
    """Jobs done (``initial`` before this command) of ``total``, shown on ``stream`` (stderr by default)."""

    def __init__(self, total: int, initial: int = 0, enabled: bool = True, stream: TextIO | None = None,
                 every_s: float = 60.0, cost: PlanCost | None = None) -> None:
        self.total, self.done, self.initial = total, initial, initial
        self.stream = stream or sys.stderr
        self.enabled, self.every_s = enabled and total > 0, every_s
        self.start = self.last_time = time.monotonic()
        self.last_done = initial
        self.cost = cost
        self.seconds_done = [0.0, 0.0]  # estimated seconds of the jobs finished by this command: others, searched
        self.trials_seen: dict[int, int] = {}  # search -> trials it had finished at its latest epoch
        self.trial_epochs = 0
        self.bar: Any = None
        if self.enabled and self.stream.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc="jobs", unit="job", file=self.stream,
                            dynamic_ncols=True, mininterval=0.2)
        self.listening = bool(self.enabled and cost is not None and cost.trials)
        if self.listening:  # a searched regime runs here: Optuna is loaded anyway (a linear fit never imports it)
            from ppgbench_pl.hpo.search_events import listen

            listen(self.on_epoch)

    @property
    def trials(self) -> int:
        """Trials finished by this command's searches so far."""
        return sum(self.trials_seen.values())

    def fraction(self) -> float:
        """Share of the pending work done, in estimated seconds: jobs done, and the searches' trial-epochs."""
        assert self.cost is not None
        total = sum(self.cost.job_seconds.values())
        if total <= 0:
            return 0.0
        others, searched = self.seconds_done
        if self.cost.trial_epochs:  # epochs heard from searches still running count before their jobs end
            share = sum(self.cost.job_seconds.get(j, 0.0) for j in self.cost.searched)
            searched = max(searched, share * min(self.trial_epochs / self.cost.trial_epochs, 1.0))
        return min((others + searched) / total, 1.0)

    def eta(self) -> float | None:
        """Seconds left: from the estimate until a job of this command finished, then at this command's pace."""
        elapsed, ran = time.monotonic() - self.start, self.done - self.initial
        if self.cost is not None and self.cost.job_seconds:
            done = self.fraction()
            if ran <= 0:
                return max(self.cost.wall_seconds * (1 - done), 0.0)
            return elapsed / done * (1 - done) if done > 0 else None
        if ran <= 0:
            return None
        return elapsed / ran * (self.total - self.done)

    def line(self) -> str:
        """The log line for the current state."""
        eta = self.eta()
        pct = 100.0 * self.done / max(self.total, 1)
        searched = ""
        if self.cost is not None and self.cost.trials:
            searched = (f", trials {self.trials}/{self.cost.trials}, trial-epochs {self.trial_epochs}"
                        f"/~{self.cost.trial_epochs:.0f}")
        return (f"jobs {self.done}/{self.total} ({pct:.0f}%){searched}, {_clock(time.monotonic() - self.start)} "
                "elapsed" + (f", ETA {_clock(eta)}" + (" (estimate)" if self.done == self.initial else "")
                             if eta is not None else ""))

    def on_epoch(self, event: EpochEvent) -> None:
        """A stack epoch of a search in this process: count its trial-epochs and trials; maybe show a line."""
        self.trial_epochs += event.trial_epochs
        self.trials_seen[event.search] = event.trials_done
        self.show(force=False)

    def update(self, label: str = "", job_id: str | None = None) -> None:
        """One more job finished (``job_id``: whose estimated seconds are now done)."""
        self.done += 1
        if self.cost is not None and job_id is not None:
            self.seconds_done[job_id in self.cost.searched] += self.cost.job_seconds.get(job_id, 0.0)
        if self.enabled and self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
            return
        self.show(force=self.done - self.last_done >= max(1, int(self.total * 0.05))  # a line every 5 % of the plan
                  or self.done == self.total)

    def show(self, force: bool) -> None:
        """Print the line when ``force`` or another ``every_s`` has passed (the bar: refresh its text)."""
        if not self.enabled:
            return
        if self.bar is not None:
            trials = self.cost.trials if self.cost is not None else 0
            self.bar.set_description_str(f"jobs (trials {self.trials}/{trials}, trial-epochs {self.trial_epochs})"
                                         if trials else "jobs", refresh=True)
            return
        now = time.monotonic()
        if force or now - self.last_time >= self.every_s:
            print(self.line(), file=self.stream, flush=True)
            self.last_done, self.last_time = self.done, now

    def close(self) -> None:
        """Close the bar and stop listening to searches."""
        if self.listening:
            from ppgbench_pl.hpo.search_events import unlisten

            unlisten(self.on_epoch)
        if self.bar is not None:
            self.bar.close()


def run_progress(suite: Any, plan: Sequence[Any], pending: Sequence[Any], initial: int, settings: Any) -> Progress:
    """The coordinator's progress display, with the pending jobs' estimate when it can be made (else jobs only)."""
    cost, enabled = None, bool(settings.progress)
    if enabled and pending:
        from ppgbench_pl.benchmark.cost_model import load_model
        from ppgbench_pl.benchmark.estimate import estimate_plan, wall_seconds
        from ppgbench_pl.errors import PPGBenchError

        with suppress(PPGBenchError):  # the pending jobs' estimate (seconds, the searched ones' trials and epochs)
            estimate = estimate_plan(suite, pending, settings.executor, load_model())
            cost = PlanCost(wall_seconds=wall_seconds(estimate))
            for pending_job, job in zip(pending, estimate.jobs, strict=True):
                cost.job_seconds[pending_job.job_id] = job.seconds
                if job.trials:
                    cost.searched.add(pending_job.job_id)
                    cost.trials += job.trials
                    cost.trial_epochs += job.trial_epochs
    return Progress(len(plan), initial, enabled=enabled, every_s=LINE_EVERY_S, cost=cost)
