"""Download the raw datasets into ``<raw>/<key>/``, resumably and verified; one failure never stops the others."""

from __future__ import annotations

import difflib
import getpass
import json
import logging
import os
import re
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppgbench_pl.atomic_io import write_text_atomic
from ppgbench_pl.data.download.archives import MARKER_SUFFIX, extract, marker_path
from ppgbench_pl.data.download.files import ChecksumLog, RemoteFile, safe_relpath
from ppgbench_pl.data.download.http import RETRIES, STALL_S, Client
from ppgbench_pl.data.registry import SOURCES
from ppgbench_pl.data.spec import Source
from ppgbench_pl.errors import ConfigError, DownloadError, PPGBenchError
from ppgbench_pl.locks import LockBusy, file_lock, lock_holder

__all__ = ["FAILED", "SOURCES", "download"]

logger = logging.getLogger(__name__)

#: Prefix of a failed dataset's status; a successful one starts with "ok".
FAILED = "failed: "
PASSWORD_ENV = "PHYSIONET_PASSWORD"


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
    """Fetch each dataset into ``raw_root/<key>/``; ``{key: "ok: ..." | "failed: ..."}`` (unknown key: ConfigError)."""
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
    spec = SOURCES[key]
    base = (mirrors.get(key) or os.environ.get(f"PPGBENCH_MIRROR_{key.upper()}") or spec.base_url).rstrip("/")
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
    record = {"key": key, "source": spec.page, "base_url": base,
              "downloaded_utc": datetime.now(UTC).isoformat(timespec="seconds")}
    write_text_atomic(folder / "source.json", json.dumps(record, indent=2) + "\n")
    return f"ok: {job.fetched} fetched, {job.present} already present"


@dataclass
class Job:
    """One dataset's fetch: client, folder, base URL and checksum log; the tree a PhysioNet ``select`` sees."""

    client: Client
    folder: Path
    base: str
    log: ChecksumLog
    fetched: int = 0
    present: int = 0
    #: PhysioNet's ``SHA256SUMS.txt`` (relative path -> SHA-256), where published.
    sums: dict[str, str] = field(default_factory=dict)

    def get(self, item: RemoteFile) -> None:
        """Fetch one file and count whether it was downloaded or already there."""
        if self.client.fetch(item, self.folder, self.log):
            self.fetched += 1
        else:
            self.present += 1

    def url(self, rel: str) -> str:
        """The address of ``rel`` under the base URL."""
        return f"{self.base}/{urllib.parse.quote(rel)}"

    def fetch(self, rel: str) -> Path:
        """Fetch ``rel`` (checked against ``sums`` when listed there) and return its local path."""
        rel = safe_relpath(rel)
        self.get(RemoteFile(url=self.url(rel), dest=rel, sha256=self.sums.get(rel)))
        return self.folder / rel


def _fetch_and_extract(job: Job, item: RemoteFile, *, nested: bool = False) -> None:
    """Fetch an archive and extract it into the dataset folder, unless its marker says it is done."""
    archive = job.folder / item.dest
    if marker_path(archive).exists():
        job.present += 1
        return
    job.get(item)
    extract(archive, job.folder, nested=nested)


def _field(row: Any, *keys: str) -> Any:
    """A nested field of a JSON object, or None when any level is missing."""
    for key in keys:
        if not isinstance(row, dict):
            return None
        row = row.get(key)
    return row


def _int_or_none(value: Any) -> int | None:
    """A size from a listing, tolerating strings and absent values."""
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _figshare(spec: Source, job: Job) -> None:
    """A Figshare article version: the listing names the ``.zip`` file(s), with size and MD5."""
    url = f"{job.base}/articles/{spec.article}/versions/{spec.version}"
    files = _field(job.client.get_json(url), "files")
    if not isinstance(files, list):
        raise DownloadError(f"{url}: the Figshare answer has no file list")
    zips = [f for f in files if str(_field(f, "name") or "").lower().endswith(".zip")]
    if not zips:
        raise DownloadError(f"{url}: no .zip file in the Figshare listing")
    for entry in zips:
        download_url = _field(entry, "download_url")
        if not isinstance(download_url, str):
            raise DownloadError(f"{url}: listing entry {entry.get('name')!r} has no download_url")
        md5 = _field(entry, "computed_md5") or _field(entry, "supplied_md5") or None
        dest = safe_relpath(str(entry["name"]))
        _fetch_and_extract(job, RemoteFile(url=download_url, dest=dest, size=_int_or_none(entry.get("size")), md5=md5))


