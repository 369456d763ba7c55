"""The dry run's cost estimate: per pending job, the machine's rate for its regime times its units of work."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ppgbench_pl.benchmark import cost_model as cm
from ppgbench_pl.benchmark.cost_model import RATES, CostModel, calibration_path, load_model
from ppgbench_pl.errors import PPGBenchError

OTHER_JOB_S = 1.0  # seconds assumed per job of a regime the cost model does not know (a user's own callback)
#: CPU of a searched job at several torch threads over one: torch's pool spin-waits around the stack's tiny
#: steps (4-33x measured on the 2-core CI machine under load, docs/performance.md).
THREAD_FACTOR = 14.0
#: Size costing as much as a unit's fixed part (2-core CI machine, 2026-12-06): n d^2 per ridge probe, n d c per
#: logistic one, n x depth x split features per rf tree, n (1 + d / 64) / 2 per mlp trial-epoch (no per-job cost).
SIZE_SCALE = {"ridge": 8e8, "logistic": 1e6, "rf": 25_000.0, "mlp": 3000.0}


@dataclass
class JobCost:
    """One pending job's estimated seconds, and the trials and trial-epochs of its searches (a searched job)."""

    regime: str
    kind: str
    seconds: float
    gpu: bool
    trials: int = 0
    trial_epochs: float = 0.0
    #: Trains networks: the local executor runs it in a job process beside others (the rest in the command's).
    side_by_side: bool = True


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


def job_units(kind: str, regime: Any, n: float, d: int, classes: int, inner: int, trial_epochs: float = 0.0,
              train_per_s: float = 1.0) -> float:
    """A job's units on ``n`` rows of ``d`` features (finetune: encoder-seconds of its trial-epochs).

    ``1 + size`` per fitted probe or tree (each inner fold and the refit) or per mlp trial-epoch.
    """
    if kind in ("ridge", "logistic"):
        return (inner + 1) * (1 + n * d * (d if kind == "ridge" else max(classes, 2)) / SIZE_SCALE[kind])
    if kind == "rf":
        split = [math.sqrt(d) if v == "sqrt" else math.log2(max(d, 2)) if v == "log2"
                 else float(v) * d if isinstance(v, float) else float(v) for v in regime.max_features]
        depth = [min(float(depth), math.log2(max(n, 2))) for depth in regime.max_depth]
        trees = (inner + 1) * sum(regime.n_estimators) * len(regime.max_depth) * len(split) \
            * len(regime.min_samples_split) * len(regime.min_samples_leaf)
        return trees * (1 + n * sum(depth) / len(depth) * sum(split) / len(split) / SIZE_SCALE["rf"])
    if kind == "mlp":
        return trial_epochs * (1 + n * (1 + d / 64) / 2 / SIZE_SCALE["mlp"])
    return trial_epochs * n / train_per_s if kind == "finetune" else 0.0


def executor_shape(entry: Any, threads: int | None) -> tuple[str, int, Any]:
    """(name, jobs at once, thread policy) of the run's executor (an entry is built as the run builds it)."""
    from ppgbench_pl.benchmark.executors import Executor
    from ppgbench_pl.benchmark.suite import build_entry
    from ppgbench_pl.benchmark.thread_policy import choose_policy

    executor = build_entry(Executor, entry)
    name = type(executor).__name__.removesuffix("Executor").lower() or type(executor).__name__
    slots = executor.processes_here() if name == "local" else \
        getattr(executor, "workers", None) or getattr(executor, "parallelism", None) or 1
    return name, int(slots), choose_policy(executor, threads)


def on_gpu(trainer_kwargs: dict[str, Any]) -> bool:
    """Whether the neural regimes and the embedding pass would run on a CUDA GPU."""
    accelerator = str(trainer_kwargs.get("accelerator") or "auto")
    if accelerator == "cpu":
        return False
    import torch

    return accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available()


