"""Small regimes, encoders and run helpers for the benchmark tests (importable by spawned workers)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from torch import Tensor

from ppgbench_pl.encoders.cnn import SmallCNNEncoder
from ppgbench_pl.regimes.base import JobContext, RepeatOutcome
from ppgbench_pl.regimes.linear import LinearRegime

CNN = {"class_path": "ppgbench_pl.encoders.cnn.SmallCNNEncoder"}
LINEAR = {"class_path": "ppgbench_pl.regimes.LinearRegime"}
HALF = {"class_path": "ppgbench_pl.regimes.LabelEfficiencyRegime", "init_args": {"fraction": 0.5}}
VOLATILE = ("seconds", "worker")
PINNED_SOURCE = "pinned-for-tests"


class FailOnTask(LinearRegime):
    """The linear probe, except that it raises on one task (per-job isolation)."""

    name = "linear_or_fail"

    def __init__(self, fail_task: str = "synthetic-age") -> None:
        super().__init__()
        self.fail_task = fail_task

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        if ctx.task.name == self.fail_task:
            raise RuntimeError(f"deliberate failure on {ctx.task.name}")
        return super().run(ctx)


class CountingCNN(SmallCNNEncoder):
    """The small CNN at 32 Hz that counts the windows it embeds (in this process)."""

    name = "counting_cnn"
    sampling_rate = 32.0
    windows_seen = 0

    def forward(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        type(self).windows_seen += int(x.shape[0])
        return super().forward(x, ppg_mean, ppg_std)


def suite_config(root: Path, output_dir: Path, **overrides: Any) -> dict[str, Any]:
    """A tiny regression-only suite on the synthetic dataset (deterministic regimes, seconds to run)."""
    config: dict[str, Any] = {
        "output_dir": str(output_dir),
        "encoders": [CNN],
        "regimes": [LINEAR, HALF],
        "datasets": ["synthetic"],
        "tasks": ["synthetic-hr", "synthetic-age"],
        "seeds": [42],
        "folds": [0, 1],
        "data": {"root": str(root), "synthetic_subjects": 10, "synthetic_windows": 6},
        "trainer": {"accelerator": "cpu", "devices": 1},
        "wandb": "off",
        "progress": False,
    }
    config.update(overrides)
    return config


def write_config(path: Path, config: dict[str, Any]) -> Path:
    """The config as YAML (what a user would pass with --config)."""
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def record_files(run_dir: Path) -> list[Path]:
    """results.json of every complete job (a ``<id>.working`` folder is a job cut short, not a record)."""
    return sorted(p for p in (run_dir / "jobs").glob("*/results.json") if not p.parent.name.endswith(".working"))


def records(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every complete record of a run folder by job id."""
    return {p.parent.name: json.loads(p.read_text()) for p in record_files(run_dir)}


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


def same_results(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> list[str]:
    """Job ids whose records differ in anything but timing and placement (floats to 1e-6)."""
    if a.keys() != b.keys():
        return sorted(set(a) ^ set(b))
    strip = lambda r: {k: v for k, v in r.items() if k not in VOLATILE}  # noqa: E731
    return [jid for jid in a if not _close(strip(a[jid]), strip(b[jid]))]
