"""The dry run's cost estimate: jobs per regime, CPU (and GPU) time on this machine and executor.

Each pending job's seconds come from the machine's :class:`~ppgbench_pl.benchmark.cost_model.CostModel`
(``ppgbench calibrate``; the documented defaults, labelled uncalibrated, without it) applied to the job's
work: the task's size (:mod:`ppgbench_pl.benchmark.cost_sizes`), the embedding size, the regime's grid or
search budget. The embedding pass is one per (encoder, dataset, rate) that a frozen regime reads. Wall time
spreads the jobs over the executor's parallel slots. Every assumption is printed with the figures.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ppgbench_pl.benchmark.cost_executor import executor_slots, job_threads, on_gpu
from ppgbench_pl.benchmark.cost_model import (
    DEFAULT_EMBED_DIM,
    CostModel,
    calibration_path,
    encoder_key,
    stack_units,
)
from ppgbench_pl.benchmark.cost_sizes import TaskSize, task_size
from ppgbench_pl.benchmark.search_cost import (
    FEW_VALIDATION_SUBJECTS,
    SearchWork,
    few_validation_subjects,
    hyperband_epochs,
    regime_search_work,
    stack_groups,
)
from ppgbench_pl.benchmark.thread_policy import thread_override
from ppgbench_pl.regimes.search_seeds import searches_per_job

#: Seconds assumed per job of a regime the cost model does not know (a user's own callback).
OTHER_JOB_S = 1.0


@dataclass
class JobCost:
    """One pending job's estimated seconds and where they are spent."""

    regime: str
    kind: str
    seconds: float
    gpu: bool
    trials: int = 0  # trials its searches finish (a searched regime), in plan order with the jobs
    trial_epochs: float = 0.0  # epochs they train, as estimated


@dataclass
class Estimate:
    """What :func:`describe_estimate` prints."""

    jobs: list[JobCost] = field(default_factory=list)
    embedding_seconds: float = 0.0
    embedding_passes: int = 0
    startup_s: float = 0.0
    processes: int = 1  # the command and its worker processes, each paying start-up once
    embedding_gpu: bool = False
    slots: int = 1
    executor: str = "local"
    threads: int = 1  # torch threads of each job
    assumptions: list[str] = field(default_factory=list)


def _is_a(regime: Any, module: str, name: str) -> bool:
    """``isinstance(regime, module.name)`` without importing ``module``.

    An object of a class whose module was never imported cannot exist, so a dry run of linear regimes does not
    import Optuna (through the finetune regime) to learn that its regimes are not finetuning.
    """
    loaded = sys.modules.get(f"ppgbench_pl.regimes.{module}")
    return loaded is not None and isinstance(regime, getattr(loaded, name))


def regime_kind(regime: Any, task: Any, trainable: bool) -> str:
    """The cost model's kind of a regime on a task (``other`` for a regime it does not know)."""
    finetune = _is_a(regime, "finetune", "FinetuneRegime")
    if _is_a(regime, "forest", "RandomForestRegime"):
        return "rf"
    if _is_a(regime, "linear", "LinearRegime"):
        return "logistic" if task.kind == "classification" else "ridge"
    if _is_a(regime, "mlp", "MLPRegime") or (finetune and not trainable):
        return "mlp"  # a parameter-free encoder's finetune cell trains heads on fixed features
    if finetune:
        return "finetune"
    return "other"


def forest_units(regime: Any, n: float, d: int) -> float:
    """Trees x rows x depth x features tried per split, over the regime's grid."""
    per_split = []
    for value in regime.max_features:
        per_split.append(math.sqrt(d) if value == "sqrt" else math.log2(max(d, 2)) if value == "log2"
                         else float(value) * d if isinstance(value, float) else float(value))
    depth = sum(min(float(depth), math.log2(max(n, 2))) for depth in regime.max_depth)
    return sum(regime.n_estimators) * n * depth * (sum(per_split) / len(per_split))


def mlp_width(d: int) -> float:
    """How a head's cost per row grows with the embedding size: 1 at 64-d, the first layer's share beyond."""
    return (1 + d / 64) / 2


def trees_fitted(regime: Any, inner: int) -> int:
    """Trees one RF job grows: every grid point's trees, in each inner fold and the refit."""
    others = len(regime.max_depth) * len(regime.min_samples_split) * len(regime.min_samples_leaf) * \
        len(regime.max_features)
    return (inner + 1) * sum(regime.n_estimators) * others


