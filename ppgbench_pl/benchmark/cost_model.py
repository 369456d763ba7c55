"""The cost model: a machine's rates (``ppgbench calibrate``'s file, checked by :data:`SCHEMA`; else :data:`RATES`)."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppgbench_pl.errors import ConfigError, PPGBenchError

#: Where calibrations live: ``$PPGBENCH_CALIBRATION_DIR``, else ``$XDG_CACHE_HOME/ppgbench/calibration``.
CALIBRATION_ENV = "PPGBENCH_CALIBRATION_DIR"
#: File format (a file of another is measured again). 3: one rate per kind.
FORMAT = 3
#: Seconds per unit of each kind (``estimate.job_units``), uncalibrated: the 2-core CI machine, 1 thread, 2026-12-06.
RATES: dict[str, float] = {"ridge": 0.006, "logistic": 0.034, "rf": 9e-4, "mlp": 0.033, "finetune": 0.27}
KINDS = tuple(RATES)
DEFAULT_THROUGHPUT = (400.0, 100.0)  # windows/s (inference, training) of an encoder not measured
DEFAULT_STARTUP_S = 7.5  # CPU seconds of a fresh process importing the engine (CI machine)
DEFAULT_EMBED_DIM = 512  # of an encoder whose size nothing states
#: Largest rate, start-up cost or calibration time a file may hold (seconds, or seconds per unit).
MAX_SECONDS = 1e6
#: Smallest throughput (windows per second) a file may hold: any estimate from it stays finite.
MIN_THROUGHPUT = 1e-3
_SECONDS = {"type": "number", "minimum": 0, "maximum": MAX_SECONDS}
_SPEED = {"type": "number", "minimum": MIN_THROUGHPUT, "maximum": 1e12}
_ENCODER = {"type": "object", "required": ["name", "inference_per_s", "training_per_s", "embed_dim", "device",
                                           "training"],
            "properties": {"name": {"type": "string"}, "inference_per_s": _SPEED, "training_per_s": _SPEED,
                           "embed_dim": {"type": "integer", "minimum": 1, "maximum": 1e7},
                           "device": {"enum": ["cpu", "cuda"]}, "training": {"type": "string"}}}
#: What a calibration file holds (``format`` aside).
SCHEMA = {"type": "object", "required": ["machine"], "additionalProperties": False, "properties": {
    "format": {}, "machine": {"type": "string"}, "calibrated": {"type": "boolean"}, "created": {"type": "string"},
    "device": {"enum": ["cpu", "cuda"]}, "seconds": _SECONDS, "startup_s": _SECONDS,
    "rates": {"type": "object", "properties": {k: _SECONDS for k in KINDS}, "additionalProperties": False},
    "encoders": {"type": "object", "additionalProperties": _ENCODER}}}


@dataclass
class CostModel:
    """A machine's rates (kind -> s per unit), encoders (:func:`encoder_key` -> speeds), start-up (CPU s)."""

    machine: str
    calibrated: bool = False
    created: str = ""
    device: str = "cpu"
    rates: dict[str, float] = field(default_factory=lambda: dict(RATES))
    encoders: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    startup_s: float = DEFAULT_STARTUP_S

    def measured(self, entry: dict[str, Any], name: str | None = None) -> dict[str, Any] | None:
        """The measurement of an encoder entry, else of an encoder of the same ``name`` (other arguments)."""
        return self.encoders.get(encoder_key(entry)) or next(
            (e for e in self.encoders.values() if name is not None and e["name"] == name), None)

    def throughput(self, entry: dict[str, Any], name: str | None = None) -> tuple[float, float, bool]:
        """(inference, training windows/s, measured?) of an encoder on this machine."""
        found = self.measured(entry, name)
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
    """The machine's calibration, else (none, or another format) the defaults; a bad file: ConfigError (one line)."""
    path = calibration_path(machine := machine or machine_description())
    fields = parse_calibration(path) if path.exists() else None
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