def estimate_plan(suite: Any, pending: Sequence[Any], executor: Any, model: CostModel, read_tree: bool = True,
                  threads: int | None = None) -> Estimate:
    """The estimate of running ``pending`` (jobs of ``suite``'s dry plan) with ``executor`` on this machine."""
    est = Estimate(startup_s=model.startup_s)
    est.executor, est.slots, policy = executor_shape(executor, threads)
    est.processes = 1 + (0 if est.executor == "local" else min(est.slots, len(pending)))
    gpu = est.embedding_gpu = on_gpu(suite.trainer_kwargs)
    sizes: dict[tuple[str, float, str], cm.TaskSize] = {}
    passes: dict[tuple[int, str], int] = {}
    few: set[str] = set()
    for job in pending:
        info, entry, dm = suite.encoder_infos[job.model], suite.encoder_configs[job.model], \
            suite.datamodules[job.task.dataset]
        key = (job.task.dataset, float(info.sampling_rate), job.task.name)
        size = sizes[key] = sizes.get(key) or cm.task_size(dm, key[1], job.task, read_tree)
        kind, trials, trial_epochs = regime_kind(job.regime, job.task, info.trainable), 0, 0.0
        searched = kind in ("mlp", "finetune")
        if searched:
            tied = cm.few_validation_subjects(job.task, size.groups, dm.n_folds)
            few.update([job.task.name] if tied else [])
            trials, trial_epochs = cm.search_trials(job.regime, job.task, tied)
        n = size.rows * (dm.n_folds - 1) / dm.n_folds * float(getattr(job.regime, "fraction", 1.0))
        units = job_units(kind, job.regime, n, cm.embed_dim(entry, model)[0], size.classes,
                          dm.n_inner_folds, trial_epochs, model.throughput(entry, info.name)[1])
        seconds = model.rates.get(kind, RATES[kind]) * units if kind != "other" else OTHER_JOB_S
        on_device = gpu and (searched or (kind == "rf" and job.regime.backend() == "cuml"))
        job_threads = (policy.for_job(job.regime.uses_embeddings) or 1) if searched else 1
        est.threads = max(est.threads, job_threads)
        seconds *= THREAD_FACTOR if job_threads > 1 and not on_device else 1.0  # threads spin around tiny steps
        est.jobs.append(JobCost(job.regime.name, kind, seconds, on_device, trials, trial_epochs,
                                job.regime.trains_trials))
        if job.regime.uses_embeddings or not info.trainable:  # as the suite's uses_cache
            passes[(job.model, job.task.dataset)] = size.windows
    est.embedding_seconds = sum(w / model.throughput(suite.encoder_configs[m], suite.encoder_infos[m].name)[0]
                                for (m, _), w in passes.items())
    est.embedding_passes = len(passes)
    est.assumptions = assumptions(suite, pending, model, sizes, est, few)
    return est


def assumptions(suite: Any, pending: Sequence[Any], model: CostModel,
                sizes: dict[tuple[str, float, str], cm.TaskSize], est: Estimate, few: set[str]) -> list[str]:
    """The ``assumes`` lines: what the figures rest on."""
    from ppgbench_pl.regimes.search_seeds import searches_per_job

    rates: dict[tuple[str, str], set[float]] = {}
    for (dataset, fs, _), size in sizes.items():
        rates.setdefault((dataset, size.source), set()).add(fs)
    sources = [f"{d} at {'/'.join(f'{r:g}' for r in sorted(fs))} Hz: {source}"
               for (d, source), fs in sorted(rates.items())]
    rows = sorted({f"{k[2]} {s.rows}" for k, s in sizes.items()})
    dims, speeds, measure = [], [], "ppgbench calibrate --config <this config>"
    for entry, info in zip(suite.encoder_configs, suite.encoder_infos, strict=True):
        d, where = cm.embed_dim(entry, model)
        infer, train, measured = model.throughput(entry, info.name)
        dims.append(f"{info.name} {d} ({where})" if where != "assumed" else
                    f"{info.name} {d} (assumed: not in the catalog, config or class signature; {measure} measures it)")
        speeds.append(f"{info.name} {infer:.0f}/{f'{train:.0f}' if info.trainable else '-'} windows/s"
                      + ("" if measured else f" (assumed: not measured; {measure})"))
    out = [f"sizes: {'; '.join(sources)} (labelled windows: {', '.join(rows)})",
           f"embedding size: {', '.join(dims)}; encoder inference/training: {', '.join(speeds)}"]
    for name, regime in {j.regime.name: j.regime for j in pending if hasattr(j.regime, "search")}.items():
        s = regime.search
        mean = cm.hyperband_epochs(s.epochs, s.min_resource, s.reduction_factor, s.n_trials)
        out.append(f"{name}: {s.n_trials} trials x {searches_per_job(regime)} search repeat(s) per holdout "
                   f"({regime.subject_repeats} holdouts on subject-level tasks), {s.batch} at a time; a trial trains "
                   f"{mean:.1f} of {s.epochs} epochs on average (Hyperband); the studies of "
                   f"{getattr(regime, 'stack_jobs', 1)} job(s) of a cell train in one stack")
    where = f"this machine, 1 thread, {model.device}" if model.calibrated else \
        "uncalibrated defaults: the project's 2-core CI machine, 1 thread"
    out.append(f"CPU seconds per job as rate x units of work ({where}; docs/performance.md), one job after another "
               "within each worker; the embedding pass runs once per encoder and dataset before the jobs (assumed "
               "not yet in the shared cache)")
    if est.embedding_gpu and model.device != "cuda":
        out.append(f"GPU figures: the calibration was measured on the CPU, so they are an upper bound ({measure} "
                   "measures it on the trainer's GPU)")
    unknown = sorted({j.regime for j in est.jobs if j.kind == "other"})
    if unknown:
        out.append(f"{', '.join(unknown)}: not in the cost model, {OTHER_JOB_S:g} s per job assumed")
    if any(j.trials and not j.gpu for j in est.jobs):  # a searched job's CPU grows with its torch threads
        out.append(f"searched jobs at {est.threads} torch thread(s) each" + ("" if est.threads <= 1 else (
            f": {THREAD_FACTOR:.0f}x the CPU time of one thread (measured 4-33x on a shared 2-core machine: an "
            "order of magnitude, not x1.5; torch's threads spin-wait around the stack's tiny steps); the default "
            "thread policy (one thread per probe job; PPGBENCH_THREADS or --threads override it) avoids it")))
    if few:
        out.append(f"{', '.join(sorted(few))}: fewer than {cm.FEW_VALIDATION_SUBJECTS} validation subjects, "
                   "so the subject-level scores tie at the top and Hyperband prunes few trials (87 % assumed to train "
                   "every epoch, as measured on synthetic stiffness)")
    if any(j.kind == "rf" and j.gpu for j in est.jobs):
        out.append("rf on cuML: scikit-learn's rates on the GPU column, an upper bound")
    return out


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 48 * 3600:
        return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days" if seconds < 1e9 else f"{seconds / 86400:.3g} days"