def job_units(kind: str, regime: Any, size: TaskSize, d: int, folds: tuple[int, int],
              throughput: tuple[float, float], work: SearchWork | None = None) -> float:
    """The work of one job in the cost model's units (module docstring of ``cost_model``).

    A searched job's share of its group's stack (``work``): the group's trial-epochs over the job's rows,
    and its stack epochs, each priced in the same units (:data:`~.cost_model.STACK_EPOCH_UNITS`).
    """
    n_folds, inner = folds
    n = size.rows * (n_folds - 1) / n_folds * float(getattr(regime, "fraction", 1.0))
    if kind == "ridge":
        return inner * n * d * d
    if kind == "logistic":
        return inner * n * d * max(size.classes, 2)
    if kind == "rf":
        return inner * forest_units(regime, n, d)
    if work is None:
        return 0.0
    if kind == "mlp":
        return stack_units(kind, work.trial_epochs, work.stack_epochs, n * mlp_width(d)) / work.jobs
    if kind == "finetune":
        infer, train = throughput
        return stack_units(kind, work.trial_epochs, work.stack_epochs, 0.8 * n / train + 0.2 * n / infer) / work.jobs
    return 0.0


def embed_dim(entry: dict[str, Any], model: CostModel) -> tuple[int, str]:
    """(embedding size, where it comes from): measured, the encoder catalog, the config, the class, or assumed.

    The class's own default (``embed_dim``/``embedding_dim`` in its signature) is read without building it.
    """
    measured = model.encoders.get(encoder_key(entry))
    if measured and measured.get("embed_dim"):
        return int(measured["embed_dim"]), "measured"
    from ppgbench_pl.encoders.catalog import CATALOG

    for known in CATALOG.values():
        if known.class_path == entry.get("class_path") and known.embedding_dim:
            return int(known.embedding_dim), "catalog"
    found = declared_dim(entry) or declared_dim((entry.get("init_args") or {}).get("module"))
    return found if found else (DEFAULT_EMBED_DIM, "assumed")


#: Argument names that state an encoder's (or a wrapped module's) output size.
DIM_NAMES = ("embed_dim", "embedding_dim", "out_dim", "output_dim", "out_features")


def declared_dim(entry: Any) -> tuple[int, str] | None:
    """The size a ``class_path``/``init_args`` entry states: in its config, else as its class's default."""
    if not isinstance(entry, dict) or not entry.get("class_path"):
        return None
    args = entry.get("init_args") or {}
    for name in DIM_NAMES:
        if isinstance(args.get(name), int):
            return int(args[name]), "config"
    try:
        from ppgbench_pl.naming import import_class

        params = inspect.signature(import_class(str(entry["class_path"])).__init__).parameters
    except Exception:  # noqa: BLE001 - a class the dry run cannot import: the size is assumed, and says so
        return None
    for name in DIM_NAMES:
        if name in params and isinstance(params[name].default, int):
            return int(params[name].default), f"{name} default of {entry['class_path'].rsplit('.', 1)[-1]}"
    return None