def parse_calibration(path: Path) -> dict[str, Any] | None:
    """The checked :class:`CostModel` fields of the file at ``path`` (None: another format), else one ConfigError."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    redo = "run `ppgbench calibrate --force` to measure again"
    try:
        raw = json.loads(path.read_text(), parse_constant=str)  # NaN and Infinity: strings, refused as such
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable calibration ({type(exc).__name__}); {redo}") from None
    if isinstance(raw, dict) and raw.get("format") != FORMAT:
        return None
    error = best_match(Draft202012Validator(SCHEMA).iter_errors(raw))
    if error is not None:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        said = error.message if len(error.message) <= 100 else error.message[:97] + "..."
        raise ConfigError(f"{path}: not a valid calibration: {where + ': ' if where else ''}{said}; {redo}")
    return {k: v for k, v in raw.items() if k != "format"}


#: Approximate windows per subject of each published release (PROTOCOL.md 1), and the subjects where the
#: declaration states none: rough orders of magnitude, printed as assumed.
WINDOWS_PER_SUBJECT: dict[str, int] = {
    "bidmc": 48, "ppgbp": 3, "dalia": 4300, "dreamt": 2800, "wesad": 600, "butppg": 80, "ecsmp": 250,
    "realworldppg": 30, "wildppg": 5000,
}
ASSUMED_SUBJECTS: dict[str, int] = {"butppg": 50, "ecsmp": 89, "realworldppg": 35, "wildppg": 16}
#: Argument names that state an encoder's (or a wrapped module's) output size.
DIM_NAMES = ("embed_dim", "embedding_dim", "out_dim", "output_dim", "out_features")
#: Under this many validation subjects the scores tie and Hyperband promotes nearly all (synthetic stiffness, 5: 22.1
#: epochs a trial of 25, not 7.9): TIED_COMPLETE of the trials count every epoch, the others stop at the first check.
FEW_VALIDATION_SUBJECTS = 10
TIED_COMPLETE = 0.87
HOLDOUT_SHARE = 0.2  # of the outer-training groups, held out for a neural regime's validation (PROTOCOL.md 3.3)


@dataclass(frozen=True)
class TaskSize:
    """Labelled windows, groups and classes of one task at one rate, and where the figures come from."""

    rows: int
    groups: int
    classes: int
    windows: int  # every window of the dataset at that rate (what the embedding pass reads)
    source: str


def task_size(dm: Any, fs: float, task: Any, read_tree: bool = True) -> TaskSize:
    """The task's size from the processed tree when it can be read (and ``read_tree``), else as published."""
    if read_tree:
        try:
            import numpy as np

            view = dm.task_view(fs, task)
            classes = len(task.classes) or (len(np.unique(view.y)) if task.kind == "classification" else 1)
            return TaskSize(len(view.rows), len(np.unique(view.groups)), int(classes), len(dm.windows(fs).x),
                            "processed tree")
        except PPGBenchError:
            pass
    if dm.dataset == "synthetic":
        subjects, per_subject = dm.synthetic.n_subjects, dm.synthetic.windows_per_subject
        source = "the synthetic settings"
    else:
        subjects = dm.info.subjects or ASSUMED_SUBJECTS.get(dm.dataset, 20)
        per_subject = WINDOWS_PER_SUBJECT.get(dm.dataset, 500)
        source = f"assumed: no processed tree, ~{per_subject} windows x {subjects} subjects (published release)"
    subjects = min(subjects, dm.max_subjects or subjects)
    per_subject = min(per_subject, dm.max_windows_per_subject or per_subject)
    classes = len(task.classes) or (subjects if task.kind == "classification" else 1)
    return TaskSize(subjects * per_subject, subjects, max(int(classes), 1), subjects * per_subject, source)


