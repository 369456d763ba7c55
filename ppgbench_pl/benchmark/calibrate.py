"""``ppgbench calibrate``: measure this machine's per-job costs once, for the dry run's estimate.

Each kind of the cost model runs one real job (:func:`~ppgbench_pl.benchmark.job.run_job`, what a worker runs)
at each of two synthetic sizes, at one thread, on embeddings with some label signal; a line
``seconds = intercept + slope x units`` is fitted per kind through the records' CPU seconds, the searches'
trial-epochs counted from the records. Encoder throughput is measured on the small CNN and a config's encoders.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ppgbench_pl.benchmark.console import quiet_lightning
from ppgbench_pl.benchmark.cost_model import KINDS, CostModel, encoder_key, fit_line, machine_description
from ppgbench_pl.benchmark.cost_sizes import SearchWork
from ppgbench_pl.benchmark.estimate import job_units, on_gpu, trees_fitted
from ppgbench_pl.benchmark.job import run_job
from ppgbench_pl.benchmark.suite import build_entry
from ppgbench_pl.data.registry import get_task
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.probes.threads import blas_threads, intra_op_threads
from ppgbench_pl.regimes.base import JobContext, Regime

CNN_ENTRY = {"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"}
DIM = 64  # embedding size of the calibration's searched jobs
#: The small MLP search timed at one torch thread and at every core's (the thread factor).
THREAD_JOB = {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
              "init_args": {"search": {"n_trials": 3, "n_startup_trials": 1, "max_epochs": 3}}}


@dataclass(frozen=True)
class Setting:
    """Two synthetic sizes and each kind's work at each: the second shows each slope above its per-job cost."""

    sizes: tuple[tuple[int, int], ...] = ((10, 20), (20, 60))  # (subjects, windows per subject)
    dims: tuple[int, ...] = (32, 192)  # embedding size of the probes' jobs
    mlp: tuple[tuple[int, int], ...] = ((2, 2), (5, 6))  # (trials, epochs)
    finetune: tuple[tuple[int, int], ...] = ((1, 1), (2, 3))
    rf_trees: tuple[int, ...] = (20,)
    batches: int = 3
    kinds: tuple[str, ...] = KINDS
    startup: bool = True  # time a fresh process importing the engine (the tests skip it)
    thread_factor: bool = True  # time the small MLP job again at every core's thread (the tests skip it)


#: A few seconds: what the tests run (two kinds, tiny sizes).
TINY = Setting(sizes=((6, 8), (8, 16)), dims=(16, 48), mlp=((1, 1), (2, 3)), finetune=((1, 1), (1, 2)),
               rf_trees=(5,), batches=1, kinds=("ridge", "mlp"), startup=False, thread_factor=False)