def wall_seconds(est: Estimate) -> float:
    """The embedding pass, then the jobs spread evenly over the executor's slots (a local pool: at most the cores).

    The local executor forks its job processes (no start-up) for the jobs that train networks only.
    """
    local = est.executor in ("local", "process")
    spread = [j.side_by_side or est.executor != "local" for j in est.jobs]
    slots = max(min(est.slots, sum(spread), (os.cpu_count() or 1) if local else est.slots), 1)
    workers = est.startup_s if est.processes > 1 else 0.0  # workers start together, after the command
    here = sum(j.seconds for j, s in zip(est.jobs, spread, strict=True) if not s)
    there = sum(j.seconds for j, s in zip(est.jobs, spread, strict=True) if s)
    return est.startup_s + workers + est.embedding_seconds + here + there / slots


def describe_estimate(est: Estimate, model: CostModel) -> str:
    """The estimate as the dry run prints it: one row per regime, the embedding pass, totals, assumptions."""
    if model.calibrated:
        head = f"estimate for this machine ({model.machine}; calibrated {model.created}, ppgbench calibrate):"
    else:
        head = (f"estimate UNCALIBRATED: no calibration for this machine ({calibration_path(model.machine)}); "
                "figures use the documented defaults (docs/performance.md); run `ppgbench calibrate` (about a minute)")
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


def dry_run_text(run: Any) -> str:
    """``--dry-run``: the real run's checks (same order, same one-line refusals), then the plan, budget and cost."""
    from ppgbench_pl.benchmark import preflight
    from ppgbench_pl.benchmark.budget import describe_budget
    from ppgbench_pl.benchmark.identity import check_identity, package_versions, suite_identity
    from ppgbench_pl.benchmark.plan import describe_plan
    from ppgbench_pl.results.folder_sync import read_record_complete

    suite = run.suite()
    preflight.check_strategy(suite, run.setup.executor)
    preflight.check_precision(suite)
    preflight.check_output_dir(run.run_dir)
    plan = suite.plan(dry=True)
    data_problem: str | None = None
    found: dict[str, str] = {}
    skipped: dict[str, str] = {}
    try:  # the data may not be there yet: a dry run lists what it can
        plan, skipped = preflight.evaluable_plan(suite, plan, dry=True)
        found = preflight.degenerate_jobs(suite, plan, dry=True)
    except PPGBenchError as exc:
        data_problem = str(exc).splitlines()[0]
    has_run_json = (run.run_dir / "run.json").exists()
    if data_problem is None and has_run_json:  # the identity needs the data and the built encoders
        check_identity(run.run_dir, suite_identity(suite), {"versions": package_versions()},
                       allow_code_change=run.settings.allow_code_change)
    done = {j.job_id for j in plan if read_record_complete(run.run_dir, j.job_id) is not None}
    lines = [describe_plan(plan, done), describe_budget(suite)]
    if found:
        lines.append(preflight.describe_degenerate(found))
    if skipped:
        lines.append(preflight.describe_skipped(skipped))
    if data_problem is not None:
        checked = " and the run folder's identity was not checked" if has_run_json else ""
        lines.append(f"data not readable ({data_problem}): sizes below are assumed{checked}; the real run stops there")
    pending = [j for j in plan if j.job_id not in done and j.job_id not in found]
    model = load_model()
    lines.append(describe_estimate(estimate_plan(suite, pending, run.settings.executor, model,
                                                 read_tree=data_problem is None, threads=run.threads), model))
    return "\n".join(lines)
