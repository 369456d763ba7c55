"""``ppgbench calibrate``: each kind's rate is one real job's (``run_job``) CPU seconds over its units, 1 thread."""

from __future__ import annotations

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
from ppgbench_pl.benchmark.cost_model import KINDS, CostModel, encoder_key, machine_description
from ppgbench_pl.benchmark.estimate import job_units, on_gpu
from ppgbench_pl.benchmark.job import run_job
from ppgbench_pl.benchmark.suite import build_entry
from ppgbench_pl.data.registry import get_task
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.probes.threads import intra_op_threads
from ppgbench_pl.regimes.base import JobContext, Regime

CNN_ENTRY = {"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"}
DIM = 64  # embedding size of the calibration's searched jobs


@dataclass(frozen=True)
class Setting:
    """The synthetic size the jobs run at and their budgets: large enough that each kind's work shows."""

    size: tuple[int, int] = (20, 60)  # (subjects, windows per subject)
    dim: int = 192  # embedding size of the probes' jobs
    mlp: tuple[int, int] = (8, 10)  # (trials, epochs): the trial-epochs outweigh the job's fixed cost
    finetune: tuple[int, int] = (3, 5)
    rf_trees: int = 20
    batches: int = 3  # of the encoders' throughput
    kinds: tuple[str, ...] = KINDS
    startup: bool = True  # time a fresh process importing the engine (the tests skip it)


#: A few seconds: what the tests run (two kinds, tiny sizes).
TINY = Setting(size=(8, 16), dim=48, mlp=(2, 3), finetune=(1, 2), rf_trees=5, batches=1, kinds=("ridge", "mlp"),
               startup=False)


def measure_rate(work: Path, kind: str, setting: Setting, trainer_kwargs: dict[str, Any], train_per_s: float) -> float:
    """Seconds per unit of ``kind``: one job in ``work / kind`` on random embeddings with the label mixed in."""
    search = {"n_trials": setting.mlp[0], "n_startup_trials": 1, "max_epochs": setting.mlp[1]}
    tune = {"n_trials": setting.finetune[0], "n_startup_trials": 1, "max_epochs": setting.finetune[1],
            "parallel_trials": 1}
    base = "ppgbench_pl.regimes"
    task_name, entry = {  # kind -> (synthetic task, regime entry)
        "ridge": ("synthetic-hr", {"class_path": f"{base}.LinearRegime"}),
        "logistic": ("synthetic-activity", {"class_path": f"{base}.LinearRegime"}),
        "rf": ("synthetic-activity", {"class_path": f"{base}.RandomForestRegime", "init_args": {
            "backend": "sklearn", "n_jobs": 1, "n_estimators": [setting.rf_trees]}}),
        "mlp": ("synthetic-hr", {"class_path": f"{base}.mlp.MLPRegime", "init_args": {
            "search": search, "search_space": {"batch_size": [32]}, "standardize_targets": True}}),
        "finetune": ("synthetic-hr", {"class_path": f"{base}.finetune.FinetuneRegime", "init_args": {
            "search": tune, "search_space": {"batch_size": [128]}, "standardize_targets": True}}),
    }[kind]
    encoder, task, regime = SmallCNNEncoder(), get_task(task_name), build_entry(Regime, entry)
    dm = PPGDataModule("synthetic", root=str(work / "data"), seeds=[42], folds=[0], synthetic_subjects=setting.size[0],
                       synthetic_windows=setting.size[1])
    fs, d = float(encoder.sampling_rate), DIM if kind in ("mlp", "finetune") else setting.dim
    view = dm.task_view(fs, task)
    x = np.random.default_rng(0).standard_normal((len(dm.windows(fs).x), d)).astype(np.float32)
    y = np.asarray(view.y, dtype=np.float64)
    x[view.rows, :4] += ((y - y.mean()) / (y.std() or 1.0))[:, None].astype(np.float32)
    ctx = JobContext.build(dm, encoder, task, 42, 0, work / kind, embeddings=x,
                           raw_windows=not regime.uses_embeddings, trainer_kwargs=trainer_kwargs)
    with intra_op_threads(1):
        record, _ = run_job(ctx, regime)
    if record.get("status") != "ok":
        raise ConfigError(f"calibration: the {kind} job failed ({record.get('error')})")
    trials = [t for result in record.get("results") or [] for t in (result.get("optuna") or {}).get("trials") or []]
    epochs = sum(len(t.get("intermediate_values") or {}) for t in trials)  # counted, whatever the budget
    units = job_units(kind, regime, len(ctx.split.train), d, len(task.classes) or 1, ctx.n_inner_folds, epochs,
                      train_per_s)
    return float(record["cpu_seconds"]) / units


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
    train, how = infer / 3, "assumed 1/3 of inference (no parameters)"
    params = [p for p in encoder.parameters() if p.requires_grad]
    if params and getattr(encoder, "trainable", True):
        optimiser, inputs = torch.optim.AdamW(params, lr=1e-4), encoder.train().preprocess(x, mean, std).float()

        def step() -> None:
            optimiser.zero_grad()
            encoder.forward_features(inputs).float().pow(2).mean().backward()
            optimiser.step()

        train, how = per_second(step), "measured"
    encoder.cpu().eval()
    return {"name": str(encoder.name), "inference_per_s": infer, "training_per_s": train, "embed_dim": dim,
            "device": device, "training": how}


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
    """Measure the rates (and the throughput of ``encoders``, on ``trainer_kwargs``' device); nothing is saved."""
    quiet_lightning()
    trainer_kwargs = {"accelerator": "cpu", "devices": 1, **dict(trainer_kwargs or {})}
    start = time.perf_counter()
    model = CostModel(machine_description(), calibrated=True, device="cuda" if on_gpu(trainer_kwargs) else "cpu",
                      rates={})
    measure_listed(model, [CNN_ENTRY, *encoders], trainer_kwargs, window_s, max(setting.batches, 2))
    train_per_s = model.encoders[encoder_key(CNN_ENTRY)]["training_per_s"]
    with tempfile.TemporaryDirectory(prefix="ppgbench-calibrate-") as tmp:
        for kind in setting.kinds:  # the least of two: the first job of a kind pays its imports, others' load
            model.rates[kind] = min(measure_rate(Path(tmp) / str(i), kind, setting, trainer_kwargs, train_per_s)
                                    for i in range(2))
    if setting.startup:  # CPU seconds of a fresh process importing what a worker imports before its first job
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import ppgbench_pl.benchmark.worker, ppgbench_pl.benchmark.suite"],
                       check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        model.startup_s = round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2)
    model.seconds = round(time.perf_counter() - start, 1)
    return model
