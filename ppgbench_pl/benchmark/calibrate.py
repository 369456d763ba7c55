"""``ppgbench calibrate``: measure this machine's per-job costs once, for the dry run's estimate.

A short measured run of the real job path (:func:`ppgbench_pl.benchmark.job.run_job`, the code a worker
runs): each regime kind of the cost model (:mod:`ppgbench_pl.benchmark.cost_model`) runs one job at each of
two sizes of the synthetic dataset, on embeddings of a fixed size with some label signal, and a line
``seconds = intercept + slope x units`` is fitted per kind through the records' CPU seconds (one thread, as
the process executor gives each worker on a small machine). The searches are small (a few trials and
epochs) but their trial-epochs are counted from the records, so the slope is per trial-epoch-row whatever
the budget. Encoder throughput (inference and training windows per second) is measured on the small CNN
(which the finetune slope is fitted against) and on every encoder of a given config, a few batches each.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppgbench_pl.benchmark.cost_model import (
    KINDS,
    CostModel,
    encoder_key,
    fit_line,
    machine_description,
    stack_units,
)
from ppgbench_pl.benchmark.estimate import forest_units, mlp_width, on_gpu, trees_fitted

CNN_ENTRY = {"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"}
#: Embedding size of the calibration's probes.
DIM = 64


@dataclass(frozen=True)
class Setting:
    """How much the calibration measures: two synthetic sizes, and per size the work of each kind.

    The second size does enough work for each kind's slope to stand out of its per-job cost: wider
    embeddings for the probes, more trials and epochs for the searches.
    """

    sizes: tuple[tuple[int, int], ...] = ((10, 20), (20, 60))  # (subjects, windows per subject)
    dims: tuple[int, ...] = (32, 192)  # embedding size of the probes' jobs
    mlp: tuple[tuple[int, int], ...] = ((2, 2), (5, 6))  # (trials, epochs)
    finetune: tuple[tuple[int, int], ...] = ((1, 1), (2, 3))
    rf_trees: tuple[int, ...] = (20,)
    batches: int = 3
    kinds: tuple[str, ...] = KINDS
    startup: bool = True  # time a fresh process importing the engine (seconds; the tests skip it)
    thread_factor: bool = True  # time the small MLP job again at every core's thread (the tests skip it)


#: A few seconds: what the tests run (two kinds, tiny sizes).
TINY = Setting(sizes=((6, 8), (8, 16)), dims=(16, 48), mlp=((1, 1), (2, 3)), finetune=((1, 1), (1, 2)),
               rf_trees=(5,), batches=1, kinds=("ridge", "mlp"), startup=False, thread_factor=False)


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch at one thread for the block (BLAS is limited by the probes themselves)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def features(view_y: np.ndarray, rows: np.ndarray, n_windows: int, dim: int, seed: int = 0) -> np.ndarray:
    """Random embeddings of every window with the task's label mixed into a few columns (a learnable signal)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_windows, dim)).astype(np.float32)
    y = np.asarray(view_y, dtype=np.float64)
    signal = (y - y.mean()) / (y.std() or 1.0)
    x[rows, :4] += signal[:, None].astype(np.float32)
    return x


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


def trial_epochs(record: dict[str, Any]) -> int:
    """Epochs trained by every trial of a neural job's searches, counted from its record."""
    return sum(sum(_study_epochs(result)) for result in record.get("results") or [])


def _study_epochs(result: dict[str, Any]) -> list[int]:
    """Epochs of each trial of one repeat's study, in trial order."""
    trials = sorted(((result.get("optuna") or {}).get("trials") or []), key=lambda t: t.get("number", 0))
    return [len(t.get("intermediate_values") or {}) for t in trials]


def stack_epochs(record: dict[str, Any], batch: int) -> int:
    """Epochs of a job's stacked fit: its longest study, each batch of ``batch`` trials lasting its longest."""
    longest = 0
    for result in record.get("results") or []:
        epochs = _study_epochs(result)
        longest = max(longest, sum(max(epochs[i:i + batch]) for i in range(0, len(epochs), batch)))
    return longest


