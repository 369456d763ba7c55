"""One machine's per-job costs: ``intercept + slope x units`` CPU seconds per regime kind, stored per machine.

The units are what each kind's work grows with (:func:`~ppgbench_pl.benchmark.estimate.job_units`). ``ppgbench
calibrate`` measures them; without it the dry run uses :data:`DEFAULTS` and says so. The stored file is the
user's to edit or copy, so it is read as untrusted input: a field that is not a finite measurement within
bounds is refused in one line naming it, never printed as ``nan days``. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppgbench_pl.errors import ConfigError

#: Where calibrations live: ``$PPGBENCH_CALIBRATION_DIR``, else ``$XDG_CACHE_HOME/ppgbench/calibration``.
CALIBRATION_ENV = "PPGBENCH_CALIBRATION_DIR"
#: The regime kinds of the cost model (``rf_tree``, the forest's per-tree term, is fitted with ``rf``).
KINDS = ("ridge", "logistic", "rf", "mlp", "finetune")
#: File format (a file of another is measured again). 2: a searched job's units are its stack group's share.
FORMAT = 2
#: CPU of a searched job at several torch threads over one: torch's pool spin-waits around the stack's tiny
#: steps (13-33x measured on the 2-core CI machine under load, docs/performance.md); calibration measures it.
DEFAULT_THREAD_FACTOR = 14.0
#: A trial-epoch's fixed cost (step and scoring) in each searched kind's units: ~7 ms beside 0.025 ms per row.
TRIAL_EPOCH_UNITS: dict[str, float] = {"mlp": 300.0, "finetune": 0.0}
#: (intercept s, slope s per unit) per kind, uncalibrated: measured on the project's 2-core CI machine at one
#: thread (2026-12-02; mlp, finetune and the ridge intercept again on 2026-12-06), rounded.
DEFAULTS: dict[str, tuple[float, float]] = {"ridge": (0.08, 2.6e-11), "logistic": (0.15, 9e-8), "rf": (0.04, 4e-8),
                                             "rf_tree": (0.0, 1e-3), "mlp": (0.25, 2.5e-5), "finetune": (0.1, 0.03)}
DEFAULT_THROUGHPUT = (400.0, 100.0)  # windows/s (inference, training) of an encoder not measured
DEFAULT_STARTUP_S = 8.0  # CPU seconds of a fresh process importing the engine (CI machine)
DEFAULT_EMBED_DIM = 512  # of an encoder whose size nothing states
#: Largest coefficient, start-up cost or calibration time a file may hold (seconds, or seconds per unit).
MAX_SECONDS = 1e6
#: Smallest throughput (windows per second) a file may hold: any estimate from it stays finite.
MIN_THROUGHPUT = 1e-3
_TOP = {"machine": str, "calibrated": bool, "created": str, "threads": int, "device": str, "coefficients": dict,
        "encoders": dict, "seconds": float, "startup_s": float, "thread_factor": float}
_ENCODER = {"name": str, "inference_per_s": float, "training_per_s": float, "embed_dim": int, "device": str,
            "training": str}


@dataclass
class CostModel:
    """Per-job cost coefficients of one machine (kind -> (intercept s, s per unit)), and its encoders' speeds.

    ``encoders`` maps :func:`encoder_key` to {name, inference/training windows per s, embed_dim, device};
    ``startup_s`` is what each process pays importing the engine; ``thread_factor`` see
    :data:`DEFAULT_THREAD_FACTOR`; ``calibrated`` is False for the defaults (the dry run says so).
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
        """Seconds of one job of ``kind`` doing ``units`` of work."""
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


def machine_description() -> str:
    """Host, CPU model and cores."""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    return f"{platform.node()}: {cpu} x{os.cpu_count() or 1}"


def calibration_path(machine: str | None = None) -> Path:
    """``<calibration folder>/<digest of the machine description>.json`` (:data:`CALIBRATION_ENV`)."""
    if os.environ.get(CALIBRATION_ENV):
        folder = Path(os.environ[CALIBRATION_ENV]).expanduser()
    else:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ppgbench" / "calibration"
    digest = hashlib.sha256((machine or machine_description()).encode()).hexdigest()[:16]
    return folder / f"{digest}.json"


def load_model(machine: str | None = None) -> CostModel:
    """The machine's calibration, or the uncalibrated defaults when there is none (or it is of another format).

    Raises:
        ConfigError: The file cannot be read or a field of it is not a valid measurement (one line).
    """
    machine = machine or machine_description()
    path = calibration_path(machine)
    fields = parse_calibration(path, (*KINDS, "rf_tree"), FORMAT) if path.exists() else None
    return CostModel(machine) if fields is None else CostModel(**fields)


def save_model(model: CostModel) -> Path:
    """Write ``model`` as its machine's calibration (atomic); return the path."""
    from ppgbench_pl.atomic_io import write_json_atomic

    model.created = model.created or datetime.now(UTC).isoformat(timespec="seconds")
    path = calibration_path(model.machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, model.to_json())
    return path


