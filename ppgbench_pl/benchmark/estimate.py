"""The dry run's cost estimate: jobs per regime, CPU (and GPU) time on this machine and executor.

Each pending job's seconds are the machine's :class:`~ppgbench_pl.benchmark.cost_model.CostModel` applied to
its work (:func:`job_units`); one embedding pass per (encoder, dataset) a frozen regime reads; wall time
spreads the jobs over the executor's slots. Nothing is built: a dry run must not start a pool or a scheduler.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ppgbench_pl.benchmark import cost_sizes
from ppgbench_pl.benchmark.cost_model import TRIAL_EPOCH_UNITS, CostModel, calibration_path, encoder_key
from ppgbench_pl.benchmark.thread_policy import thread_override, usable_cores
from ppgbench_pl.regimes.search_seeds import searches_per_job

OTHER_JOB_S = 1.0  # seconds assumed per job of a regime the cost model does not know (a user's own callback)


@dataclass
class JobCost:
    """One pending job's estimated seconds, and the trials and trial-epochs of its searches (a searched job)."""

    regime: str
    kind: str
    seconds: float
    gpu: bool
    trials: int = 0
    trial_epochs: float = 0.0


@dataclass
class Estimate:
    """What :func:`describe_estimate` prints (``processes``: the command and its workers, each starting once)."""

    jobs: list[JobCost] = field(default_factory=list)
    embedding_seconds: float = 0.0
    embedding_passes: int = 0
    startup_s: float = 0.0
    processes: int = 1
    embedding_gpu: bool = False
    slots: int = 1
    executor: str = "local"
    threads: int = 1  # torch threads of each searched job
    assumptions: list[str] = field(default_factory=list)


def regime_kind(regime: Any, task: Any, trainable: bool) -> str:
    """The cost model's kind of a regime on a task (``other`` for one it does not know); imports no regime."""
    mro = {f"{c.__module__}.{c.__qualname__}".removeprefix("ppgbench_pl.regimes.") for c in type(regime).__mro__}
    if "forest.RandomForestRegime" in mro:
        return "rf"
    if "linear.LinearRegime" in mro:
        return "logistic" if task.kind == "classification" else "ridge"
    if "mlp.MLPRegime" in mro or ("finetune.FinetuneRegime" in mro and not trainable):
        return "mlp"  # a parameter-free encoder's finetune cell trains heads on fixed features
    return "finetune" if "finetune.FinetuneRegime" in mro else "other"


def forest_units(regime: Any, n: float, d: int) -> float:
    """Trees x rows x depth x features tried per split, over the regime's grid."""
    per_split = [math.sqrt(d) if v == "sqrt" else math.log2(max(d, 2)) if v == "log2"
                 else float(v) * d if isinstance(v, float) else float(v) for v in regime.max_features]
    depth = sum(min(float(depth), math.log2(max(n, 2))) for depth in regime.max_depth)
    return sum(regime.n_estimators) * n * depth * (sum(per_split) / len(per_split))


def trees_fitted(regime: Any, inner: int) -> int:
    """Trees one RF job grows: every grid point's trees, in each inner fold and the refit."""
    grid = len(regime.max_depth) * len(regime.min_samples_split) * len(regime.min_samples_leaf)
    return (inner + 1) * sum(regime.n_estimators) * grid * len(regime.max_features)


def job_units(kind: str, regime: Any, n: float, d: int, classes: int, inner: int, throughput: tuple[float, float],
              work: cost_sizes.SearchWork | None = None) -> float:
    """One job's work in its kind's units, on ``n`` outer-training rows of ``d`` features with ``inner`` folds.

    ridge k n d^2; logistic k n d c; rf k x :func:`forest_units`; a searched job its share of its stack group's
    trial-epochs x (per row: n x (1 + d / 64) / 2 for an MLP head, encoder seconds at the measured training and
    inference ``throughput`` for finetuning; plus :data:`~.cost_model.TRIAL_EPOCH_UNITS`).
    """
    if kind == "ridge":
        return inner * n * d * d
    if kind == "logistic":
        return inner * n * d * max(classes, 2)
    if kind == "rf":
        return inner * forest_units(regime, n, d)
    if work is None or kind not in TRIAL_EPOCH_UNITS:
        return 0.0
    infer, train = throughput
    per_trial_epoch = n * (1 + d / 64) / 2 if kind == "mlp" else 0.8 * n / train + 0.2 * n / infer
    return work.trial_epochs * (per_trial_epoch + TRIAL_EPOCH_UNITS[kind]) / work.jobs