def embed_dim(entry: dict[str, Any], model: CostModel) -> tuple[int, str]:
    """(embedding size, where it comes from): measured, the config, the encoder catalog, the class, or assumed.

    Only a measurement of this very entry counts, and a size the config states beats the catalog's: another
    encoder of the same name or class may have other arguments.
    """
    measured = model.encoders.get(encoder_key(entry))
    if measured and measured.get("embed_dim"):
        return int(measured["embed_dim"]), "measured"
    stated = declared_dim(entry)
    if stated is not None and stated[1] == "config":
        return stated
    from ppgbench_pl.encoders.catalog import CATALOG

    for known in CATALOG.values():
        if known.class_path == entry.get("class_path") and known.embedding_dim:
            return int(known.embedding_dim), "catalog"
    found = declared_dim(entry) or declared_dim((entry.get("init_args") or {}).get("module"))
    return found if found else (DEFAULT_EMBED_DIM, "assumed")


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


def epochs_distribution(n_trials: int, max_epochs: int, min_resource: int = 1,
                        reduction_factor: int = 3) -> dict[int, float]:
    """Probability that a trial of an ``n_trials`` search trains each number of epochs (Optuna's brackets).

    The ``i``-th trial to reach a rung is promoted when in the top ``floor(i / eta)``, or the best while fewer than
    ``eta`` have arrived; checked at 0-based step ``s``, it has trained ``s + 1`` epochs.
    """
    eta, top = max(int(reduction_factor), 2), max(int(max_epochs), 1)
    low, n_trials = max(int(min_resource), 1), max(int(n_trials), 1)
    if top <= low:
        return {top: 1.0}
    brackets = math.floor(math.log(top / low, eta)) + 1
    weights = [math.ceil(brackets * eta ** (brackets - 1 - b) / (brackets - b)) for b in range(brackets)]
    out: dict[int, float] = {}
    for b, weight in enumerate(weights):
        share = n_trials * weight / sum(weights)
        rungs = [low * eta ** (b + k) for k in range(brackets) if low * eta ** (b + k) < top]
        arrived = [0.0] * len(rungs)
        for part in [1.0] * int(share) + ([share - int(share)] if share > int(share) else []):
            reach = 1.0
            for k, step in enumerate(rungs):
                arrived[k] += reach * part
                there = max(arrived[k], 1.0)
                promoted = max(math.floor(there) // eta, 1) / there
                epochs = min(step + 1, top)
                out[epochs] = out.get(epochs, 0.0) + part * reach * (1 - promoted) / n_trials
                reach *= promoted
            out[top] = out.get(top, 0.0) + part * reach / n_trials
    return out


def hyperband_epochs(max_epochs: int, min_resource: int = 1, reduction_factor: int = 3, n_trials: int = 48) -> float:
    """Mean epochs a trial of an ``n_trials`` search trains (:func:`epochs_distribution`)."""
    return sum(e * p for e, p in epochs_distribution(n_trials, max_epochs, min_resource, reduction_factor).items())


def few_validation_subjects(task: object, groups: int, n_folds: int) -> bool:
    """Whether a subject-level task's holdout has fewer than :data:`FEW_VALIDATION_SUBJECTS` subjects."""
    held = groups * (n_folds - 1) / max(n_folds, 1) * HOLDOUT_SHARE
    return getattr(task, "level", "window") == "subject" and held < FEW_VALIDATION_SUBJECTS


def search_trials(regime: Any, task: object, tied: bool = False) -> tuple[int, float]:
    """(trials, trial-epochs) of a searched job: each holdout's and search seed's study (``tied``: TIED_COMPLETE)."""
    from ppgbench_pl.regimes.search_seeds import searches_per_job

    s = regime.search
    first = min(int(s.min_resource) + 1, int(s.epochs))
    mean = s.epochs * TIED_COMPLETE + first * (1 - TIED_COMPLETE) if tied \
        else hyperband_epochs(s.epochs, s.min_resource, s.reduction_factor, s.n_trials)
    holdouts = int(regime.subject_repeats) if getattr(task, "level", "window") == "subject" else 1
    trials = holdouts * searches_per_job(regime) * int(s.n_trials)
    return trials, trials * mean
