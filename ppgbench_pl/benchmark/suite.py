"""A benchmark suite built from a suite spec: encoders, regimes, one datamodule per dataset.

The spec (JSON-able, ``class_path``/``init_args`` entries; see :mod:`ppgbench_pl.benchmark.spec`) is what
``fit`` and ``benchmark`` resolve from YAML through the one LightningCLI parser and what every worker
receives with a job id, so a worker in another process or on another node rebuilds exactly the
coordinator's suite and finds its job by id. A suite is built once per (process, thread) and reused by
every job that reaches it there.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import math
import threading
from functools import cached_property
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Callback

from ppgbench_pl.benchmark.cache import EmbeddingCache
from ppgbench_pl.benchmark.cache_store import cache_root, size_cap_bytes
from ppgbench_pl.benchmark.embeddings import EmbeddingSource, needs_embeddings
from ppgbench_pl.benchmark.entries import encoder_info, import_class, instantiate
from ppgbench_pl.benchmark.plan import EncoderInfo, Job, build_plan
from ppgbench_pl.benchmark.spec import SUITE_KEYS
from ppgbench_pl.data.registry import REAL_DATASETS, get_dataset, get_task
from ppgbench_pl.datamodules.ppg import DEFAULT_SEEDS, PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.input_checks import check_accelerator
from ppgbench_pl.limits import MAX_SAMPLING_RATE, MIN_SAMPLING_RATE
from ppgbench_pl.regimes.base import JobContext, Regime


def check_rate(name: str, fs: float) -> None:
    """A sampling rate the data and models can take, or a one-line refusal."""
    if not math.isfinite(fs) or not MIN_SAMPLING_RATE <= fs <= MAX_SAMPLING_RATE:
        low, high = MIN_SAMPLING_RATE, MAX_SAMPLING_RATE
        raise ConfigError(f"{name}: sampling_rate {fs:g} Hz is outside {low:g}-{high:g} Hz (below {low:g} Hz the "
                          "pulse wave is not resolved; no PPG dataset or model here runs above 2 kHz)")


def config_digest(config: dict[str, Any]) -> str:
    """Digest of a suite config (the key of the per-process suite cache)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def datasets_and_tasks(datasets: list[str] | None, tasks: list[str] | None) -> dict[str, list[str] | None]:
    """Dataset -> selected task names (``None``: all of its tasks), validated against the registry.

    Raises:
        ConfigError: An unknown name, or a task whose dataset is not among the selected datasets.
    """
    specs = [get_task(t) for t in tasks] if tasks else []
    if datasets is None:
        datasets = list(dict.fromkeys(s.dataset for s in specs)) if specs else list(REAL_DATASETS)
    for d in datasets:
        get_dataset(d)
    outside = sorted({s.name for s in specs if s.dataset not in datasets})
    if outside:
        raise ConfigError(f"tasks {', '.join(outside)} belong to datasets not selected ({', '.join(datasets)})")
    out: dict[str, list[str] | None] = {}
    for d in dict.fromkeys(datasets):
        names = [s.name for s in specs if s.dataset == d]
        if specs and not names:
            raise ConfigError(f"dataset '{d}' has none of the selected tasks; drop it or add one of its tasks")
        out[d] = names or None
    return out


