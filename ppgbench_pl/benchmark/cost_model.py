"""The cost model behind the dry run's estimate: per-job seconds of each regime, fitted once per machine.

Every regime's job costs ``intercept + slope x units`` seconds, where the units are what its work grows
with (PROTOCOL.md 4; ``docs/performance.md``, "Cost model"):

========== ==========================================================================================
kind       units of one job
========== ==========================================================================================
ridge      k x n x d^2: the inner group folds (k, plus the refit) over n outer-training rows of d features
logistic   k x n x d x c: the same with c classes (lbfgs, one fit per C)
rf         k x sum over the grid of trees x n x min(depth, log2 n) x sqrt(d); plus ``rf_tree``: seconds per
           tree grown (its fixed cost), times the trees of the grid in the k + 1 fits
mlp        the job's share of its stack group (:mod:`~ppgbench_pl.benchmark.search_cost`): trial-epochs x n x
           (1 + d / 64) / 2 (every trial's epochs over the outer-training rows, the first layer's share
           growing with the embedding size), plus stack epochs x ``STACK_EPOCH_UNITS["mlp"]`` (what the stack
           pays per epoch however many trials it holds: loop, validation, the search step)
finetune   the same with trial-epochs x (fit rows / training windows per s + validation rows / inference
           windows per s), seconds of the encoder itself from its measured throughput, and
           ``STACK_EPOCH_UNITS["finetune"]`` per stack epoch; the slope is a stack factor
========== ==========================================================================================

``ppgbench calibrate`` measures the coefficients on this machine (:mod:`ppgbench_pl.benchmark.calibrate`)
and stores them in the user cache directory, one file per machine (:func:`calibration_path`). Without it
the dry run uses :data:`DEFAULTS` (measured once on the project's 2-core CI machine) and says so in one
line, never silently. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: Where calibrations live: ``$PPGBENCH_CALIBRATION_DIR``, else ``$XDG_CACHE_HOME/ppgbench/calibration``.
CALIBRATION_ENV = "PPGBENCH_CALIBRATION_DIR"
#: The regime kinds of the cost model (``rf_tree`` is the forest's per-tree term, fitted with ``rf``).
KINDS = ("ridge", "logistic", "rf", "mlp", "finetune")
#: File format version (a calibration of another format is measured again). 2: the searched regimes' units
#: count stack epochs and a group's trial-epochs (a format-1 slope is per trial-epoch of one job alone).
FORMAT = 2
#: CPU seconds of a searched job at more than one torch thread over those at one (measured on the project's
#: 2-core machine shared by other processes, load 5-8: 13x for the published MLP search, 14x for a 4-trial one;
#: 33x at load 8). Torch's thread pool spin-waits around the stack's tiny per-step kernels, so a second
#: thread costs more CPU than it saves; ``ppgbench calibrate`` measures it. Used when a run's jobs get
#: more than one thread on the CPU (the local executor's default: every core).
DEFAULT_THREAD_FACTOR = 14.0
#: A trial-epoch's fixed cost (the slot's step and scoring overhead) in each searched kind's units: measured
#: at 1 thread on the synthetic dataset, about 7 ms a trial-epoch beside 0.025 ms per row (mlp, 64-d).
TRIAL_EPOCH_UNITS: dict[str, float] = {"mlp": 300.0, "finetune": 0.0}
#: A stack epoch's fixed cost in each searched kind's units (rows x width for ``mlp``, encoder seconds for
#: ``finetune``), so one slope prices both parts; the ratio of the two costs measured on the synthetic
#: dataset (docs/performance.md, "Cost model"), kept when a calibration refits the slope.
STACK_EPOCH_UNITS: dict[str, float] = {"mlp": 0.0, "finetune": 0.0}

#: (intercept s, slope s per unit) per kind, uncalibrated: one ``ppgbench calibrate`` of the project's 2-core
#: CI machine (AMD EPYC, 1 thread, 2026-12-02; docs/performance.md), rounded; ``mlp`` and ``finetune`` (and the
#: ridge per-job cost) measured again there on 2026-12-06 at 1 thread (the published MLP search, the smoke budget
#: and the quickstart on the synthetic dataset, machine load 2-8 from other processes: CPU seconds, not wall).
#: Labelled "uncalibrated" wherever used.
DEFAULTS: dict[str, tuple[float, float]] = {
    "ridge": (0.08, 2.6e-11),
    "logistic": (0.15, 9e-8),
    "rf": (0.04, 4e-8),
    "rf_tree": (0.0, 1e-3),
    "mlp": (0.25, 2.5e-5),
    "finetune": (0.1, 0.03),
}
#: Encoder throughput (windows/s: inference, training) assumed when an encoder was not measured.
DEFAULT_THROUGHPUT = (400.0, 100.0)
#: CPU seconds of importing the engine in a fresh process (docs/performance.md: about 8 s on the CI machine).
DEFAULT_STARTUP_S = 8.0
#: Embedding size assumed for an encoder the catalog does not know and calibration did not measure.
DEFAULT_EMBED_DIM = 512


@dataclass
class CostModel:
    """Per-job cost coefficients of one machine, and the encoders measured on it.

    Args:
        machine: What the coefficients were measured on (:func:`machine_description`).
        calibrated: False for :data:`DEFAULTS` (the dry run says so).
        created: When it was measured (UTC, ISO 8601).
        threads: Torch/BLAS threads during the measurement.
        device: ``cpu`` or ``cuda`` (where the neural regimes and encoders were measured).
        coefficients: kind -> (intercept seconds, seconds per unit).
        encoders: encoder key (:func:`encoder_key`) -> {name, inference and training windows/s, embed_dim, device}.
        seconds: How long the calibration took (wall).
        startup_s: CPU seconds a process spends importing the engine (Lightning, torch, ppgbench) before its
            first job: the command itself and every worker process pay it.
        thread_factor: CPU seconds of a searched job at several torch threads over those at one
            (:data:`DEFAULT_THREAD_FACTOR`).
    """

    machine: str
    calibrated: bool = False
    created: str = ""
    threads: int = 1
    device: str = "cpu"
    coefficients: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULTS))
    encoders: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    startup_s: float = DEFAULT_STARTUP_S
    thread_factor: float = DEFAULT_THREAD_FACTOR

    def job_seconds(self, kind: str, units: float) -> float:
        """Seconds of one job of ``kind`` doing ``units`` of work (see the module docstring)."""
        intercept, slope = self.coefficients.get(kind, DEFAULTS[kind])
        return float(intercept + slope * units)

    def throughput(self, key: str) -> tuple[float, float, bool]:
        """(inference, training windows/s, measured?) of an encoder on this machine."""
        found = self.encoders.get(key)
        if not found:
            return DEFAULT_THROUGHPUT[0], DEFAULT_THROUGHPUT[1], False
        return float(found["inference_per_s"]), float(found["training_per_s"]), True

    def to_json(self) -> dict[str, Any]:
        """What :func:`save_model` writes."""
        return {"format": FORMAT, **asdict(self)}


def stack_units(kind: str, trial_epochs: float, stack_epochs: float, per_trial_epoch: float) -> float:
    """A searched job group's units: its trial-epochs' work and its stack epochs' fixed cost."""
    return trial_epochs * (per_trial_epoch + TRIAL_EPOCH_UNITS[kind]) + stack_epochs * STACK_EPOCH_UNITS[kind]