def encoder_key(entry: dict[str, Any]) -> str:
    """An encoder entry's key among measured throughputs: its class path and init args (not a built object)."""
    text = json.dumps({"class_path": entry.get("class_path"), "init_args": entry.get("init_args") or {}},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of (units, seconds), both kept >= 0 (a cost never falls with work)."""
    n = len(points)
    if n == 0:
        raise ValueError("no measurements")
    mean_u, mean_s = sum(u for u, _ in points) / n, sum(s for _, s in points) / n
    var = sum((u - mean_u) ** 2 for u, _ in points)
    if n == 1 or var == 0:  # no spread: a line through the origin
        return 0.0, max(mean_s / mean_u, 0.0) if mean_u else 0.0
    slope = sum((u - mean_u) * (s - mean_s) for u, s in points) / var
    if slope <= 0:  # noise at sizes this small: the work did not show; all of it is per-job cost
        return max(mean_s, 0.0), 0.0
    intercept = mean_s - slope * mean_u
    if intercept < 0:  # a line through the origin fits better than a negative fixed cost
        return 0.0, sum(u * s for u, s in points) / sum(u * u for u, _ in points)
    return intercept, slope


class BadField(ValueError):
    """A calibration field that is missing or holds the wrong kind of value."""


def _check(value: Any, field: str, kind: type, low: float = 0.0, high: float = MAX_SECONDS) -> Any:
    """``value`` when it is a ``kind`` (a number: finite, within [low, high]), else :class:`BadField`."""
    shown = json.dumps(value)[:40]
    if kind in (int, float):
        integer, low = kind is int, max(low, 1) if kind is int else low
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            raise BadField(f"{field} is {shown}, not {'an integer' if integer else 'a number'}")
        if not math.isfinite(value) or not low <= value <= high:
            raise BadField(f"{field} is {value!r}, outside [{low:g}, {high:g}]")
        return kind(value)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise BadField(f"{field} is {shown}, not a {kind.__name__}")
    return value


def model_fields(raw: Any, kinds: tuple[str, ...]) -> dict[str, Any]:
    """The :class:`CostModel` fields of a parsed file (``format`` removed), or :class:`BadField`."""
    if not isinstance(raw, dict):
        raise BadField(f"the file holds a JSON {type(raw).__name__}, not an object")
    unknown = sorted(set(raw) - set(_TOP))
    if unknown:
        raise BadField(f"{unknown[0]} is not a calibration field")
    out = {k: _check(v, k, _TOP[k], high=1024 if k == "threads" else MAX_SECONDS) for k, v in raw.items()}
    if "machine" not in out:
        raise BadField("machine is missing")
    if out.get("device", "cpu") not in ("cpu", "cuda"):
        raise BadField(f"device is {out['device']!r}, not cpu or cuda")
    coefficients = {}
    for kind, pair in out.get("coefficients", {}).items():
        if kind not in kinds:
            raise BadField(f"coefficients.{kind} is not a kind of the cost model ({', '.join(kinds)})")
        if not isinstance(pair, list) or len(pair) != 2:
            raise BadField(f"coefficients.{kind} is {json.dumps(pair)[:40]}, not [intercept, slope]")
        coefficients[kind] = (_check(pair[0], f"coefficients.{kind}[0] (intercept)", float),
                              _check(pair[1], f"coefficients.{kind}[1] (slope)", float))
    if "coefficients" in out:
        out["coefficients"] = coefficients
    for key, entry in out.get("encoders", {}).items():
        if not isinstance(entry, dict):
            raise BadField(f"encoders.{key} is {json.dumps(entry)[:40]}, not an object")
        missing = sorted(set(_ENCODER) - set(entry))
        if missing:
            raise BadField(f"encoders.{key}.{missing[0]} is missing")
        for name, value in entry.items():
            if name in _ENCODER:
                _check(value, f"encoders.{key}.{name}", _ENCODER[name], MIN_THROUGHPUT if "_per_s" in name else 0.0,
                       1e7 if name == "embed_dim" else 1e12)
    return out


def parse_calibration(path: Path, kinds: tuple[str, ...], version: int) -> dict[str, Any] | None:
    """The checked fields of the calibration at ``path``; None when it is of another format (measured again).

    Raises:
        ConfigError: One line naming the file and the field, and how to measure again.
    """
    redo = "run `ppgbench calibrate --force` to measure again"
    try:
        raw = json.loads(path.read_text(), parse_constant=str)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable calibration ({type(exc).__name__}); {redo}") from None
    if isinstance(raw, dict):
        if raw.get("format") != version:
            return None
        raw = {k: v for k, v in raw.items() if k != "format"}
    try:
        return model_fields(raw, kinds)
    except BadField as exc:
        raise ConfigError(f"{path}: not a valid calibration: {exc}; {redo}") from None