def executor_shape(entry: dict[str, Any]) -> tuple[str, int, int]:
    """(name, jobs at once, torch threads of an encoder job) of an executor entry, read without building it.

    The process pool's default is one worker per core (per GPU), sharing the cores; locally a job has torch's
    default (``OMP_NUM_THREADS``, else the cores); a cluster job its ``cpus_per_task`` (1 when not given).
    """
    from ppgbench_pl.naming import import_class

    cls = import_class(entry["class_path"])
    args = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()}
    args.update(entry.get("init_args") or {})
    name, cores = cls.__name__.removesuffix("Executor").lower() or cls.__name__, usable_cores()
    if "workers" in args and args["workers"] is None:
        slots = len(args.get("gpus") or ()) or cores
    else:
        found = [max(int(args[k]), 1) for k in ("workers", "parallelism") if isinstance(args.get(k), int)]
        slots = found[0] if found else 1
    env, params = os.environ.get("OMP_NUM_THREADS", ""), args.get("parameters") or {}
    if name == "local":
        threads = max(int(env), 1) if env.isdigit() else cores
    elif isinstance(args.get("threads_per_worker"), int):
        threads = max(int(args["threads_per_worker"]), 1)
    elif name == "process":
        threads = max(1, cores // max(int(args.get("workers") or cores), 1))
    else:
        cpus = params.get("cpus_per_task") or params.get("slurm_cpus_per_task") if isinstance(params, dict) else None
        threads = int(cpus) if isinstance(cpus, int) else 1
    return name, slots, threads


def on_gpu(trainer_kwargs: dict[str, Any]) -> bool:
    """Whether the neural regimes and the embedding pass would run on a CUDA GPU."""
    accelerator = str(trainer_kwargs.get("accelerator") or "auto")
    if accelerator == "cpu":
        return False
    import torch

    return accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available()


def estimate_plan(suite: Any, pending: Sequence[Any], executor: dict[str, Any], model: CostModel,
                  read_tree: bool = True, threads: int | None = None) -> Estimate:
    """The estimate of running ``pending`` (jobs of ``suite``'s dry plan) with ``executor`` on this machine."""
    est = Estimate(startup_s=model.startup_s)
    est.executor, est.slots, encoder_threads = executor_shape(executor)
    est.processes = 1 + (0 if est.executor == "local" else min(est.slots, len(pending)))
    gpu, override = on_gpu(suite.trainer_kwargs), thread_override(threads)[0]  # the policy: probe jobs at 1
    probe_threads, encoder_threads = override or 1, override or encoder_threads
    sizes: dict[tuple[str, float, str], cost_sizes.TaskSize] = {}
    passes: dict[tuple[int, str], int] = {}
    few: set[str] = set()
    groups = cost_sizes.stack_groups(pending)
    for job in pending:
        info, entry, dm = suite.encoder_infos[job.model], suite.encoder_configs[job.model], \
            suite.datamodules[job.task.dataset]
        key = (job.task.dataset, float(info.sampling_rate), job.task.name)
        if key not in sizes:
            sizes[key] = cost_sizes.task_size(dm, key[1], job.task, read_tree)
        size, kind = sizes[key], regime_kind(job.regime, job.task, info.trainable)
        tied = cost_sizes.few_validation_subjects(job.task, size.groups, dm.n_folds)
        if tied and hasattr(job.regime, "search"):
            few.add(job.task.name)
        searched = kind in ("mlp", "finetune")
        work = cost_sizes.regime_search_work(job.regime, job.task, groups[job.job_id], tied) if searched else None
        n = size.rows * (dm.n_folds - 1) / dm.n_folds * float(getattr(job.regime, "fraction", 1.0))
        units = job_units(kind, job.regime, n, cost_sizes.embed_dim(entry, model)[0], size.classes, dm.n_inner_folds,
                          model.throughput(encoder_key(entry))[:2], work)
        seconds = model.job_seconds(kind, units) if kind != "other" else OTHER_JOB_S
        if kind == "rf":  # each tree's own fixed cost, beside the work that grows with rows and depth
            seconds += model.job_seconds("rf_tree", trees_fitted(job.regime, dm.n_inner_folds))
        on_device = gpu and (searched or (kind == "rf" and job.regime.backend() == "cuml"))
        if work is not None:
            n_threads = probe_threads if job.regime.uses_embeddings else encoder_threads
            est.threads = max(est.threads, n_threads)
            if not on_device and n_threads > 1:  # torch's threads spin-wait around the stack's tiny steps
                fixed = model.job_seconds(kind, 0.0)
                seconds = fixed + (seconds - fixed) * model.thread_factor
        est.jobs.append(JobCost(job.regime.name, kind, seconds, on_device, *(
            (work.trials // work.jobs, work.trial_epochs / work.jobs) if work is not None else (0, 0.0))))
        if job.regime.uses_embeddings or not info.trainable:  # as the suite's uses_cache
            passes[(job.model, job.task.dataset)] = size.windows
    est.embedding_seconds = sum(w / model.throughput(encoder_key(suite.encoder_configs[m]))[0]
                                for (m, _), w in passes.items())
    est.embedding_passes, est.embedding_gpu = len(passes), gpu
    est.assumptions = assumptions(suite, pending, model, sizes, est, few)
    return est


def assumptions(suite: Any, pending: Sequence[Any], model: CostModel,
                sizes: dict[tuple[str, float, str], cost_sizes.TaskSize], est: Estimate, few: set[str]) -> list[str]:
    """The ``assumes`` lines: what the figures rest on."""
    rates: dict[tuple[str, str], set[float]] = {}
    for (dataset, fs, _), size in sizes.items():
        rates.setdefault((dataset, size.source), set()).add(fs)
    sources = [f"{d} at {'/'.join(f'{r:g}' for r in sorted(fs))} Hz: {source}"
               for (d, source), fs in sorted(rates.items())]
    rows = sorted({f"{k[2]} {s.rows}" for k, s in sizes.items()})
    dims, speeds, measure = [], [], "ppgbench calibrate --config <this config>"
    for entry, info in zip(suite.encoder_configs, suite.encoder_infos, strict=True):
        d, where = cost_sizes.embed_dim(entry, model)
        infer, train, measured = model.throughput(encoder_key(entry))
        dims.append(f"{info.name} {d} ({where})" if where != "assumed" else
                    f"{info.name} {d} (assumed: not in the catalog, config or class signature; {measure} measures it)")
        speeds.append(f"{info.name} {infer:.0f}/{f'{train:.0f}' if info.trainable else '-'} windows/s"
                      + ("" if measured else f" (assumed: not measured; {measure})"))
    out = [f"sizes: {'; '.join(sources)} (labelled windows: {', '.join(rows)})",
           f"embedding size: {', '.join(dims)}; encoder inference/training: {', '.join(speeds)}"]
    for name, regime in {j.regime.name: j.regime for j in pending if hasattr(j.regime, "search")}.items():
        s = regime.search
        mean = cost_sizes.hyperband_epochs(s.epochs, s.min_resource, s.reduction_factor, s.n_trials)
        out.append(f"{name}: {s.n_trials} trials x {searches_per_job(regime)} search repeat(s) per holdout "
                   f"({regime.subject_repeats} holdouts on subject-level tasks), {s.batch} at a time; a trial trains "
                   f"{mean:.1f} of {s.epochs} epochs on average (Hyperband); the studies of "
                   f"{getattr(regime, 'stack_jobs', 1)} job(s) of a cell train in one stack")
    where = f"this machine, {model.threads} thread(s), {model.device}" if model.calibrated else \
        "uncalibrated defaults: the project's 2-core CI machine, 1 thread"
    out.append(f"CPU seconds per job as measured ({where}), one job (or stack group) after another within each "
               "worker, a stack's cost shared by its jobs; the embedding pass runs once per encoder and dataset "
               "before the jobs (assumed not yet in the shared cache)")
    if est.embedding_gpu and model.device != "cuda":
        out.append(f"GPU figures: the calibration was measured on the CPU, so they are an upper bound ({measure} "
                   "measures it on the trainer's GPU)")
    unknown = sorted({j.regime for j in est.jobs if j.kind == "other"})
    if unknown:
        out.append(f"{', '.join(unknown)}: not in the cost model, {OTHER_JOB_S:g} s per job assumed")
    if any(j.trials and not j.gpu for j in est.jobs):  # a searched job's CPU grows with its torch threads
        source = "by ppgbench calibrate" if model.calibrated else "on the 2-core CI machine under load"
        out.append(f"searched jobs at {est.threads} torch thread(s) each" + ("" if est.threads <= 1 else (
            f": {model.thread_factor:.0f}x the CPU time of one thread (measured {source}; torch's threads spin-wait "
            "around the stack's tiny steps); the default thread policy (one thread per probe job; PPGBENCH_THREADS "
            "or --threads override it) avoids it")))
    if few:
        out.append(f"{', '.join(sorted(few))}: fewer than {cost_sizes.FEW_VALIDATION_SUBJECTS} validation subjects, "
                   "so the subject-level scores tie at the top and Hyperband prunes few trials (87 % assumed to train "
                   "every epoch, as measured on synthetic stiffness)")
    if any(j.kind == "rf" and j.gpu for j in est.jobs):
        out.append("rf on cuML: scikit-learn's coefficients on the GPU column, an upper bound")
    return out


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 48 * 3600:
        return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days" if seconds < 1e9 else f"{seconds / 86400:.3g} days"


def wall_seconds(est: Estimate) -> float:
    """The embedding pass, then the jobs spread evenly over the executor's slots (a local pool: at most the cores)."""
    local = est.executor in ("local", "process")
    slots = max(min(est.slots, len(est.jobs), (os.cpu_count() or 1) if local else est.slots), 1)
    workers = est.startup_s if est.processes > 1 else 0.0  # workers start together, after the command
    return est.startup_s + workers + est.embedding_seconds + sum(j.seconds for j in est.jobs) / slots


def describe_estimate(est: Estimate, model: CostModel) -> str:
    """The estimate as the dry run prints it: one row per regime, the embedding pass, totals, assumptions."""
    if model.calibrated:
        head = f"estimate for this machine ({model.machine}; calibrated {model.created}, ppgbench calibrate):"
    else:
        head = (f"estimate UNCALIBRATED: no calibration for this machine ({calibration_path(model.machine)}); "
                "figures use the documented defaults (docs/performance.md); run `ppgbench calibrate` (under a minute)")
    lines = [head, f"{'regime':<16} {'jobs':>6} {'per job':>9} {'CPU':>10} {'GPU':>10}"]

    def row(name: str, count: int, each: str, cpu: float | None, gpu: float) -> None:
        lines.append(f"{name:<16} {count:>6} {each:>9} {'-' if cpu is None else _duration(cpu):>10} "
                     f"{_duration(gpu) if gpu else '-':>10}")

    for name in dict.fromkeys(j.regime for j in est.jobs):
        mine = [j for j in est.jobs if j.regime == name]
        cpu, gpu = sum(j.seconds for j in mine if not j.gpu), sum(j.seconds for j in mine if j.gpu)
        row(name, len(mine), _duration((cpu + gpu) / len(mine)), cpu, gpu)
    row("start-up", est.processes, _duration(est.startup_s), est.startup_s * est.processes, 0.0)
    emb_cpu, emb_gpu = (0.0, est.embedding_seconds) if est.embedding_gpu else (est.embedding_seconds, 0.0)
    if est.embedding_passes:
        row("embedding pass", est.embedding_passes, "", None if est.embedding_gpu else emb_cpu, emb_gpu)
    cpu_total = sum(j.seconds for j in est.jobs if not j.gpu) + est.startup_s * est.processes + emb_cpu
    gpu_total = sum(j.seconds for j in est.jobs if j.gpu) + emb_gpu
    row("total", len(est.jobs), "", cpu_total, gpu_total)
    cores = f", {os.cpu_count() or 1} cores here" if est.executor in ("local", "process") else ""
    lines.append(f"wall time with the {est.executor} executor ({est.slots} job(s) at once{cores}): about "
                 f"{_duration(wall_seconds(est))}")
    return "\n".join(lines + [f"assumes {a}" for a in est.assumptions])
