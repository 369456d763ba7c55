"""Download the raw datasets into ``<raw>/<key>/``, resumably and verified (PROTOCOL.md section 9).

A failed dataset is collected and the others continue; the caller decides the exit status.
"""

from __future__ import annotations

import difflib
import getpass
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.data.download.archives import MARKER_SUFFIX
from ppgbench_pl.data.download.files import ChecksumLog
from ppgbench_pl.data.download.http import RETRIES, STALL_S, Client
from ppgbench_pl.data.download.sources import Job, run_source
from ppgbench_pl.data.registry import SOURCES
from ppgbench_pl.data.spec import SourceSpec
from ppgbench_pl.errors import ConfigError, DownloadError, PPGBenchError
from ppgbench_pl.locks import LockBusy, file_lock, lock_holder

__all__ = ["FAILED", "SOURCES", "download", "mirror_env_var"]

logger = logging.getLogger(__name__)

#: Prefix of a failed dataset's status; a successful one starts with "ok".
FAILED = "failed: "
PASSWORD_ENV = "PHYSIONET_PASSWORD"


def mirror_env_var(key: str) -> str:
    """The environment variable that overrides a dataset's base URL."""
    return f"PPGBENCH_MIRROR_{key.upper()}"


def download(
    datasets: Sequence[str],
    raw_root: Path,
    *,
    physionet_user: str | None = None,
    progress: bool = True,
    mirrors: Mapping[str, str] | None = None,
    force: bool = False,
    stall_s: float = STALL_S,
    retries: int = RETRIES,
) -> dict[str, str]:
    """Fetch each dataset into ``raw_root/<key>/`` and return ``{key: "ok: ..." | "failed: <reason>"}``.

    Unknown keys raise ConfigError first. ``mirrors`` maps a key to a base URL replacing the publisher's (as
    ``PPGBENCH_MIRROR_<KEY>`` does); ``force``, ``stall_s`` and ``retries`` go to :class:`~.http.Client`.
    """
    options = {"progress": progress, "force": force, "stall_s": stall_s, "retries": retries}
    unknown = [k for k in datasets if k not in SOURCES]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(SOURCES), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(SOURCES)}"
        raise ConfigError(f"cannot download unknown dataset '{unknown[0]}'; {hint}")
    statuses: dict[str, str] = {}
    for key in dict.fromkeys(datasets):
        try:
            statuses[key] = _download_one(key, Path(raw_root), physionet_user, mirrors or {}, options)
        except PPGBenchError as exc:
            statuses[key] = FAILED + str(exc)
        except Exception as exc:  # one dataset's surprise must not stop the others
            logger.debug("download of %s failed", key, exc_info=True)
            statuses[key] = f"{FAILED}unexpected {type(exc).__name__}: {exc}"
        logger.info("%s: %s", key, statuses[key])
    return statuses


def _client(key: str, base: str, physionet_user: str | None, options: Mapping[str, Any]) -> Client:
    """A client; for a credentialed source it carries basic auth limited to the source's base URL."""
    if not SOURCES[key].credentialed:
        return Client(**options)
    if not physionet_user:
        raise DownloadError(f"{key} is credentialed on PhysioNet: give your PhysioNet user name")
    password = os.environ.get(PASSWORD_ENV)
    if not password:
        if not _stdin_is_tty():
            raise DownloadError(f"{key} needs your PhysioNet password: set {PASSWORD_ENV} (no terminal to ask in)")
        password = getpass.getpass(f"PhysioNet password for {physionet_user}: ")
        if not password:
            raise DownloadError(f"{key}: no PhysioNet password given")
    return Client(auth=(base + "/", physionet_user, password), **options)


def _stdin_is_tty() -> bool:
    """Whether there is a terminal to prompt in (a replaced or closed stdin counts as none)."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _download_one(
    key: str, raw_root: Path, physionet_user: str | None, mirrors: Mapping[str, str], options: Mapping[str, Any]
) -> str:
    """Fetch one dataset (from the mirror given, else the environment's, else the publisher); write source.json."""
    spec: SourceSpec = SOURCES[key]
    base = (mirrors.get(key) or os.environ.get(mirror_env_var(key)) or spec.base_url).rstrip("/")
    client = _client(key, base, physionet_user, options)
    folder = raw_root / key
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / ".download.lock"  # two downloads never append to one .part: the second one fails
    with ExitStack() as held:
        try:
            held.enter_context(file_lock(lock, blocking=False))
        except LockBusy:
            raise DownloadError(
                f"{folder}: another download of {key} is running ({lock_holder(lock)}); wait for it to finish"
            ) from None
        if options.get("force"):  # archives are extracted again too
            for marker in folder.rglob(f"*{MARKER_SUFFIX}"):
                marker.unlink()
        job = Job(client=client, folder=folder, base=base, log=ChecksumLog(folder))
        try:
            run_source(spec, job)
        finally:
            job.log.save()
    record = {
        "key": key,
        "source": spec.page,
        "base_url": base,
        "downloaded_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_text_atomic(folder / "source.json", json.dumps(record, indent=2) + "\n")
    return f"ok: {job.fetched} fetched, {job.present} already present"