def machine_description() -> str:
    """Host, CPU model and cores, and the GPU when torch is already imported and sees one."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}: {cpu} x{os.cpu_count() or 1}"


def calibration_dir() -> Path:
    """The folder of this user's calibrations (one file per machine)."""
    if os.environ.get(CALIBRATION_ENV):
        return Path(os.environ[CALIBRATION_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ppgbench" / "calibration"


def calibration_path(machine: str | None = None) -> Path:
    """``<calibration_dir>/<digest of the machine description>.json``."""
    digest = hashlib.sha256((machine or machine_description()).encode()).hexdigest()[:16]
    return calibration_dir() / f"{digest}.json"


def load_model(machine: str | None = None) -> CostModel:
    """Return this machine's calibration, or the uncalibrated defaults (``calibrated`` False) when there is none.

    Raises:
        ConfigError: The calibration file exists but cannot be read, or a field of it is not a valid
            measurement (:mod:`.calibration_check`: the file and the field named, with how to redo it).
    """
    machine = machine or machine_description()
    path = calibration_path(machine)
    if not path.exists():
        return CostModel(machine)
    from ppgbench_pl.benchmark.calibration_check import parse_calibration

    fields = parse_calibration(path, (*KINDS, "rf_tree"), FORMAT)
    return CostModel(machine) if fields is None else CostModel(**fields)


def save_model(model: CostModel) -> Path:
    """Write ``model`` as this machine's calibration (atomic); return the path."""
    from ppgbench_pl.atomic_io import write_json_atomic

    model.created = model.created or datetime.now(UTC).isoformat(timespec="seconds")
    path = calibration_path(model.machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, model.to_json())
    return path


def encoder_key(entry: dict[str, Any]) -> str:
    """An encoder entry's key among measured throughputs: its class path and init args (not a built object)."""
    args = {k: v for k, v in sorted((entry.get("init_args") or {}).items())}
    text = json.dumps({"class_path": entry.get("class_path"), "init_args": args}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of (units, seconds), both kept >= 0 (a cost never falls with work).

    One point (or equal units) gives a line through the origin's slope with no intercept.
    """
    n = len(points)
    if n == 0:
        raise ValueError("no measurements")
    mean_u = sum(u for u, _ in points) / n
    mean_s = sum(s for _, s in points) / n
    var = sum((u - mean_u) ** 2 for u, _ in points)
    if n == 1 or var == 0:
        return 0.0, max(mean_s / mean_u, 0.0) if mean_u else 0.0
    slope = sum((u - mean_u) * (s - mean_s) for u, s in points) / var
    if slope <= 0:  # noise at sizes this small: the work did not show; all of it is per-job cost
        return max(mean_s, 0.0), 0.0
    intercept = mean_s - slope * mean_u
    if intercept < 0:  # a line through the origin fits better than a negative fixed cost
        return 0.0, sum(u * s for u, s in points) / sum(u * u for u, _ in points)
    return intercept, slope
