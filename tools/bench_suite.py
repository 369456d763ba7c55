"""Benchmark the benchmark: serial vs parallel vs cached, and how often each window meets each encoder.

Runs one suite (the PRV control and the small CNN on the synthetic dataset with a paper-sized subject
count, linear and RF by default) three ways and prints wall time, ratios and encoder forward passes per
window:

* ``published``: what the published protocol does (PROTOCOL.md 10, item 18): embeddings extracted per
  (model, task, seed, fold) and shared only by that fold's frozen regimes; jobs one after another.
* ``cached``: ``ppgbench benchmark`` with the local executor: one pass per (encoder, dataset, rate).
* ``parallel``: the same with the process executor (``--workers``).

Encoders count the windows they embed into a file (appends from any process), so the numbers cover the
worker processes too. The fold metrics of the three modes are compared at the end.

    .venv/bin/python tools/bench_suite.py --subjects 30 --windows 10 --seeds 42 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.encoders.prv import PRVEncoder

HERE = Path(__file__).resolve().parent
REGIMES = {
    "linear": {"class_path": "ppgbench_pl.regimes.LinearRegime"},
    "rf": {"class_path": "ppgbench_pl.regimes.RandomForestRegime", "init_args": {"backend": "sklearn", "n_jobs": 1}},
    "mlp": {"class_path": "ppgbench_pl.regimes.mlp.MLPRegime",
            "init_args": {"search": {"n_trials": 4, "n_startup_trials": 2, "max_epochs": 4}, "subject_repeats": 1,
                          "binary_selection_metric": "balanced_accuracy"}},
}


def _count(count_file: str, n: int) -> None:
    with open(count_file, "a") as handle:  # O_APPEND: safe across processes for short lines
        handle.write(f"{n}\n")


class CountingCNN(SmallCNNEncoder):
    """The small CNN, counting the windows it embeds."""

    def __init__(self, count_file: str, embed_dim: int = 64, seed: int = 0) -> None:
        super().__init__(embed_dim=embed_dim, seed=seed)
        self.count_file = count_file

    def forward(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        _count(self.count_file, int(x.shape[0]))
        return super().forward(x, ppg_mean, ppg_std)


class CountingPRV(PRVEncoder):
    """The NeuroKit2 PRV control, counting the windows it embeds."""

    def __init__(self, count_file: str, n_jobs: int = 1) -> None:
        super().__init__(n_jobs=n_jobs)
        self.count_file = count_file

    def forward(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        _count(self.count_file, int(x.shape[0]))
        return super().forward(x, ppg_mean, ppg_std)


def config(args: argparse.Namespace, counts: Path) -> dict[str, Any]:
    """The ``fit`` config both modes run (parsed and built by the CLI's parser)."""
    return {
        "model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": {"encoder": {
            "class_path": "bench_suite.CountingCNN", "init_args": {"count_file": str(counts / CountingCNN.name)}}}},
        "controls": [
            {"class_path": "bench_suite.CountingPRV", "init_args": {"count_file": str(counts / CountingPRV.name)}}],
        "data": {"class_path": "ppgbench_pl.datamodules.PPGDataModule", "init_args": {
            "dataset": "synthetic", "seeds": args.seeds, "folds": list(range(args.folds)), "root": str(args.data),
            "synthetic_subjects": args.subjects, "synthetic_windows": args.windows}},
        "trainer": {"accelerator": "cpu", "devices": 1, "callbacks": [REGIMES[r] for r in args.regimes]},
        "wandb": "off", "progress": False,
    }


def suite_of(cfg: dict[str, Any], out: Path) -> Any:
    """The suite of ``cfg`` with its run folder at ``out``."""
    from ppgbench_pl.benchmark.protocol_cli import parse_setup

    return parse_setup({**cfg, "output_dir": str(out)}).suite


def passes(counts: Path, n_windows: dict[str, int]) -> dict[str, float]:
    """Windows embedded per window of the dataset, per encoder."""
    out = {}
    for name, n in n_windows.items():
        path = counts / name
        total = sum(int(line) for line in path.read_text().split()) if path.exists() else 0
        out[name] = total / n
    return out