def _mendeley_folder_paths(folders: Any, url: str) -> dict[str, str]:
    """Folder id -> path from the flat folder list (each folder names its parent by id)."""
    if not isinstance(folders, list):
        raise DownloadError(f"{url}: the Mendeley answer is not a folder list")
    by_id = {str(f["id"]): f for f in folders if isinstance(f, dict) and "id" in f and "name" in f}
    paths: dict[str, str] = {}
    for fid in by_id:
        parts: list[str] = []
        cur: str | None = fid
        while cur in by_id and len(parts) <= len(by_id):
            parts.append(str(by_id[cur]["name"]))
            parent = by_id[cur].get("parent_id")
            cur = str(parent) if parent else None
        paths[fid] = safe_relpath("/".join(reversed(parts)))
    return paths


def _mendeley(spec: Source, job: Job) -> None:
    """A Mendeley Data version: walk the folder tree, list each wanted folder, check size and SHA-256."""
    api, version = f"{job.base}/datasets/{spec.dataset}", spec.version
    folders_url = f"{api}/folders/{version}"
    folders = job.client.get_json(folders_url, missing_ok=True)  # a flat dataset may have no folders
    paths = _mendeley_folder_paths([] if folders is None else folders, folders_url)
    wanted = sorted((p, fid) for fid, p in paths.items() if spec.want_folder(p))
    items: list[RemoteFile] = []
    for fid, prefix in [("root", "")] + [(fid, p) for p, fid in wanted]:
        query = urllib.parse.urlencode({"folder_id": fid, "version": version})
        rows = job.client.get_json(f"{api}/files?{query}")
        if not isinstance(rows, list):
            raise DownloadError(f"{api}/files?{query}: the Mendeley answer is not a file list")
        for row in rows:
            name = _field(row, "filename")
            url = _field(row, "content_details", "download_url")
            if not isinstance(name, str) or not isinstance(url, str):
                raise DownloadError(f"{api}/files?{query}: an entry has no filename or download_url")
            rel = f"{prefix}/{name}" if prefix else name
            if spec.want_file(rel):
                size = _int_or_none(_field(row, "content_details", "size") or _field(row, "size"))
                sha = _field(row, "content_details", "sha256_hash") or None
                items.append(RemoteFile(url=url, dest=safe_relpath(rel), size=size, sha256=sha))
    if not items:
        raise DownloadError(f"{api}: the Mendeley listing holds none of the files this benchmark needs")
    for item in items:
        job.get(item)


def _physionet_sums(job: Job) -> dict[str, str]:
    """The project's ``SHA256SUMS.txt`` (relative path -> SHA-256), or empty when it is not published."""
    text = job.client.get_text(f"{job.base}/SHA256SUMS.txt", missing_ok=True) or ""
    sums: dict[str, str] = {}
    for line in text.splitlines():
        digest, _, name = line.strip().partition(" ")
        if re.fullmatch(r"[0-9a-fA-F]{64}", digest) and name.strip():
            sums[name.strip().lstrip("*")] = digest.lower()
    return sums


def run_source(spec: Source, job: Job) -> None:
    """Fetch (and extract) everything one declared source publishes into the job's folder."""
    if spec.publisher == "archive":
        _fetch_and_extract(job, RemoteFile(url=job.base, dest=spec.filename), nested=spec.nested)
    elif spec.publisher == "figshare":
        _figshare(spec, job)
    elif spec.publisher == "mendeley":
        _mendeley(spec, job)
    else:  # physionet: its declaration has a fetch step (Source refuses one without)
        assert spec.select is not None
        job.sums = _physionet_sums(job)
        spec.select(job)