def regimes(setting: Setting, size: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Kind -> (synthetic task, regime entry) measured at the ``size``-th size."""
    (trials, epochs), (tune_trials, tune_epochs) = setting.mlp[size], setting.finetune[size]
    search = {"n_trials": trials, "n_startup_trials": 1, "max_epochs": epochs}
    tune = {"n_trials": tune_trials, "n_startup_trials": 1, "max_epochs": tune_epochs, "parallel_trials": 1}
    base = "ppgbench_pl.regimes"
    table: dict[str, tuple[str, dict[str, Any]]] = {
        "ridge": ("synthetic-hr", {"class_path": f"{base}.LinearRegime"}),
        "logistic": ("synthetic-activity", {"class_path": f"{base}.LinearRegime"}),
        "rf": ("synthetic-activity", {"class_path": f"{base}.RandomForestRegime", "init_args": {
            "backend": "sklearn", "n_jobs": 1, "n_estimators": list(setting.rf_trees)}}),
        "mlp": ("synthetic-hr", {"class_path": f"{base}.mlp.MLPRegime", "init_args": {
            "search": search, "search_space": {"batch_size": [32]}, "standardize_targets": True}}),
        "finetune": ("synthetic-hr", {"class_path": f"{base}.finetune.FinetuneRegime", "init_args": {
            "search": tune, "search_space": {"batch_size": [128]}, "standardize_targets": True}}),
    }
    return {k: v for k, v in table.items() if k in setting.kinds}


def run_measured(work: Path, name: str, size: tuple[int, int], task_name: str, entry: dict[str, Any], d: int,
                 trainer_kwargs: dict[str, Any], threads: int = 1) -> tuple[dict[str, Any], Any, Any]:
    """(record, regime, context) of one real job at ``threads`` torch threads, on ``d``-wide random embeddings.

    The label is mixed into a few columns of the embeddings (a learnable signal); the job runs in ``work / name``.
    """
    encoder, task, regime = SmallCNNEncoder(), get_task(task_name), build_entry(Regime, entry)
    dm = PPGDataModule("synthetic", root=str(work / "data"), seeds=[42], folds=[0], synthetic_subjects=size[0],
                       synthetic_windows=size[1])
    fs = float(encoder.sampling_rate)
    view = dm.task_view(fs, task)
    x = np.random.default_rng(0).standard_normal((len(dm.windows(fs).x), d)).astype(np.float32)
    y = np.asarray(view.y, dtype=np.float64)
    x[view.rows, :4] += ((y - y.mean()) / (y.std() or 1.0))[:, None].astype(np.float32)
    ctx = JobContext.build(dm, encoder, task, 42, 0, work / name, embeddings=x,
                           raw_windows=not regime.uses_embeddings, trainer_kwargs=trainer_kwargs)
    with intra_op_threads(threads):
        record, _ = run_job(ctx, regime)
    if record.get("status") != "ok":
        raise ConfigError(f"calibration: the {name.split('-')[0]} job failed ({record.get('error')})")
    return record, regime, ctx


def measure_encoder(encoder: Any, window_s: float, batches: int, device: str, batch_size: int = 64) -> dict[str, Any]:
    """Inference and training windows per second of an encoder on ``device`` (a few batches of random windows)."""
    n = max(int(round(window_s * float(encoder.sampling_rate))), int(getattr(encoder, "min_samples", 1) or 1))
    x = torch.randn(batch_size, n)
    mean, std = x.mean(dim=1, keepdim=True).to(device), x.std(dim=1, keepdim=True).to(device)
    encoder, x = encoder.to(device).eval(), x.to(device)

    def per_second(step: Any) -> float:
        start = time.perf_counter()
        for _ in range(batches):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        return batches * batch_size / max(time.perf_counter() - start, 1e-9)

    with torch.no_grad():
        dim = int(encoder(x, mean, std).shape[-1])  # warm-up, and the embedding size
        infer = per_second(lambda: encoder(x, mean, std))
    out = {"name": str(encoder.name), "inference_per_s": infer, "training_per_s": infer / 3, "embed_dim": dim,
           "device": device, "training": "assumed 1/3 of inference (no parameters)"}
    params = [p for p in encoder.parameters() if p.requires_grad]
    if params and getattr(encoder, "trainable", True):
        encoder.train()
        optimiser, inputs = torch.optim.AdamW(params, lr=1e-4), encoder.preprocess(x, mean, std).float()

        def step() -> None:
            optimiser.zero_grad()
            encoder.forward_features(inputs).float().pow(2).mean().backward()
            optimiser.step()

        out["training_per_s"], out["training"] = per_second(step), "measured"
    encoder.cpu().eval()
    return out


def gram_slope(n: int = 4000, d: int = 256, repeats: int = 3) -> float:
    """Seconds per n x d^2 of a Gram product at one BLAS thread: the ridge work its small jobs may not show."""
    x = np.random.default_rng(0).standard_normal((n, d))
    best = float("inf")
    with blas_threads(1):
        for _ in range(repeats):
            start = time.process_time()
            x.T @ x
            best = min(best, time.process_time() - start)
    return best / (n * d * d)


def startup_seconds() -> float:
    """CPU seconds of a fresh Python process importing what a worker imports before its first job."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import ppgbench_pl.benchmark.worker, ppgbench_pl.benchmark.suite"],
                   check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2)


