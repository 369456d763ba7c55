"""Run identity: what a run folder's results were made from, so a rerun never mixes different runs.

``run.json`` holds the identity (code digest, and per dataset, encoder and regime what determines its
results: data hashes, weights digests, settings) plus a record of the rest (resolved config, package
versions, device, planned job ids). A later run into the same folder must agree on every part both
runs share; it may add datasets, encoders, regimes or rates (a run extended with more tasks or models),
which are merged in. Package versions and the device are recorded and a change is warned about, not
refused: moving a run to another GPU index or a patch release should not throw work away.
"""

from __future__ import annotations

import hashlib
import json
import platform
import uuid
import warnings
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

import ppgbench_pl
from ppgbench_pl.benchmark.cache import data_identity, encoder_identity
from ppgbench_pl.benchmark.locks import file_lock
from ppgbench_pl.data.processed import write_json_atomic
from ppgbench_pl.datamodules.ppg import PPGDataModule
from ppgbench_pl.encoders.base import PPGEncoder
from ppgbench_pl.errors import ConfigError
from ppgbench_pl.regimes.base import Regime

PACKAGES = ("numpy", "scipy", "scikit-learn", "torch", "lightning", "optuna", "neurokit2", "pandas")
#: Identity sections whose entries (by name) may be added by a later run; anything else must match.
MERGEABLE = ("datasets", "encoders", "regimes")


def package_versions() -> dict[str, str]:
    """Versions of the packages that can change numbers (plus cuML when installed)."""
    out = {}
    for name in (*PACKAGES, "cuml-cu12"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


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
    accelerator = str(trainer_kwargs.get("accelerator") or "auto")
    if accelerator in ("cpu",) or not torch.cuda.is_available():
        return "cpu"
    names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
    return f"cuda: {', '.join(names)} x{torch.cuda.device_count()}"


def run_identity(encoders: Sequence[PPGEncoder], datamodules: Iterable[PPGDataModule],
                 regimes: Sequence[Regime]) -> dict[str, Any]:
    """What results in a folder depend on (not which subset of seeds, folds or tasks is run)."""
    rates = sorted({float(e.sampling_rate) for e in encoders})
    datasets = {
        dm.dataset: {"n_folds": dm.n_folds, "n_inner_folds": dm.n_inner_folds,
                     "data": {f"{fs:g}": data_identity(dm.store(fs).directory) for fs in rates}}
        for dm in datamodules
    }
    return {
        "source_sha256": source_digest(),
        "datasets": datasets,
        "encoders": {e.name: encoder_identity(e) for e in encoders},
        # Callables are left out: Lightning binds ``log``/``log_dict`` onto callbacks it has run.
        "regimes": {r.name: {k: repr(v) for k, v in sorted(r.settings().items()) if not callable(v)} for r in regimes},
    }


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
                    data = {**old[name].get("data", {}), **value.get("data", {})}
                    same_rates = all(old[name].get("data", {}).get(fs, h) == h for fs, h in value.get("data", {}).items())
                    same_rest = {k: v for k, v in old[name].items() if k != "data"} == \
                        {k: v for k, v in value.items() if k != "data"}
                    if not (same_rates and same_rest):
                        conflicts.append(f"{key}.{name}")
                    section[name] = {**old[name], "data": data}
                elif old[name] != value:
                    conflicts.append(f"{key}.{name}")
            merged[key] = section
        elif old != cur:
            conflicts.append(key)
            merged[key] = cur
    return merged, conflicts


def parameter_counts(encoders: Iterable[Any]) -> dict[str, dict[str, int]]:
    """Total and trainable parameters per encoder, recorded in ``run.json`` for the report's Table 7."""
    return {
        e.name: {"total": sum(p.numel() for p in e.parameters()),
                 "trainable": sum(p.numel() for p in e.parameters() if p.requires_grad)}
        for e in encoders
    }


def check_or_write_identity(run_dir: Path, identity: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Write or extend ``run.json``; refuse a folder whose results came from something else.

    Args:
        run_dir: Run folder.
        identity: This run's identity (see :func:`run_identity`).
        extra: Recorded, not compared: config, versions, device, seeds, folds, planned job ids
            (``planned_jobs`` is merged with earlier runs' so the folder lists every job it plans).

    Returns:
        The ``run.json`` content as written.

    Raises:
        ConfigError: ``run.json`` exists with a different identity for something both runs share.
    """
    path = Path(run_dir) / "run.json"
    with file_lock(Path(run_dir) / ".locks" / "run.json.lock"):
        meta: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        identity = _normalise(identity)
        if meta:
            merged, conflicts = merge_identity(meta.get("identity") or {}, identity)
            if conflicts:
                raise ConfigError(
                    f"{path}: this run folder holds results of a different config, data or code "
                    f"({', '.join(conflicts)} differ); choose a new output folder"
                )
            old_versions, new_versions = meta.get("versions"), extra.get("versions")
            if old_versions and new_versions and old_versions != new_versions:
                changed = sorted(k for k in set(old_versions) | set(new_versions)
                                 if old_versions.get(k) != new_versions.get(k))
                warnings.warn(f"{path}: package versions changed since this folder was started "
                              f"({', '.join(changed)}); results are kept but may not be bit-identical",
                              stacklevel=2)
            identity = merged
        planned = list(dict.fromkeys([*(meta.get("planned_jobs") or []), *(extra.get("planned_jobs") or [])]))
        out = {**meta, **_normalise(extra), "identity": identity, "planned_jobs": planned,
               "run_uid": meta.get("run_uid") or uuid.uuid4().hex, "python": platform.python_version(),
               "ppgbench": ppgbench_pl.__version__}
        write_json_atomic(path, out)
    return out
