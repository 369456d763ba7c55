"""A benchmark suite: encoders (built on first use), regimes, one datamodule per dataset, and its plan."""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from jsonargparse import ArgumentError, ArgumentParser
from lightning.pytorch.callbacks import Callback

from ppgbench_pl.benchmark.budget import Budget
from ppgbench_pl.benchmark.cache import EmbeddingCache
from ppgbench_pl.benchmark.cache_store import cache_root, size_cap_bytes
from ppgbench_pl.benchmark.embeddings import EmbeddingSource, needs_embeddings
from ppgbench_pl.benchmark.plan import EncoderInfo, Job, build_plan
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.input_checks import check_accelerator
from ppgbench_pl.limits import MAX_SAMPLING_RATE, MIN_SAMPLING_RATE
from ppgbench_pl.naming import import_class
from ppgbench_pl.regimes.base import JobContext, Regime


def encoder_info(entry: Any) -> EncoderInfo:
    """Name, rate and trainability of a parsed encoder entry, read from its class and init_args (not built)."""
    if isinstance(entry, PPGEncoder):
        return EncoderInfo(str(entry.name), float(entry.sampling_rate), bool(getattr(entry, "trainable", True)))
    cls = import_class(entry["class_path"])
    args = entry.get("init_args") or {}
    name = cls.config_name(args) if hasattr(cls, "config_name") else str(args.get("name", cls.name))
    return EncoderInfo(str(name), float(args.get("sampling_rate", cls.sampling_rate)),
                       bool(getattr(cls, "trainable", True)))


def build_entry(base: type, entry: Any) -> Any:
    """Build a parsed ``class_path``/``init_args`` entry as LightningCLI would (jsonargparse, nested classes too)."""
    if isinstance(entry, base):
        return entry
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--obj", type=base)
    try:
        return parser.instantiate(parser.parse_object({"obj": copy.deepcopy(entry)})).obj
    except ArgumentError as exc:  # one line naming the entry and the bad setting, not argparse's nesting
        from ppgbench_pl.messages import one_line

        path = entry.get("class_path") if isinstance(entry, dict) else entry
        raise ConfigError(f"{base.__name__.lower()} {path}: {one_line(str(exc)).removeprefix('obj: ')}") from None