def measure_regimes(setting: Setting, work: Path, trainer_kwargs: dict[str, Any],
                    cnn: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Run each kind's job at each size; fit (intercept, slope) per kind on the records' CPU seconds."""
    points: dict[str, list[tuple[float, float]]] = {}
    trees = 1
    for size, subjects_windows in enumerate(setting.sizes):
        for kind, (task, entry) in regimes(setting, size).items():
            d = setting.dims[size] if kind in ("ridge", "logistic", "rf") else DIM
            record, regime, ctx = run_measured(work, f"{kind}-{size}", subjects_windows, task, entry, d, trainer_kwargs)
            studies = [result.get("optuna") or {} for result in record.get("results") or []]
            trials = [t for study in studies for t in study.get("trials") or []]  # epochs counted, whatever the budget
            work_done = SearchWork(1, 1, len(trials), sum(len(t.get("intermediate_values") or {}) for t in trials))
            units = job_units(kind, regime, len(ctx.split.train), d, len(ctx.task.classes) or 1, ctx.n_inner_folds,
                              (cnn["inference_per_s"], cnn["training_per_s"]), work_done)
            trees = trees_fitted(regime, ctx.n_inner_folds) if kind == "rf" else trees
            points.setdefault(kind, []).append((units, float(record["cpu_seconds"])))
    fitted = {kind: fit_line(p) for kind, p in points.items()}
    if "ridge" in fitted and fitted["ridge"][1] == 0.0:
        slope = gram_slope()
        fitted["ridge"] = (max(min(s - slope * u for u, s in points["ridge"]), 0.0), slope)
    if "rf" in fitted:  # the per-job cost is the probes' (as the ridge jobs measured it); the rest is per tree
        overhead, (intercept, slope) = fitted.get("ridge", (0.0, 0.0))[0], fitted["rf"]
        fitted.update(rf=(min(overhead, intercept), slope), rf_tree=(0.0, max(intercept - overhead, 0.0) / trees))
    return fitted


def measure_listed(model: CostModel, encoders: Sequence[dict[str, Any]], trainer_kwargs: dict[str, Any],
                   window_s: float = 10.0, batches: int = 3) -> CostModel:
    """``model`` with the throughput of some encoder entries measured (or measured again) and added."""
    device = "cuda" if on_gpu({"accelerator": "cpu", **dict(trainer_kwargs or {})}) else "cpu"
    with intra_op_threads(1):
        for entry in encoders:
            model.encoders[encoder_key(entry)] = measure_encoder(build_entry(PPGEncoder, entry), window_s, batches,
                                                                 device)
    return model


def calibrate(encoders: Sequence[dict[str, Any]] = (), trainer_kwargs: dict[str, Any] | None = None,
              setting: Setting = Setting(), window_s: float = 10.0) -> CostModel:
    """Measure the cost model on this machine (and the throughput of each encoder entry); nothing is saved.

    Args:
        encoders: ``class_path``/``init_args`` entries whose throughput to measure (a config's encoders).
        trainer_kwargs: Device settings of the run (``accelerator``...): the neural jobs and encoders run there.
        setting: Sizes and budgets (:data:`TINY` for tests).
        window_s: Window length of the encoders' throughput batches.
    """
    quiet_lightning()
    trainer_kwargs = {"accelerator": "cpu", "devices": 1, **dict(trainer_kwargs or {})}
    start = time.perf_counter()
    model = CostModel(machine_description(), calibrated=True, threads=1,
                      device="cuda" if on_gpu(trainer_kwargs) else "cpu")
    measure_listed(model, [CNN_ENTRY], trainer_kwargs, window_s, max(setting.batches, 2))
    cnn = model.encoders[encoder_key(CNN_ENTRY)]
    measure_listed(model, encoders, trainer_kwargs, window_s, setting.batches)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="ppgbench-calibrate-") as tmp:
        model.coefficients = measure_regimes(setting, Path(tmp), trainer_kwargs, cnn)
        if setting.thread_factor and model.device == "cpu" and cores > 1:  # CPU at every core's thread over one
            seconds = [float(run_measured(Path(tmp), f"mlp-threads-{n}", (20, 20), "synthetic-hr", THREAD_JOB, DIM,
                                          trainer_kwargs, n)[0].get("cpu_seconds") or 0.0) for n in (1, cores)]
            model.thread_factor = round(max(seconds[1] / seconds[0], 1.0), 2) if seconds[0] > 0 else 1.0
    if setting.startup:
        model.startup_s = startup_seconds()
    model.seconds = round(time.perf_counter() - start, 1)
    return model
