"""A model's published files on Zenodo, Hugging Face or GitHub: sizes and checksums resolved first, then fetched."""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppgbench_pl.data.download.files import ChecksumLog, RemoteFile, file_hashes, mismatch, safe_relpath
from ppgbench_pl.data.download.http import Client
from ppgbench_pl.errors import DownloadError

DEFAULT_BASES = {
    "zenodo": "https://zenodo.org",
    "github_raw": "https://raw.githubusercontent.com",
    "github_media": "https://media.githubusercontent.com/media",
    "huggingface": "https://huggingface.co",
}
_LFS_POINTER = re.compile(r"version https://git-lfs\.github\.com/spec/v1\s.*?oid sha256:([0-9a-f]{64})\s+size (\d+)",
                          re.S)


def base_url(host: str) -> str:
    """The address of a host: its environment override (``$HF_ENDPOINT`` for the hub), else the public one."""
    env = "HF_ENDPOINT" if host == "huggingface" else f"PPGBENCH_MIRROR_{host.upper()}"
    return (os.environ.get(env) or DEFAULT_BASES[host]).rstrip("/")


@dataclass(frozen=True)
class Plan:
    """One published version: the revision the host answered, each file with its published size and checksum."""

    host: str
    repo: str
    revision: str
    items: tuple[RemoteFile, ...]
    #: The git blob id of hub files not in LFS (the hub's only checksum for them).
    blob_ids: dict[str, str] = field(default_factory=dict)


def resolve(client: Client, host: str, repo: str, revision: str | None, files: tuple[str, ...]) -> Plan:
    """Ask the host about one version (``revision``: a Zenodo record id or a commit; None: the default branch).

    Raises:
        DownloadError: The host is unreachable, does not know the version, or lacks one of ``files``.
    """
    step = {"zenodo": _zenodo, "github": _github, "huggingface": _huggingface}[host]
    return step(client, repo, revision, files)


def _listed(files: dict[str, Any], name: str, where: str) -> Any:
    """The listing entry of ``name``; a one-line DownloadError naming what the host has instead."""
    if name not in files:
        raise DownloadError(f"{where} has no file {name} (it has: {', '.join(sorted(files)) or 'none'})")
    return files[name]


def _zenodo(client: Client, repo: str, revision: str | None, files: tuple[str, ...]) -> Plan:
    """A Zenodo record from ``/api/records/<id>`` (a concept id answers with the newest version's id)."""
    base = base_url("zenodo")
    url = f"{base}/api/records/{urllib.parse.quote(revision or repo)}"
    answer = client.get_json(url)
    listing = answer.get("files") if isinstance(answer, dict) else None
    if isinstance(listing, dict):  # the InvenioRDM form: {"entries": {key: {...}}}
        listing = list((listing.get("entries") or {}).values())
    if not isinstance(listing, list) or answer.get("id") is None:
        raise DownloadError(f"{url}: not a Zenodo record (no id or file list); is the address right?")
    answered = str(answer["id"])
    by_key = {str(f.get("key")): f for f in listing if isinstance(f, dict)}
    items = []
    for key in files:
        row = _listed(by_key, key, f"{url}: Zenodo record {answered}")
        algo, _, digest = str(row.get("checksum") or "").partition(":")
        size = row.get("size")
        items.append(RemoteFile(url=f"{base}/api/records/{answered}/files/{urllib.parse.quote(key)}/content",
                                dest=safe_relpath(key), size=int(size) if isinstance(size, int) else None,
                                md5=digest if algo == "md5" and digest else None,
                                sha256=digest if algo == "sha256" and digest else None))
    return Plan("zenodo", repo, answered, tuple(items))


def _github(client: Client, repo: str, revision: str | None, files: tuple[str, ...]) -> Plan:
    """Files of a GitHub repository at one commit; a Git LFS file's pointer gives its size and SHA-256."""
    ref = revision or "HEAD"
    items = []
    for path in files:
        quoted = urllib.parse.quote(safe_relpath(path))
        raw = f"{base_url('github_raw')}/{repo}/{ref}/{quoted}"
        pointer = _LFS_POINTER.match(client.get_text(raw, head=1024) or "")
        if pointer:  # the repository holds a pointer; GitHub serves the content from its LFS media host
            items.append(RemoteFile(url=f"{base_url('github_media')}/{repo}/{ref}/{quoted}", dest=path,
                                    size=int(pointer.group(2)), sha256=pointer.group(1)))
        else:  # a plain git file: no published checksum, its SHA-256 is recorded when it arrives
            items.append(RemoteFile(url=raw, dest=path))
    return Plan("github", repo, ref, tuple(items))