def run_published(cfg: dict[str, Any], out: Path) -> dict[str, float]:
    """The published schedule: extract per (model, task, seed, fold), jobs in plan order, no cache."""
    import lightning as L
    import torch
    from torch.utils.data import DataLoader

    from ppgbench_pl.benchmark.embeddings import extraction_trainer_kwargs
    from ppgbench_pl.benchmark.job import run_job
    from ppgbench_pl.datamodules.ppg import ArrayDataset
    from ppgbench_pl.regimes.base import JobContext
    from ppgbench_pl.tasks.encoder_task import EncoderTask

    suite = suite_of(cfg, out)
    values: dict[str, float] = {}
    current: tuple[Any, ...] = ()
    embeddings = np.zeros((0, 0), dtype=np.float32)
    for job in suite.plan():
        encoder, dm = suite.encoders[job.model], suite.datamodule(job)
        fs = float(encoder.sampling_rate)
        if (job.model, job.task.name, job.seed, job.fold) != current:
            view = dm.task_view(fs, job.task)
            win = dm.windows(fs)
            loader = DataLoader(ArrayDataset(x=win.x[view.rows], ppg_mean=win.ppg_mean[view.rows],
                                             ppg_std=win.ppg_std[view.rows]), batch_size=dm.batch_size)
            trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False, **extraction_trainer_kwargs(suite.trainer_kwargs))
            rows = torch.cat(trainer.predict(EncoderTask(encoder, mode="frozen"), loader)).numpy()  # type: ignore[arg-type]
            embeddings = np.zeros((len(win.x), rows.shape[1]), dtype=np.float32)
            embeddings[view.rows] = rows
            current = (job.model, job.task.name, job.seed, job.fold)
        ctx = JobContext.build(dm, encoder, job.task, job.seed, job.fold, out / "search" / job.job_id,
                               job_id=job.job_id, model_name=job.model_name,
                               embeddings=embeddings if suite.uses_cache(job) else None,
                               raw_windows=not job.regime.uses_embeddings, trainer_kwargs=suite.trainer_kwargs)
        record, _ = run_job(ctx, job.regime)
        if record["status"] == "ok":
            values[job.job_id] = float(np.mean([r["metrics"][record["metric"]] for r in record["results"]]))
    return values


def run_benchmark(cfg: dict[str, Any], out: Path, workers: int) -> dict[str, float]:
    """The one engine (what ``ppgbench fit``/``benchmark`` run), local or with a process pool."""
    from ppgbench_pl.benchmark.coordinator import BenchmarkRun
    from ppgbench_pl.benchmark.protocol_cli import parse_setup

    module = "ppgbench_pl.benchmark.executors"
    executor = {"class_path": f"{module}.ProcessExecutor", "init_args": {"workers": workers}} if workers > 1 \
        else {"class_path": f"{module}.LocalExecutor"}
    report = BenchmarkRun(parse_setup({**cfg, "output_dir": str(out), "executor": executor})).run()
    if report.failed:
        print(f"  {len(report.failed)} jobs failed, e.g. {report.failed[0]}", file=sys.stderr)
    values = {}
    for path in out.glob("jobs/*/results.json"):
        record = json.loads(path.read_text())
        if record["status"] == "ok":
            values[record["job_id"]] = float(np.mean([r["metrics"][record["metric"]] for r in record["results"]]))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=30, help="Synthetic subjects (the paper's datasets: 15-50).")
    parser.add_argument("--windows", type=int, default=10, help="Windows per subject.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--regimes", nargs="+", default=["linear", "rf"], choices=sorted(REGIMES))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--modes", nargs="+", default=["published", "cached", "parallel"],
                        choices=["published", "cached", "parallel"])
    parser.add_argument("--keep", type=Path, default=None, help="Keep the run folders here (default: a temp dir).")
    args = parser.parse_args()
    os.environ.setdefault("WANDB_MODE", "disabled")
    from ppgbench_pl.benchmark.console import quiet_lightning

    quiet_lightning()
    sys.path.insert(0, str(HERE))  # so workers import the counting encoders as bench_suite.*
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_suite_"))
    args.data = base / "data"

    probe = suite_of(config(args, base), base / "probe")
    dm = probe.datamodules["synthetic"]  # builds the data at each rate once, outside the timings
    n_windows = {info.name: len(dm.windows(info.sampling_rate).x) for info in probe.encoder_infos}
    n_jobs = len(probe.plan(dry=True))
    cnn, prv = CountingCNN.name, CountingPRV.name
    print(f"suite: {cnn} + {prv}, {len(probe.tasks)} synthetic tasks, {args.subjects} subjects x {args.windows} "
          f"windows = {n_windows[cnn]} windows, seeds {args.seeds}, {args.folds} folds, regimes "
          f"{args.regimes}: {n_jobs} jobs")
    rows, values = [], {}
    for mode in args.modes:
        out, counts = base / mode, base / f"counts_{mode}"
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(counts, ignore_errors=True)
        counts.mkdir(parents=True)
        cfg = config(args, counts)
        start = time.perf_counter()
        values[mode] = run_published(cfg, out) if mode == "published" else \
            run_benchmark(cfg, out, args.workers if mode == "parallel" else 1)
        rows.append((mode, time.perf_counter() - start, passes(counts, n_windows)))
        print(f"  {mode}: {rows[-1][1]:.1f} s", flush=True)
    ref = rows[0][1]
    print(f"\n{'mode':<40} {'wall s':>8} {'speed-up':>9} {'passes/window ' + cnn:>24} {prv:>6}")
    labels = {"published": "published: extract per task/seed/fold", "cached": "cached, serial (local)",
              "parallel": f"cached, {args.workers} workers (process)"}
    for mode, seconds, per_window in rows:
        print(f"{labels[mode]:<40} {seconds:>8.1f} {ref / seconds:>8.2f}x {per_window[cnn]:>24.1f} "
              f"{per_window[prv]:>6.1f}")
    if len(values) > 1:
        first = next(iter(values.values()))
        for mode, got in values.items():
            common = sorted(set(first) & set(got))
            diff = max((abs(first[k] - got[k]) for k in common), default=0.0)
            print(f"{mode}: {len(got)} jobs ok; largest fold-metric difference to {args.modes[0]}: {diff:.2e}")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
