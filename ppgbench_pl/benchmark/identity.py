"""Run identity in ``run.json``: a later run must agree on what both share (it may add datasets, models, rates)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import uuid
import warnings
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

import ppgbench_pl
from ppgbench_pl.atomic_io import write_json_atomic
from ppgbench_pl.benchmark.cache import data_identity, encoder_identity
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.locks import file_lock
from ppgbench_pl.results.untrusted import loads_bounded, max_file_bytes, read_bytes_bounded

#: Identity sections whose entries (by name) may be added by a later run; anything else must match.
MERGEABLE = ("datasets", "encoders", "regimes")


def package_versions() -> dict[str, str]:
    """Versions of the packages that can change numbers (plus cuML when installed)."""
    out = {}
    for name in ("numpy", "scipy", "scikit-learn", "torch", "lightning", "optuna", "neurokit2", "pandas", "cuml-cu12"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


_SOURCE_DIGEST: str | None = None


def code_version() -> dict[str, str]:
    """The package version and a SHA-256 over its source files (computed once per process)."""
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        _SOURCE_DIGEST = source_digest()
    return {"ppgbench": ppgbench_pl.__version__, "source_sha256": _SOURCE_DIGEST}


def source_digest() -> str:
    """SHA-256 over the package's own source files."""
    root = Path(ppgbench_pl.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def device_string(trainer_kwargs: dict[str, Any]) -> str:
    """The accelerator jobs run on, e.g. ``cpu`` or ``cuda: NVIDIA H200 x2``."""
    if device_kind(trainer_kwargs) == "cpu":
        return "cpu"
    names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
    return f"cuda: {', '.join(names)} x{torch.cuda.device_count()}"


def device_kind(trainer_kwargs: dict[str, Any]) -> str:
    """``cpu`` or ``cuda``: where the numbers are computed (kernels differ, so results may too)."""
    return "cpu" if str(trainer_kwargs.get("accelerator")) == "cpu" or not torch.cuda.is_available() else "cuda"


def suite_identity(suite: Any) -> dict[str, Any]:
    """What a suite's results depend on (not which seeds, folds or tasks run; a non-published budget too)."""
    from ppgbench_pl.benchmark.trainer_block import IDENTITY_TRAINER
    from ppgbench_pl.lightning_trainer import normalise_precision

    encoders, trainer_kwargs, budget = suite.encoders, dict(suite.trainer_kwargs), suite.budget.name
    rates = sorted({float(e.sampling_rate) for e in encoders})
    datasets = {
        dm.dataset: {**{k: v for k, v in dm.settings().items() if k not in ("root", "num_workers")},  # speed only
                     # the tree's marker and the windows themselves: a hand-edited tree is another dataset
                     "data": {f"{fs:g}": f"{data_identity(dm.store(fs).directory)}:{dm.windows(fs).content_digest()}"
                              for fs in rates}}
        for dm in suite.datamodules.values()
    }
    trainer = {k: trainer_kwargs.get(k) for k in IDENTITY_TRAINER}
    trainer["precision"] = normalise_precision(trainer["precision"] or "32-true")
    trainer["device"] = device_kind(trainer_kwargs)
    identity = {"ppgbench": ppgbench_pl.__version__, "trainer": trainer, "datasets": datasets,
                "encoders": {e.name: encoder_identity(e) for e in encoders},
                # Callables are left out: Lightning binds ``log``/``log_dict`` onto callbacks it has run.
                "regimes": {r.name: {k: repr(v) for k, v in sorted(r.settings().items()) if not callable(v)}
                            for r in suite.regimes}}
    if budget and budget != "published":
        identity["budget"] = budget
    if callbacks := suite.callback_entries:  # they change how trials train: class paths, arguments and code
        identity["callbacks"] = _normalise([{"class_path": c.get("class_path"), "init_args": c.get("init_args") or {},
                                             **callback_code(str(c.get("class_path")))} for c in callbacks])
    return identity


def callback_code(class_path: str) -> dict[str, str]:
    """``{"code_sha256": ...}`` of a user callback's source (Lightning's and ours: covered by the versions)."""
    from ppgbench_pl.encoders.custom_settings import code_digest
    from ppgbench_pl.naming import import_class

    if class_path.split(".")[0] in ("lightning", "pytorch_lightning", "ppgbench_pl"):
        return {}
    return {"code_sha256": code_digest(import_class(class_path))}


def _normalise(value: Any) -> Any:
    return json.loads(json.dumps(value))


def merge_identity(existing: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(merged identity, what conflicts); entries of mergeable sections may be new, never different."""
    merged, conflicts = dict(existing), []
    for key in sorted(set(existing) | set(new)):
        old, cur = existing.get(key), new.get(key)
        if key in MERGEABLE and isinstance(old, dict) and isinstance(cur, dict):
            section = dict(old)
            for name, value in cur.items():
                if name not in old:
                    section[name] = value
                elif key == "datasets" and isinstance(old[name], dict) and isinstance(value, dict):
                    before, now = old[name].get("data", {}), value.get("data", {})  # rates may be added
                    if any(before.get(fs, h) != h for fs, h in now.items()) or {**old[name], "data": 0} != \
                            {**value, "data": 0}:
                        conflicts.append(f"{key}.{name}")
                    section[name] = {**old[name], "data": {**before, **now}}
                elif old[name] != value:
                    conflicts.append(f"{key}.{name}")
            merged[key] = section
        elif old != cur:
            conflicts.append(key)
            merged[key] = cur
    return merged, conflicts


def parameter_counts(encoders: Iterable[Any]) -> dict[str, dict[str, int]]:
    """Total and trainable parameters per encoder, recorded in ``run.json`` for the report's Table 7."""
    return {e.name: {"total": sum(p.numel() for p in e.parameters()),
                     "trainable": sum(p.numel() for p in e.parameters() if p.requires_grad)} for e in encoders}


def check_or_write_identity(run_dir: Path, identity: dict[str, Any], extra: dict[str, Any],
                            allow_code_change: bool = False) -> dict[str, Any]:
    """Write or extend ``run.json`` (``extra``: recorded, not compared; ``planned_jobs`` merged) and return it."""
    path = Path(run_dir) / "run.json"
    with file_lock(Path(run_dir) / ".locks" / "run.json.lock"):
        meta: dict[str, Any] = read_run_json(path) if path.exists() else {}
        identity, versions = resolve_identity(path, meta, identity, extra, allow_code_change)
        planned = list(dict.fromkeys([*(meta.get("planned_jobs") or []), *(extra.get("planned_jobs") or [])]))
        out = {**meta, **_normalise(extra), "identity": identity, "planned_jobs": planned,
               "code_versions": versions, "run_uid": meta.get("run_uid") or uuid.uuid4().hex,
               "python": platform.python_version(), "ppgbench": ppgbench_pl.__version__}
        write_json_atomic(path, out)
    return out


def check_identity(run_dir: Path, identity: dict[str, Any], extra: dict[str, Any],
                   allow_code_change: bool = False) -> None:
    """Refuse what :func:`check_or_write_identity` refuses, with the same message, writing nothing (the dry run)."""
    path = Path(run_dir) / "run.json"
    if path.exists():
        resolve_identity(path, read_run_json(path), identity, extra, allow_code_change)


def resolve_identity(path: Path, meta: dict[str, Any], identity: dict[str, Any], extra: dict[str, Any],
                     allow_code_change: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(merged identity, code versions and this one) against ``run.json``'s content; ``ConfigError`` for conflicts."""
    identity = _normalise(identity)
    code = code_version()
    versions = list(meta.get("code_versions") or [])
    if not meta:
        return identity, [code]
    old_identity = dict(meta.get("identity") or {})
    legacy = old_identity.pop("source_sha256", None)
    if legacy and not versions:
        versions = [{"ppgbench": meta.get("ppgbench"), "source_sha256": legacy}]
    merged, conflicts = merge_identity(old_identity, identity)
    before, now = old_identity.get("budget", "published"), identity.get("budget", "published")
    if before != now:  # ``published`` when not recorded
        raise ConfigError(f"{path}: this run folder holds results of the {before} budget, not {now}; "
                          "budgets never share a folder: give this run its own --output_dir")
    if conflicts:
        raise ConfigError(f"{path}: this run folder holds results of a different config or data "
                          f"({', '.join(conflicts)} differ); choose a new output folder")
    mine = code["source_sha256"] in {v.get("source_sha256") for v in versions}
    if versions and not mine and not allow_code_change:
        raise ConfigError(f"{path}: this run folder was made by another version of the ppgbench source; resume it "
                          "with --allow_code_change (the mix is recorded and shown in the report) or choose a new "
                          "output folder")
    old_versions, new_versions = meta.get("versions"), extra.get("versions")
    if old_versions and new_versions and old_versions != new_versions:
        changed = sorted(k for k in set(old_versions) | set(new_versions)
                         if old_versions.get(k) != new_versions.get(k))
        warnings.warn(f"{path}: package versions changed since this folder was started "
                      f"({', '.join(changed)}); results are kept but may not be bit-identical", stacklevel=3)
    return merged, versions if mine else [*versions, code]


def read_run_json(path: Path) -> dict[str, Any]:
    """``run.json`` as a dict (read within the results files' bounds), or a one-line error naming the file."""
    try:
        meta = loads_bounded(read_bytes_bounded(path, max_file_bytes()))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
                          "move it away to start the folder afresh, or choose a new output folder") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}: not a ppgbench run.json (expected a JSON object)")
    return meta