@contextmanager
def _hub_errors(what: str) -> Iterator[None]:
    """Turn whatever ``huggingface_hub`` raises (HTTP, network, offline mode) into one DownloadError line."""
    try:
        yield
    except DownloadError:
        raise
    except Exception as exc:  # noqa: BLE001 - the hub client raises httpx, OSError and its own error types
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = lines[0] if lines else type(exc).__name__
        raise DownloadError(f"{what}: {type(exc).__name__}: {detail}") from None


def _huggingface(client: Client, repo: str, revision: str | None, files: tuple[str, ...]) -> Plan:
    """A hub repository at one revision: the commit it resolves to, and each file's size and checksum."""
    from huggingface_hub import HfApi

    endpoint = base_url("huggingface")
    ref = revision or "main"
    with _hub_errors(f"{repo}@{ref} on the Hugging Face hub ({endpoint})"):
        info = HfApi(endpoint=endpoint).model_info(repo, revision=ref, files_metadata=True)
    if not info.sha:
        raise DownloadError(f"{repo}@{ref}: the Hugging Face hub ({endpoint}) answered without a commit")
    siblings = {s.rfilename: s for s in info.siblings or []}
    items, blob_ids = [], {}
    for name in files:
        sibling = _listed(siblings, name, f"{repo}@{ref} on the Hugging Face hub")
        lfs = sibling.lfs
        items.append(RemoteFile(url=f"{endpoint}/{repo}/resolve/{info.sha}/{urllib.parse.quote(name)}",
                                dest=safe_relpath(name), size=lfs.size if lfs else sibling.size,
                                sha256=lfs.sha256 if lfs else None))
        if lfs is None and sibling.blob_id:
            blob_ids[name] = sibling.blob_id
    return Plan("huggingface", repo, info.sha, tuple(items), blob_ids)


def fetch(plan: Plan, folder: Path, client: Client) -> tuple[int, dict[str, dict[str, Any]]]:
    """Bring every file of ``plan`` into ``folder``, verified: how many were downloaded, and each file's record.

    Raises:
        DownloadError: A transfer failed (its ``.part`` is kept) or a file differs from what the host published.
    """
    log = ChecksumLog(folder)
    fetched = 0
    described = {}
    try:
        for item in plan.items:
            if plan.host == "huggingface":
                fetched += _hub_download(plan, item, folder, client)
            else:
                fetched += client.fetch(item, folder, log)
            size = (folder / item.dest).stat().st_size
            recorded = log.get(item.dest) or {}
            kind = ("sha256" if item.sha256 else "md5" if item.md5 else
                    "git blob id" if item.dest in plan.blob_ids else None)
            if recorded.get("size") != size:  # a hub file, or one verified before the log existed
                recorded = {"size": size, "sha256": file_hashes(folder / item.dest, ("sha256",))["sha256"]}
                log.record(item.dest, size=size, sha256=recorded["sha256"], publisher=kind)
            described[item.dest] = {"size": size, "sha256": recorded["sha256"], "publisher_checksum": kind}
    finally:
        log.save()
    return fetched, described


def _hub_download(plan: Plan, item: RemoteFile, folder: Path, client: Client) -> int:
    """One hub file into ``folder`` at the plan's commit (huggingface_hub resumes a cut transfer itself)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    path = folder / item.dest
    if path.is_file() and not client.force and mismatch(path, item, plan.blob_ids.get(item.dest)) is None:
        return 0
    quiet, was_quiet = not client.progress, are_progress_bars_disabled()
    if quiet:
        disable_progress_bars()
    try:
        with _hub_errors(f"{plan.repo}/{item.dest}@{plan.revision}"):
            hf_hub_download(plan.repo, item.dest, revision=plan.revision, local_dir=folder,
                            endpoint=base_url("huggingface"), force_download=client.force)
    finally:
        if quiet and not was_quiet:
            enable_progress_bars()
    problem = mismatch(path, item, plan.blob_ids.get(item.dest))
    if problem is not None:
        path.unlink()
        raise DownloadError(f"{path}: checksum mismatch ({problem}); the bad file was deleted, run again to "
                            "download it afresh")
    return 1
