"""Run identity: what a run folder's results were made from, so a rerun never mixes different runs."""

from __future__ import annotations

import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

import ppgbench_pl
from ppgbench_pl.data.processed import write_json_atomic
from ppgbench_pl.errors import ConfigError

PACKAGES = ("numpy", "scipy", "scikit-learn", "torch", "lightning", "optuna", "neurokit2", "pandas")


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


def check_or_write_identity(run_dir: Path, identity: dict[str, Any], extra: dict[str, Any]) -> None:
    """Write ``run.json``; if one exists with a different identity, refuse to continue."""
    path = Path(run_dir) / "run.json"
    if path.exists():
        existing = json.loads(path.read_text()).get("identity")
        if existing != json.loads(json.dumps(identity)):
            changed = sorted(k for k in set(existing or {}) | set(identity) if (existing or {}).get(k) != identity.get(k))
            raise ConfigError(
                f"{path}: this run folder holds results of a different config, data or code "
                f"({', '.join(changed)} differ); choose a new output folder"
            )
    write_json_atomic(path, {"identity": identity, **extra, "python": platform.python_version(),
                             "ppgbench": ppgbench_pl.__version__})