class BenchmarkSuite:
    """Encoders (entries or built), capped regimes, datamodules, callbacks (``callback_entries``: for the identity)."""

    def __init__(self, encoders: Sequence[Any], regimes: Sequence[Regime], datamodules: dict[str, PPGDataModule], *,
                 callbacks: Sequence[Callback] = (), trainer: dict[str, Any] | None = None,
                 budget: Budget | None = None, callback_entries: Sequence[dict[str, Any]] = (),
                 selection: dict[str, list[str] | None] | None = None, cache_dir: str | None = None,
                 cache_size_gb: float | None = None, run_dir: str | Path | None = None) -> None:
        self.encoder_entries, self.regimes, self.datamodules = list(encoders), list(regimes), dict(datamodules)
        self.callbacks, self.callback_entries = list(callbacks), list(callback_entries)
        self.budget = budget or Budget()
        self.selection = selection or {d: None for d in datamodules}
        self.run_dir = Path(run_dir or ".")
        self.trainer_kwargs = dict(trainer or {})
        check_accelerator(self.trainer_kwargs.get("accelerator"))
        self.cache = EmbeddingCache(cache_root(cache_dir), size_cap_bytes(cache_size_gb))
        self.source = EmbeddingSource(self.cache, self.trainer_kwargs)
        self.source.run_dir = self.run_dir
        low, high = MIN_SAMPLING_RATE, MAX_SAMPLING_RATE
        for info in self.encoder_infos:  # a rate the data and models can take
            if not math.isfinite(fs := info.sampling_rate) or not low <= fs <= high:
                raise ConfigError(f"{info.name}: sampling_rate {fs:g} Hz is outside {low:g}-{high:g} Hz (below "
                                  f"{low:g} Hz the pulse wave is not resolved; no PPG dataset or model here runs "
                                  "above 2 kHz)")
        for regime in self.regimes:
            regime.check_trainer(self.trainer_kwargs)

    def fit_notice(self) -> str | None:
        """The run's one line when user callbacks make each trial of a searched regime train in a fit of its own."""
        if self.callbacks and any(r.trains_trials for r in self.regimes):
            from ppgbench_pl.hpo.per_trial import per_trial_line, stack_aware  # Optuna: only for searched regimes

            if not stack_aware(self.callbacks):
                return per_trial_line(self.callbacks)
        return None

    @property
    def encoder_configs(self) -> list[dict[str, Any]]:
        """Each encoder's parsed entry (a built object: its class path only), as the cost model keys them."""
        return [{"class_path": f"{type(e).__module__}.{type(e).__qualname__}"} if isinstance(e, PPGEncoder) else e
                for e in self.encoder_entries]

    @cached_property
    def encoder_infos(self) -> list[EncoderInfo]:
        """Encoder names and rates without building the models (dry runs)."""
        return [encoder_info(entry) for entry in self.encoder_entries]

    @cached_property
    def encoders(self) -> list[PPGEncoder]:
        """The encoders, built (weights loaded) on first use."""
        built = [build_entry(PPGEncoder, entry) for entry in self.encoder_entries]
        for info, encoder in zip(self.encoder_infos, built, strict=True):
            if info.name != encoder.name:
                raise ConfigError(f"encoder {encoder.name!r} reports a different name than its config ({info.name!r})")
        return built

    @property
    def seeds(self) -> list[int]:
        """Outer seeds."""
        return next(iter(self.datamodules.values())).seeds

    @property
    def folds(self) -> list[int]:
        """Outer folds."""
        return next(iter(self.datamodules.values())).folds

    def plan(self, dry: bool = False) -> list[Job]:
        """Jobs model -> task -> seed -> fold -> regime (``dry``: from encoder configs, nothing built)."""
        encoders: list[Any] = self.encoder_infos if dry else self.encoders
        tasks = [t for dm in self.datamodules.values() for t in dm.task_specs]
        return build_plan(encoders, tasks, self.regimes, self.seeds, self.folds)

    @cached_property
    def jobs(self) -> dict[str, Job]:
        """The plan by job id."""
        return {j.job_id: j for j in self.plan()}

    def job(self, jid: str) -> Job:
        """One job of the plan (``ConfigError`` for an id of another config's plan)."""
        if jid not in self.jobs:
            raise ConfigError(f"job {jid} is not in the plan of this benchmark config")
        return self.jobs[jid]

    def datamodule(self, job: Job) -> PPGDataModule:
        """The datamodule of the job's dataset."""
        return self.datamodules[job.task.dataset]

    def uses_cache(self, job: Job) -> bool:
        """Whether the job reads the embedding cache."""
        return needs_embeddings(job.regime.uses_embeddings, self.encoders[job.model])

    def context(self, job: Job) -> JobContext:
        """Everything the job needs, computed once: task view, outer split, cached embeddings or raw windows."""
        encoder, dm = self.encoders[job.model], self.datamodule(job)
        embeddings = self.source.get(encoder, dm) if self.uses_cache(job) else None
        return JobContext.build(dm, encoder, job.task, job.seed, job.fold, self.run_dir / "search" / job.job_id,
                                job_id=job.job_id, model_name=job.model_name, embeddings=embeddings,
                                raw_windows=not job.regime.uses_embeddings, trainer_kwargs=self.trainer_kwargs,
                                callbacks=self.callbacks)


_local = threading.local()


def keep_suite(key: str, suite: BenchmarkSuite) -> None:
    """Make ``suite`` the only one :func:`suite_for` returns in this thread (a new run reads its data afresh)."""
    _local.suites = {key: suite}


def suite_for(resolved: str, run_dir: str | Path, parse: str | None) -> BenchmarkSuite:
    """The coordinator's suite, or one parsed here once by ``parse`` (an import path: Dask unpickles tasks)."""
    cache: dict[str, BenchmarkSuite] = getattr(_local, "suites", None) or {}
    if resolved not in cache:
        if parse is None or not resolved.lstrip().startswith("{"):
            raise ConfigError("objects handed to ppgbench_pl.evaluate live in the process that built them: run them "
                              "with the local executor")
        suite = import_class(parse)(resolved)
        suite.run_dir = suite.source.run_dir = Path(run_dir)
        cache = {resolved: suite}  # one suite per thread at a time: a new config replaces the old one
        _local.suites = cache
    return cache[resolved]
