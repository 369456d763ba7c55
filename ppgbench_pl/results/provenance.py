"""How a page or file meant to be shared names its inputs: file name and content digest, never a local path."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from ppgbench_pl.data.download.files import file_hashes

#: Hex digits of the digest shown beside a name (the full digest is in ``content_digest``).
SHOWN = 16


def content_digest(path: str | Path) -> str:
    """SHA-256 of a file, or over a run folder's ``run.json`` and records (each as relative path + its SHA-256)."""
    path = Path(path)
    if path.is_file():
        return file_hashes(path, ("sha256",))["sha256"]
    digest = hashlib.sha256()
    members = [path / "run.json", *sorted((path / "jobs").glob("*/results.json"))]
    for member in (m for m in members if m.is_file()):
        digest.update(member.relative_to(path).as_posix().encode("utf-8") + b"\0")
        digest.update(file_hashes(member, ("sha256",))["sha256"].encode() + b"\0")
    return digest.hexdigest()


def input_label(path: str | Path, digest: str | None = None, shown: int = SHOWN) -> str:
    """``name (sha256:0123456789abcdef)``: an input as a shared page or file names it (``shown`` hex digits)."""
    path = Path(path)
    name = path.absolute().name or str(path)
    return f"{name} (sha256:{(digest or content_digest(path))[:shown]})"


def scrub(text: str, paths: Iterable[Path], labels: Iterable[str]) -> str:
    """``text`` with each path's spellings replaced by its label (a file inside: ``run_a/jobs/.../results.json``)."""
    for path, label in zip(paths, labels, strict=True):
        spellings = {str(path), str(path.absolute()), str(path.resolve())} - {"", "."}
        for spelling in sorted(spellings, key=len, reverse=True):
            text = text.replace(spelling + os.sep, path.absolute().name + "/").replace(spelling, label)
    return text