def measure_encoder(encoder: Any, window_s: float, batches: int, device: str, batch_size: int = 64) -> dict[str, Any]:
    """Inference and training windows per second of an encoder on ``device`` (a few batches of random windows)."""
    import torch

    n = max(int(round(window_s * float(encoder.sampling_rate))), int(getattr(encoder, "min_samples", 1) or 1))
    x = torch.randn(batch_size, n)
    mean, std = x.mean(dim=1, keepdim=True), x.std(dim=1, keepdim=True)
    encoder = encoder.to(device)
    x, mean, std = x.to(device), mean.to(device), std.to(device)
    encoder.eval()
    with torch.no_grad():
        dim = int(encoder(x, mean, std).shape[-1])  # warm-up, and the embedding size
        start = time.perf_counter()
        for _ in range(batches):
            encoder(x, mean, std)
        if device == "cuda":
            torch.cuda.synchronize()
        infer = batches * batch_size / max(time.perf_counter() - start, 1e-9)
    out = {"name": str(encoder.name), "inference_per_s": infer, "training_per_s": infer / 3, "embed_dim": dim,
           "device": device, "training": "assumed 1/3 of inference (no parameters)"}
    params = [p for p in encoder.parameters() if p.requires_grad]
    if params and getattr(encoder, "trainable", True):
        encoder.train()
        optimiser = torch.optim.AdamW(params, lr=1e-4)
        inputs = encoder.preprocess(x, mean, std).float()
        start = time.perf_counter()
        for _ in range(batches):
            optimiser.zero_grad()
            encoder.forward_features(inputs).float().pow(2).mean().backward()
            optimiser.step()
        if device == "cuda":
            torch.cuda.synchronize()
        out["training_per_s"] = batches * batch_size / max(time.perf_counter() - start, 1e-9)
        out["training"] = "measured"
    encoder.cpu().eval()
    return out


def _units(kind: str, record: dict[str, Any], n: int, d: int, classes: int, regime: Any,
           cnn: dict[str, Any]) -> float:
    """The cost model's units of one measured job (as :func:`ppgbench_pl.benchmark.estimate.job_units`)."""
    if kind == "ridge":
        return 4 * n * d * d
    if kind == "logistic":
        return 4 * n * d * classes
    if kind == "rf":
        return 4 * forest_units(regime, n, d)
    epochs, stack = trial_epochs(record), stack_epochs(record, int(regime.search.batch))
    if kind == "mlp":
        return stack_units(kind, epochs, stack, n * mlp_width(d))
    return stack_units(kind, epochs, stack, 0.8 * n / cnn["training_per_s"] + 0.2 * n / cnn["inference_per_s"])


def gram_slope(n: int = 4000, d: int = 256, repeats: int = 3) -> float:
    """Seconds per n x d^2 of a Gram product at one BLAS thread.

    The ridge probe's work, used when its jobs are too small to show it above their per-job cost.
    """
    from ppgbench_pl.probes.threads import blas_threads

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
    import resource
    import subprocess
    import sys

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import ppgbench_pl.benchmark.worker, ppgbench_pl.benchmark.suite"],
                   check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2)