def estimate_plan(suite: Any, pending: Sequence[Any], executor: dict[str, Any], model: CostModel,
                  read_tree: bool = True, threads: int | None = None) -> Estimate:
    """The estimate of running ``pending`` (jobs of ``suite``'s dry plan) with ``executor`` on this machine."""
    est = Estimate()
    est.executor, est.slots = executor_slots(executor)
    est.startup_s = model.startup_s
    est.processes = 1 + (0 if est.executor == "local" else min(est.slots, len(pending)))
    gpu, (override, _) = on_gpu(suite.trainer_kwargs), thread_override(threads)  # the thread policy: probe jobs at 1
    probe_threads, encoder_threads = override or 1, override or job_threads(executor)
    entries, infos = suite.encoder_configs, suite.encoder_infos
    sizes: dict[tuple[str, float, str], TaskSize] = {}
    passes: dict[tuple[int, str], int] = {}
    groups = stack_groups(pending)
    for job in pending:
        info, dm = infos[job.model], suite.datamodules[job.task.dataset]
        key = (job.task.dataset, float(info.sampling_rate), job.task.name)
        if key not in sizes:
            sizes[key] = task_size(dm, key[1], job.task, read_tree)
        size, (d, _) = sizes[key], embed_dim(entries[job.model], model)
        infer, train, _ = model.throughput(encoder_key(entries[job.model]))
        kind = regime_kind(job.regime, job.task, info.trainable)
        tied = few_validation_subjects(job.task, size.groups, dm.n_folds)
        work = regime_search_work(job.regime, job.task, groups[job.job_id], tied) if kind in ("mlp", "finetune") \
            else None
        units = job_units(kind, job.regime, size, d, (dm.n_folds, dm.n_inner_folds), (infer, train), work)
        seconds = model.job_seconds(kind, units) if kind != "other" else OTHER_JOB_S
        if kind == "rf":  # each tree's own fixed cost, beside the work that grows with rows and depth
            seconds += model.job_seconds("rf_tree", trees_fitted(job.regime, dm.n_inner_folds))
        on_device = gpu and (kind in ("mlp", "finetune") or (kind == "rf" and job.regime.backend() == "cuml"))
        threads = probe_threads if job.regime.uses_embeddings else encoder_threads
        est.threads = max(est.threads, threads) if work is not None else est.threads
        if work is not None and not on_device and threads > 1:  # threads spin-wait in the steps (cost_model)
            fixed = model.job_seconds(kind, 0.0)
            seconds = fixed + (seconds - fixed) * model.thread_factor
        est.jobs.append(JobCost(job.regime.name, kind, seconds, on_device, *(
            (work.trials // work.jobs, work.trial_epochs / work.jobs) if work is not None else (0, 0.0))))
        if job.regime.uses_embeddings or not info.trainable:  # as the suite's uses_cache
            passes[(job.model, job.task.dataset)] = size.windows
    for (m, _), windows in passes.items():
        est.embedding_seconds += windows / model.throughput(encoder_key(entries[m]))[0]
    est.embedding_passes, est.embedding_gpu = len(passes), gpu
    est.assumptions = assumptions(suite, pending, model, sizes, gpu)
    unknown = sorted({j.regime for j in est.jobs if j.kind == "other"})
    if unknown:
        est.assumptions.append(f"{', '.join(unknown)}: not in the cost model, {OTHER_JOB_S:g} s per job assumed")
    if any(j.trials and not j.gpu for j in est.jobs):
        est.assumptions.append(thread_assumption(est.threads, model))
    few = sorted({j.task.name for j in pending if hasattr(j.regime, "search") and few_validation_subjects(
        j.task, sizes[(j.task.dataset, float(infos[j.model].sampling_rate), j.task.name)].groups, suite.datamodules[
            j.task.dataset].n_folds)})
    if few:
        est.assumptions.append(f"{', '.join(few)}: fewer than {FEW_VALIDATION_SUBJECTS} validation subjects, so the "
                               "subject-level scores tie at the top and Hyperband prunes few trials (87 % assumed to "
                               "train every epoch, as measured on synthetic stiffness)")
    if any(j.kind == "rf" and j.gpu for j in est.jobs):
        est.assumptions.append("rf on cuML: scikit-learn's coefficients on the GPU column, an upper bound")
    return est


def assumptions(suite: Any, pending: Sequence[Any], model: CostModel, sizes: dict[tuple[str, float, str], TaskSize],
                gpu: bool) -> list[str]:
    """The lines that say what the figures rest on."""
    out = []
    rates: dict[tuple[str, str], set[float]] = {}
    for (dataset, fs, _), size in sizes.items():
        rates.setdefault((dataset, size.source), set()).add(fs)
    sources = [f"{d} at {'/'.join(f'{r:g}' for r in sorted(fs))} Hz: {source}"
               for (d, source), fs in sorted(rates.items())]
    rows = {f"{k[2]} {s.rows}" for k, s in sizes.items()}
    out.append(f"sizes: {'; '.join(sources)} (labelled windows: {', '.join(sorted(rows))})")
    dims, speeds = [], []
    for entry, info in zip(suite.encoder_configs, suite.encoder_infos, strict=True):
        d, where = embed_dim(entry, model)
        infer, train, measured = model.throughput(encoder_key(entry))
        dims.append(f"{info.name} {d} ({where})" if where != "assumed" else f"{info.name} {d} (assumed: not in "
                    "the catalog, config or class signature; ppgbench calibrate --config <this config> measures it)")
        speed = f"{infer:.0f}/{train:.0f}" if info.trainable else f"{infer:.0f}/-"
        speeds.append(f"{info.name} {speed} windows/s" + ("" if measured else " (assumed: not measured; "
                                                          "ppgbench calibrate --config <this config>)"))
    out.append(f"embedding size: {', '.join(dims)}; encoder inference/training: {', '.join(speeds)}")
    searched = {j.regime.name: j.regime for j in pending if hasattr(j.regime, "search")}
    for name, regime in searched.items():
        s = regime.search
        mean = hyperband_epochs(s.epochs, s.min_resource, s.reduction_factor, s.n_trials)
        out.append(f"{name}: {s.n_trials} trials x {searches_per_job(regime)} search repeat(s) per holdout "
                   f"({regime.subject_repeats} holdouts on subject-level tasks), {s.batch} at a time; a trial trains "
                   f"{mean:.1f} of {s.epochs} epochs on average (Hyperband); the studies of "
                   f"{getattr(regime, 'stack_jobs', 1)} job(s) of a cell train in one stack")
    where = f"this machine, {model.threads} thread(s), {model.device}" if model.calibrated else \
        "uncalibrated defaults: the project's 2-core CI machine, 1 thread"
    out.append(f"CPU seconds per job as measured ({where}), one job (or stack group) after another within each "
               "worker, a stack's cost shared by its jobs; the embedding pass runs once per encoder and dataset "
               "before the jobs (assumed not yet in the shared cache)")
    if gpu and model.device != "cuda":
        out.append("GPU figures: the calibration was measured on the CPU, so they are an upper bound "
                   "(ppgbench calibrate --config <this config> measures it on the trainer's GPU)")
    return out


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
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
    cpu_total = gpu_total = 0.0
    for name in dict.fromkeys(j.regime for j in est.jobs):
        mine = [j for j in est.jobs if j.regime == name]
        cpu = sum(j.seconds for j in mine if not j.gpu)
        gpu = sum(j.seconds for j in mine if j.gpu)
        cpu_total, gpu_total = cpu_total + cpu, gpu_total + gpu
        lines.append(f"{name:<16} {len(mine):>6} {_duration((cpu + gpu) / len(mine)):>9} "
                     f"{_duration(cpu):>10} {_duration(gpu) if gpu else '-':>10}")
    cpu_total += est.startup_s * est.processes
    lines.append(f"{'start-up':<16} {est.processes:>6} {_duration(est.startup_s):>9} "
                 f"{_duration(est.startup_s * est.processes):>10} {'-':>10}")
    if est.embedding_passes:
        where = "GPU" if est.embedding_gpu else "CPU"
        cpu_total += 0 if est.embedding_gpu else est.embedding_seconds
        gpu_total += est.embedding_seconds if est.embedding_gpu else 0
        emb = _duration(est.embedding_seconds)
        lines.append(f"{'embedding pass':<16} {est.embedding_passes:>6} {'':>9} "
                     f"{emb if where == 'CPU' else '-':>10} {emb if where == 'GPU' else '-':>10}")
    lines.append(f"{'total':<16} {len(est.jobs):>6} {'':>9} {_duration(cpu_total):>10} "
                 f"{_duration(gpu_total) if gpu_total else '-':>10}")
    cores, local = os.cpu_count() or 1, est.executor in ("local", "process")
    lines.append(f"wall time with the {est.executor} executor ({est.slots} job(s) at once"
                 + (f", {cores} cores here" if local else "") + f"): about {_duration(wall_seconds(est))}")
    lines += [f"assumes {a}" for a in est.assumptions]
    return "\n".join(lines)


def thread_assumption(threads: int, model: CostModel) -> str:
    """The ``assumes`` line of the searched jobs' torch threads (their CPU grows with them)."""
    if threads <= 1:
        return f"searched jobs at {threads} torch thread(s) each"
    source = "measured by ppgbench calibrate" if model.calibrated else "measured on the 2-core CI machine under load"
    return (f"searched jobs at {threads} torch thread(s) each: {model.thread_factor:.0f}x the CPU time of one "
            f"thread ({source}; torch's threads spin-wait around the stack's tiny steps); the default thread "
            "policy (one thread per probe job; PPGBENCH_THREADS or --threads override it) avoids it")
