"""The plan: every (model, task, regime, seed, outer fold) job, in the published order (ids name the dataset)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ppgbench_pl.data.registry import TaskSpec
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.base import Regime
from ppgbench_pl.regimes.search_seeds import describe_search_seeds
from ppgbench_pl.results.records import job_id


@dataclass(frozen=True)
class EncoderInfo:
    """What planning needs to know about an encoder, without building it (no weights are read)."""

    name: str
    sampling_rate: float
    trainable: bool = True


@dataclass(frozen=True)
class Job:
    """One outer evaluation; ``model`` indexes the run's encoder list."""

    model: int
    model_name: str
    task: TaskSpec
    regime: Regime
    seed: int
    fold: int

    @property
    def job_id(self) -> str:
        """Stable id (PROTOCOL.md 7.4), also the record folder name."""
        return job_id(self.model_name, self.task.name, self.regime.name, self.seed, self.fold)

    @property
    def cell(self) -> tuple[str, str, str]:
        """The (model, task, regime) cell of the summary this job contributes a fold to."""
        return self.model_name, self.task.name, self.regime.name


def check_unique(kind: str, names: Sequence[str]) -> None:
    """Encoder and regime names must be unique (their job ids would collide), named in one line."""
    twice = sorted(n for n, c in Counter(names).items() if c > 1)
    if twice:
        raise ConfigError(f"{kind} names must be unique, got {', '.join(twice)} more than once "
                          "(give one of them another name: init_args.name)")


def build_plan(encoders: Sequence[Any], tasks: Sequence[TaskSpec], regimes: Sequence[Regime],
               seeds: Sequence[int], folds: Sequence[int]) -> list[Job]:
    """Jobs ordered model -> task -> seed -> fold -> regime (``encoders`` built, or :class:`EncoderInfo` stand-ins)."""
    check_unique("encoder", [e.name for e in encoders])
    check_unique("regime", [r.name for r in regimes])
    return [
        Job(m, encoder.name, task, regime, seed, fold)
        for m, encoder in enumerate(encoders)
        for task in tasks
        for seed in seeds
        for fold in folds
        for regime in regimes
        if regime.applies_to(task, encoder)
    ]


def describe_plan(jobs: Sequence[Job], done: Collection[str] = ()) -> str:
    """A table of job counts per model and regime, with totals and what is already done."""
    models = list(dict.fromkeys(j.model_name for j in jobs))
    regimes = list(dict.fromkeys(j.regime.name for j in jobs))
    counts = Counter((j.model_name, j.regime.name) for j in jobs)
    width = max([len("model"), len("total"), *map(len, models)])
    cols = [max(len(r), 6) for r in regimes]
    head = f"{'model':<{width}}  " + "  ".join(f"{r:>{c}}" for r, c in zip(regimes, cols, strict=True)) + "   total"
    lines = [head]
    for m in models:
        cells = "  ".join(f"{counts[(m, r)]:>{c}}" for r, c in zip(regimes, cols, strict=True))
        lines.append(f"{m:<{width}}  {cells}  {sum(counts[(m, r)] for r in regimes):>6}")
    totals = "  ".join(f"{sum(counts[(m, r)] for m in models):>{c}}" for r, c in zip(regimes, cols, strict=True))
    lines.append(f"{'total':<{width}}  {totals}  {len(jobs):>6}")
    tasks = {r: len({j.task.name for j in jobs if j.regime.name == r}) for r in regimes}
    datasets = ", ".join(dict.fromkeys(j.task.dataset for j in jobs))
    lines.append(f"tasks per regime: {', '.join(f'{r} {n}' for r, n in tasks.items())}; datasets: {datasets}; "
                 f"seeds {sorted({j.seed for j in jobs})}; folds {sorted({j.fold for j in jobs})}")
    n_done = sum(j.job_id in done for j in jobs)
    lines.append(f"{len(jobs)} jobs planned, {n_done} already done, {len(jobs) - n_done} to run")
    searches = describe_search_seeds(list({j.regime.name: j.regime for j in jobs}.values()),
                                     {r: sum(counts[(m, r)] for m in models) for r in regimes})
    return "\n".join(lines + ([searches] if searches else []))