class BenchmarkSuite:
    """Encoders, regimes and datamodules of one suite spec, and its plan.

    Args:
        config: Suite spec (the :data:`~ppgbench_pl.benchmark.spec.SUITE_KEYS` of a resolved config).
        run_dir: Run folder (its ``embeddings/`` records the shared cache's entries it used).
    """

    def __init__(self, config: dict[str, Any], run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.config: dict[str, Any] = {k: copy.deepcopy(config.get(k)) for k in SUITE_KEYS}
        storage = self.config.get("optuna_storage")
        for entry in self.config["regimes"] if storage is not None else []:
            args = entry.setdefault("init_args", {})
            if "search" in inspect.signature(import_class(entry["class_path"])).parameters:
                search = args.get("search") or {}
                search = dict(search.get("init_args", search)) if isinstance(search, dict) else {}
                if search.get("storage") is None:
                    args["search"] = {**search, "storage": storage}
        data = dict(self.config.get("data") or {})
        self.selection = datasets_and_tasks(self.config.get("datasets"), self.config.get("tasks"))
        seeds = self.config.get("seeds")
        self.datamodules = {
            d: PPGDataModule(dataset=d, tasks=names, seeds=list(DEFAULT_SEEDS) if seeds is None else seeds,
                             folds=self.config.get("folds"), **data)
            for d, names in self.selection.items()
        }
        self.trainer_kwargs = dict(self.config.get("trainer") or {})
        check_accelerator(self.trainer_kwargs.get("accelerator"))
        self.cache = EmbeddingCache(cache_root(config.get("cache_dir")), size_cap_bytes(config.get("cache_size_gb")))
        self.source = EmbeddingSource(self.cache, self.trainer_kwargs)
        self.source.run_dir = self.run_dir
        for info in self.encoder_infos:
            check_rate(info.name, info.sampling_rate)
        for regime in self.regimes:
            regime.check_trainer(self.trainer_kwargs)

    @cached_property
    def regimes(self) -> list[Regime]:
        """The regime callbacks (cheap to build)."""
        return [instantiate(Regime, entry) for entry in self.config["regimes"]]

    @cached_property
    def callbacks(self) -> list[Callback]:
        """The user's Lightning callbacks, attached to every trial trainer (built once per suite)."""
        return [instantiate(Callback, entry) for entry in self.config.get("callbacks") or []]

    def fit_notice(self) -> str | None:
        """The run's one line when user callbacks make each trial of a searched regime train in a fit of its own."""
        if self.callbacks and any(r.trains_trials for r in self.regimes):
            from ppgbench_pl.hpo.per_trial import per_trial_line, stack_aware  # Optuna: only for searched regimes

            if not stack_aware(self.callbacks):
                return per_trial_line(self.callbacks)
        return None

    @cached_property
    def encoder_infos(self) -> list[EncoderInfo]:
        """Encoder names and rates without building the models (dry runs)."""
        return [encoder_info(entry) for entry in self.config["encoders"]]

    @cached_property
    def encoders(self) -> list[PPGEncoder]:
        """The encoders, built (weights loaded) on first use."""
        built = [instantiate(PPGEncoder, entry) for entry in self.config["encoders"]]
        for info, encoder in zip(self.encoder_infos, built, strict=True):
            if info.name != encoder.name:
                raise ConfigError(f"encoder {encoder.name!r} reports a different name than its config ({info.name!r})")
        return built

    @property
    def tasks(self) -> list[Any]:
        """Every selected task, dataset by dataset."""
        return [t for dm in self.datamodules.values() for t in dm.task_specs]

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
        return build_plan(encoders, self.tasks, self.regimes, self.seeds, self.folds)

    @cached_property
    def jobs(self) -> dict[str, Job]:
        """The plan by job id."""
        return {j.job_id: j for j in self.plan()}

    def job(self, jid: str) -> Job:
        """One job of the plan.

        Raises:
            ConfigError: The id is not in this suite's plan (a worker got a spec of another config).
        """
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


def forget_suites() -> None:
    """Drop this thread's suites, so a new run reads its data afresh.

    A tree may have been repaired since an earlier run of the same config in this process, and the
    embedding key is the windows' content.
    """
    _local.suites = {}


def suite_for(config: dict[str, Any], run_dir: str | Path) -> BenchmarkSuite:
    """The suite of ``config`` in this process and thread, built on first use.

    Datamodules cache the windows they read, so threads never share one.
    """
    cache: dict[tuple[str, str], BenchmarkSuite] = getattr(_local, "suites", None) or {}
    _local.suites = cache
    key = (config_digest({k: config.get(k) for k in (*SUITE_KEYS, "cache_dir", "cache_size_gb")}),
           str(Path(run_dir).resolve()))
    if key not in cache:
        cache.clear()  # one suite per thread at a time: a new config replaces the old one
        cache[key] = BenchmarkSuite(config, run_dir)
    return cache[key]