def measure_regimes(setting: Setting, work: Path, trainer_kwargs: dict[str, Any],
                    cnn: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Run each kind's job at each size; fit (intercept, slope) per kind on the records' CPU seconds."""
    from ppgbench_pl.benchmark.job import run_job
    from ppgbench_pl.benchmark.suite import build_entry
    from ppgbench_pl.data.registry import get_task
    from ppgbench_pl.datamodules.ppg import PPGDataModule
    from ppgbench_pl.encoders.cnn import SmallCNNEncoder
    from ppgbench_pl.errors import ConfigError
    from ppgbench_pl.regimes.base import JobContext, Regime

    points: dict[str, list[tuple[float, float]]] = {}
    trees = 1
    encoder = SmallCNNEncoder()
    fs = float(encoder.sampling_rate)
    for size, (subjects, windows) in enumerate(setting.sizes):
        dm = PPGDataModule("synthetic", root=str(work / "data"), seeds=[42], folds=[0], synthetic_subjects=subjects,
                           synthetic_windows=windows)
        for kind, (task_name, entry) in regimes(setting, size).items():
            task, regime = get_task(task_name), build_entry(Regime, entry)
            d = setting.dims[size] if kind in ("ridge", "logistic", "rf") else DIM
            view = dm.task_view(fs, task)
            x = features(view.y, view.rows, len(dm.windows(fs).x), d)
            ctx = JobContext.build(dm, encoder, task, 42, 0, work / f"{kind}-{size}", embeddings=x,
                                   raw_windows=not regime.uses_embeddings, trainer_kwargs=trainer_kwargs)
            record, _ = run_job(ctx, regime)
            if record.get("status") != "ok":
                raise ConfigError(f"calibration: the {kind} job failed ({record.get('error')})")
            units = _units(kind, record, len(ctx.split.train), d, len(task.classes) or 1, regime, cnn)
            if kind == "rf":
                trees = trees_fitted(regime, dm.n_inner_folds)
            points.setdefault(kind, []).append((units, float(record["cpu_seconds"])))
    fitted = {kind: fit_line(p) for kind, p in points.items()}
    if "ridge" in fitted and fitted["ridge"][1] == 0.0:
        slope = gram_slope()
        fitted["ridge"] = (max(min(s - slope * u for u, s in points["ridge"]), 0.0), slope)
    if "rf" in fitted:
        fitted.update(split_forest(points["rf"], trees, fitted.get("ridge", (0.0, 0.0))[0]))
    return fitted


def measure_thread_factor(work: Path, trainer_kwargs: dict[str, Any], threads: int) -> float:
    """CPU seconds of a small MLP search at ``threads`` torch threads over those at one (the same job twice)."""
    import torch

    from ppgbench_pl.benchmark.job import run_job
    from ppgbench_pl.benchmark.suite import build_entry
    from ppgbench_pl.data.registry import get_task
    from ppgbench_pl.datamodules.ppg import PPGDataModule
    from ppgbench_pl.encoders.cnn import SmallCNNEncoder
    from ppgbench_pl.regimes.base import JobContext, Regime

    encoder, task = SmallCNNEncoder(), get_task("synthetic-hr")
    dm = PPGDataModule("synthetic", root=str(work / "data"), seeds=[42], folds=[0], synthetic_subjects=20,
                       synthetic_windows=20)
    view, fs = dm.task_view(float(encoder.sampling_rate), task), float(encoder.sampling_rate)
    x = features(view.y, view.rows, len(dm.windows(fs).x), DIM)
    seconds = []
    for n in (1, threads):
        regime = build_entry(Regime, {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime", "init_args": {
            "search": {"n_trials": 3, "n_startup_trials": 1, "max_epochs": 3}}})
        ctx = JobContext.build(dm, encoder, task, 42, 0, work / f"threads-{n}", embeddings=x, raw_windows=False,
                               trainer_kwargs=trainer_kwargs)
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            record, _ = run_job(ctx, regime)
        finally:
            torch.set_num_threads(before)
        seconds.append(float(record.get("cpu_seconds") or 0.0))
    return round(max(seconds[1] / seconds[0], 1.0), 2) if seconds[0] > 0 else 1.0


def split_forest(points: list[tuple[float, float]], trees: int, overhead: float) -> dict[str, tuple[float, float]]:
    """The forest's line split into a per-job cost, a cost per tree grown and one per unit of work.

    The per-job cost is the probes' overhead, as the ridge jobs measured it; both sizes grew the same
    ``trees``, so what the line's intercept holds beyond it is the trees' fixed cost.
    """
    intercept, slope = fit_line(points)
    per_tree = max(intercept - overhead, 0.0) / trees
    return {"rf": (min(overhead, intercept), slope), "rf_tree": (0.0, per_tree)}


def calibrate(encoders: Sequence[dict[str, Any]] = (), trainer_kwargs: dict[str, Any] | None = None,
              setting: Setting = Setting(), window_s: float = 10.0) -> CostModel:
    """Measure the cost model on this machine (and the throughput of each encoder entry); nothing is saved.

    Args:
        encoders: ``class_path``/``init_args`` entries whose throughput to measure (a config's encoders).
        trainer_kwargs: Device settings of the run (``accelerator``...): the neural jobs and encoders run there.
        setting: Sizes and budgets (:data:`TINY` for tests).
        window_s: Window length of the encoders' throughput batches.
    """
    from ppgbench_pl.benchmark.console import quiet_lightning
    from ppgbench_pl.benchmark.suite import build_entry
    from ppgbench_pl.encoders.base import PPGEncoder
    from ppgbench_pl.encoders.cnn import SmallCNNEncoder

    quiet_lightning()
    trainer_kwargs = {"accelerator": "cpu", "devices": 1, **dict(trainer_kwargs or {})}
    device = "cuda" if on_gpu(trainer_kwargs) else "cpu"
    start = time.perf_counter()
    with one_thread(), tempfile.TemporaryDirectory(prefix="ppgbench-calibrate-") as tmp:
        cnn = measure_encoder(SmallCNNEncoder(), window_s, max(setting.batches, 2), device)
        measured = {encoder_key(CNN_ENTRY): cnn}
        for entry in encoders:
            measured[encoder_key(entry)] = measure_encoder(build_entry(PPGEncoder, entry), window_s,
                                                           setting.batches, device)
        coefficients = measure_regimes(setting, Path(tmp), trainer_kwargs, cnn)
    model = CostModel(machine_description(), calibrated=True, threads=1, device=device, coefficients=coefficients,
                      encoders=measured)
    if setting.startup:
        model.startup_s = startup_seconds()
    cores = os.cpu_count() or 1
    if setting.thread_factor and device == "cpu" and cores > 1:
        with tempfile.TemporaryDirectory(prefix="ppgbench-calibrate-") as tmp:
            model.thread_factor = measure_thread_factor(Path(tmp), trainer_kwargs, cores)
    model.seconds = round(time.perf_counter() - start, 1)
    return model


def measure_listed(model: CostModel, encoders: Sequence[dict[str, Any]], trainer_kwargs: dict[str, Any],
                   window_s: float = 10.0, batches: int = 3) -> CostModel:
    """``model`` with the throughput of some encoder entries measured (or measured again) and added."""
    from ppgbench_pl.benchmark.suite import build_entry
    from ppgbench_pl.encoders.base import PPGEncoder

    device = "cuda" if on_gpu({"accelerator": "cpu", **dict(trainer_kwargs or {})}) else "cpu"
    with one_thread():
        for entry in encoders:
            model.encoders[encoder_key(entry)] = measure_encoder(build_entry(PPGEncoder, entry), window_s, batches,
                                                                 device)
    return model
