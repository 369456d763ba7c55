"""Small regimes, encoders and run helpers for the engine tests (importable by spawned workers).

Every run goes through the one front door, ``ppgbench_pl.cli.main``, with a config in the one config
language (``model``/``controls``/``matrix``/``data``/``trainer`` blocks, regimes as ``trainer.callbacks``).
"""

from __future__ import annotations

import copy
import json
import math
import os
import signal
import time
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
#: Record fields that say when and where a job ran, not what it computed.
VOLATILE = ("seconds", "cpu_seconds", "worker")
PINNED_SOURCE = "pinned-for-tests"
#: Start ``ppgbench`` in a subprocess with the source digest pinned (others edit the package meanwhile).
LAUNCH = (f"import sys, ppgbench_pl.benchmark.identity as i; i._SOURCE_DIGEST = {PINNED_SOURCE!r}; "
          "from ppgbench_pl.cli import main; main(sys.argv[1:])")


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


class SwallowsSignal(LinearRegime):
    """The linear probe, except that on fold 0 it signals its own process and masks the handler's exception
    with another, as code cleaning up after an interrupted write does (a zip file closing)."""

    name = "linear_swallows_signal"

    def run(self, ctx: JobContext) -> list[RepeatOutcome]:
        if ctx.fold == 0:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises in here
            except BaseException as exc:
                raise ValueError("cleanup failed after the write was cut short") from exc
        return super().run(ctx)


class CountingCNN(SmallCNNEncoder):
    """The small CNN at 32 Hz that counts the windows it embeds (in this process)."""

    name = "counting_cnn"
    sampling_rate = 32.0
    windows_seen = 0

    def forward(self, x: Tensor, ppg_mean: Tensor | None = None, ppg_std: Tensor | None = None) -> Tensor:
        type(self).windows_seen += int(x.shape[0])
        return super().forward(x, ppg_mean, ppg_std)


def suite_config(root: Path, output_dir: Path, *, encoders: list[dict[str, Any]] | None = None,
                 regimes: list[dict[str, Any]] | None = None, tasks: list[str] | None = None,
                 seeds: list[int] | None = None, folds: list[int] | None = None,
                 datasets: list[str] | None = None, data: dict[str, Any] | None = None,
                 executor: dict[str, Any] | None = None, **run: Any) -> dict[str, Any]:
    """A tiny regression-only suite on the synthetic dataset (deterministic regimes, seconds to run).

    The first encoder is the model under test (``model.init_args.encoder``), the others go to
    ``matrix.encoders``; ``run`` holds run-level options (``wandb``, ``ci_unit``, ...).
    """
    encoders = copy.deepcopy(encoders or [CNN])
    init_args: dict[str, Any] = {
        "dataset": "synthetic", "root": str(root), "tasks": tasks or ["synthetic-hr", "synthetic-age"],
        "seeds": seeds or [42], "folds": folds if folds is not None else [0, 1],
        "synthetic_subjects": 10, "synthetic_windows": 6, **(data or {}),
    }
    config: dict[str, Any] = {
        "output_dir": str(output_dir),
        "model": {"class_path": "ppgbench_pl.tasks.EncoderTask", "init_args": {"encoder": encoders[0]}},
        "data": {"class_path": "ppgbench_pl.datamodules.PPGDataModule", "init_args": init_args},
        "trainer": {"accelerator": "cpu", "devices": 1,
                    "callbacks": copy.deepcopy(regimes if regimes is not None else [LINEAR, HALF])},
        "wandb": "off",
        "progress": False,
    }
    if len(encoders) > 1:
        config["matrix"] = {"encoders": encoders[1:]}
    if datasets is not None:
        config.setdefault("matrix", {})["datasets"] = datasets
    if executor is not None:
        config["executor"] = executor
    config.update(run)
    return config


def write_config(path: Path, config: dict[str, Any]) -> Path:
    """The config as YAML (what a user would pass with --config)."""
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def cli(args: list[str]) -> int:
    """Exit status of ``ppgbench <args>`` run in this process."""
    from ppgbench_pl.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def run(args: list[str], command: str = "benchmark") -> int:
    """Exit status of ``ppgbench benchmark <args>`` (or ``fit``) in this process."""
    return cli([command, *args])


def record_files(run_dir: Path) -> list[Path]:
    """results.json of every complete job (a ``<id>.working`` folder is a job cut short, not a record)."""
    return sorted(p for p in (run_dir / "jobs").glob("*/results.json")
                  if not p.parent.name.endswith(".working"))


def records(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every complete record of a run folder by job id."""
    return {p.parent.name: json.loads(p.read_text()) for p in record_files(run_dir)}


def search_records(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Records by job id, the run folder's path as ``<run>`` (the storage URL names it), trial durations left out."""
    out = {}
    for path in record_files(run_dir):
        record = json.loads(path.read_text().replace(str(run_dir), "<run>"))
        for result in record.get("results", []):
            for trial in (result.get("optuna") or {}).get("trials", []):
                trial.pop("seconds", None)
        out[path.parent.name] = record
    return out


def status(run_dir: Path) -> dict[str, Any]:
    """The folder's ``status.json``."""
    return json.loads((run_dir / "status.json").read_text())  # type: ignore[no-any-return]


def tree(path: Path) -> dict[str, int]:
    """Every file under ``path`` with its modification time (an unchanged folder has an equal tree)."""
    # lock files are rewritten with their holder's pid by every process that takes them: not content
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in sorted(path.rglob("*"))
            if p.is_file() and ".locks" not in p.relative_to(path).parts} if path.exists() else {}


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


def same_results(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]],
                 ignore: tuple[str, ...] = ()) -> list[str]:
    """Job ids whose records differ in anything but timing and placement (floats to 1e-6).

    ``ignore``: more fields to leave out, e.g. ``code_version`` when workers in other processes may
    have read a source tree that others edited meanwhile.
    """
    if a.keys() != b.keys():
        return sorted(set(a) ^ set(b))
    skip = (*VOLATILE, *ignore)
    strip = lambda r: {k: v for k, v in r.items() if k not in skip}  # noqa: E731
    return [jid for jid in a if not _close(strip(a[jid]), strip(b[jid]))]


def finished_tiny_run(base: Path, engine_root: Path) -> tuple[Path, Path]:
    """(config, run folder) of a finished one-job run under ``base`` (linear, synthetic-hr, fold 0)."""
    out = base / "run"
    config = suite_config(engine_root, out, regimes=[LINEAR], tasks=["synthetic-hr"], folds=[0],
                          data={"synthetic_windows": 4})
    path = write_config(base / "config.yaml", config)
    assert run(["--config", str(path)]) == 0
    return path, out


def suite_of(config: dict[str, Any]) -> Any:
    """The suite LightningCLI builds from a ``fit`` config dict (as ``ppgbench fit`` and ``pb.evaluate`` do)."""
    from ppgbench_pl.benchmark.protocol_cli import parse_setup

    return parse_setup(config).suite
