"""Fetch one file over HTTP, resumably, and verify it before it gets its final name (PROTOCOL.md section 9).

A file is streamed to ``<name>.part``; a rerun asks for the rest with a ``Range`` request and appends only
when the server answers 206 with a matching ``Content-Range``. Only a file whose size and checksum check
out is renamed to its final name, so a final file on disk always means "verified".
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ppgbench_pl.errors import DownloadError

USER_AGENT = "ppgbench-downloader/0.1 (+research benchmark; Python urllib)"
TIMEOUT_S = 120.0
CHUNK_BYTES = 1 << 20
CHECKSUMS_FILE = "checksums.json"
#: Listings and JSON answers are small; anything larger is not what we asked for.
MAX_LISTING_BYTES = 64 << 20
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def safe_relpath(rel: str) -> str:
    """Check that a destination taken from a remote listing stays inside the dataset folder."""
    parts = rel.split("/")
    bad = (
        not rel
        or "\\" in rel
        or "\x00" in rel
        or re.match(r"^[A-Za-z]:", rel) is not None
        or any(p in ("", ".", "..") for p in parts)
    )
    if bad:
        raise DownloadError(f"refusing unsafe file name from the publisher's listing: {rel!r}")
    return rel


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch and what the publisher says about it (size and checksum are optional)."""

    url: str
    dest: str
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None

    def __post_init__(self) -> None:
        """Refuse destinations that would escape the dataset folder before anything is written."""
        safe_relpath(self.dest)


class ChecksumLog:
    """The ``checksums.json`` of one dataset folder: SHA-256 and size of what was received.

    Files without a publisher checksum are verified against it on a rerun. Saving is batched because
    BUT-PPG has thousands of small files and rewriting the log after each would be quadratic.
    """

    def __init__(self, folder: Path) -> None:
        """Load the existing log of ``folder`` (an unreadable log is treated as empty)."""
        self.path = folder / CHECKSUMS_FILE
        self._entries: dict[str, dict[str, Any]] = {}
        self._pending = 0
        self._last_save = time.monotonic()
        if self.path.is_file():
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = {}
            if isinstance(loaded, dict):
                self._entries = {k: v for k, v in loaded.items() if isinstance(v, dict)}

    def get(self, rel: str) -> dict[str, Any] | None:
        """The recorded entry of one file, if any."""
        return self._entries.get(rel)

    def record(self, rel: str, *, size: int, sha256: str, publisher: str | None) -> None:
        """Remember a verified file; ``publisher`` names the publisher's checksum kind, or None."""
        self._entries[rel] = {"size": size, "sha256": sha256, "publisher_checksum": publisher}
        self._pending += 1
        if self._pending >= 200 or time.monotonic() - self._last_save > 30:
            self.save()

    def save(self) -> None:
        """Write the log atomically (temporary file, then rename)."""
        if not self._entries and not self.path.exists():
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self._entries, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
        self._pending = 0
        self._last_save = time.monotonic()


def _hashes(path: Path, algos: tuple[str, ...]) -> dict[str, str]:
    """Hex digests of a file for several algorithms in one pass."""
    hs = {a: hashlib.new(a) for a in algos}
    with path.open("rb") as fh:
        while block := fh.read(CHUNK_BYTES):
            for h in hs.values():
                h.update(block)
    return {a: h.hexdigest() for a, h in hs.items()}


class Client:
    """Opens URLs with our User-Agent and timeout, optionally with HTTP basic auth for one URL prefix.

    The password lives only inside urllib's password manager; it is never stored on this object,
    written to disk or put into a message.
    """

    def __init__(self, *, progress: bool = True, auth: tuple[str, str, str] | None = None) -> None:
        """``auth`` is ``(url_prefix, user, password)``; credentials are sent only below that prefix."""
        self.progress = progress
        handlers: list[urllib.request.BaseHandler] = []
        if auth is not None:
            prefix, user, password = auth
            manager = urllib.request.HTTPPasswordMgrWithPriorAuth()
            manager.add_password(None, prefix, user, password, is_authenticated=True)
            handlers.append(urllib.request.HTTPBasicAuthHandler(manager))
        self._opener = urllib.request.build_opener(*handlers)

    def open(self, url: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        """Send a GET; HTTP error statuses stay HTTPError, network failures become DownloadError."""
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
        try:
            return self._opener.open(request, timeout=TIMEOUT_S)  # type: ignore[no-any-return]
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise DownloadError(f"could not reach {url}: {reason}") from None

    def get_text(self, url: str, *, missing_ok: bool = False) -> str | None:
        """Read a small text resource (a listing); with ``missing_ok`` a 404 gives None."""
        try:
            with self.open(url, {"Accept": "application/json, text/html, text/plain, */*"}) as resp:
                body = resp.read(MAX_LISTING_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if missing_ok and exc.code == 404:
                return None
            raise http_error(url, exc) from None
        except (OSError, http.client.HTTPException) as exc:
            raise DownloadError(f"connection lost while reading {url}: {exc}") from None
        if len(body) > MAX_LISTING_BYTES:
            raise DownloadError(f"{url}: listing over {MAX_LISTING_BYTES} bytes; is the address right?")
        return body.decode("utf-8", errors="replace")

    def get_json(self, url: str, *, missing_ok: bool = False) -> Any:
        """Read and parse a JSON API answer; with ``missing_ok`` a 404 gives None."""
        text = self.get_text(url, missing_ok=missing_ok)
        if text is None:
            return None
        try:
            return json.loads(text or "")
        except ValueError:
            raise DownloadError(f"{url} did not answer with JSON; is the API address right?") from None

    def fetch(self, item: RemoteFile, folder: Path, log: ChecksumLog) -> bool:
        """Make ``folder/item.dest`` a verified copy of ``item``; return False when it was already there."""
        dest = folder / item.dest
        if dest.is_file():
            if _already_complete(dest, item, log):
                return False
            dest.unlink()  # a final file that fails its check is stale; fetch it afresh
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        have = part.stat().st_size if part.is_file() else 0
        if item.size is not None and have > item.size:
            part.unlink()
            have = 0
        expected = item.size
        if not (item.size is not None and have == item.size):
            expected = self._stream(item, part, have)
        _finish(item, part, dest, expected, log)
        return True

    def _stream(self, item: RemoteFile, part: Path, have: int) -> int | None:
        """Download into ``part`` (appending when the server honours the Range); return the total size."""
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            resp = self.open(item.url, headers)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # our partial file does not fit the server's any more
                part.unlink()
                return self._stream(item, part, 0)
            raise http_error(item.url, exc) from None
        with resp:
            if resp.headers.get_content_type() == "text/html":
                raise DownloadError(
                    f"{item.url} answered with an HTML page, not data (an error or login page?); "
                    f"check the address or your access"
                )
            resumed = _resume_offset(resp, have)
            if resumed is None:  # a 206 for some other range: start over with a plain request
                if not have:
                    raise DownloadError(f"{item.url} answered a plain request with partial content")
                resp.close()
                part.unlink()
                return self._stream(item, part, 0)
            offset, total = resumed
            if total is None and item.size is not None:
                total = item.size
            with (
                part.open("ab" if offset else "wb") as out,
                tqdm(
                    total=total,
                    initial=offset,
                    unit="B",
                    unit_scale=True,
                    unit_divisor=1024,
                    desc=item.dest,
                    leave=False,
                    disable=not self.progress,
                ) as bar,
            ):
                try:
                    while block := resp.read1(CHUNK_BYTES):  # read1 keeps what arrived before a cut
                        out.write(block)
                        bar.update(len(block))
                except (OSError, http.client.HTTPException) as exc:
                    if isinstance(exc, http.client.IncompleteRead):
                        out.write(exc.partial)
                    out.flush()
                    of = f" of {total}" if total is not None else ""
                    raise DownloadError(
                        f"{part.with_suffix('')}: connection lost after {part.stat().st_size}{of} bytes "
                        f"({type(exc).__name__}); run again to resume"
                    ) from None
        return item.size if item.size is not None else total


def _resume_offset(resp: http.client.HTTPResponse, have: int) -> tuple[int, int | None] | None:
    """Where the body starts in the file and the file's total size; None for a 206 that does not fit."""
    if resp.status == 206:
        match = _CONTENT_RANGE.fullmatch((resp.headers.get("Content-Range") or "").strip())
        if not (have and match and int(match.group(1)) == have):
            return None
        return have, None if match.group(3) == "*" else int(match.group(3))
    length = resp.headers.get("Content-Length")
    return 0, int(length) if length and length.isdigit() else None


def _already_complete(dest: Path, item: RemoteFile, log: ChecksumLog) -> bool:
    """Whether an existing final file matches the publisher's size/checksum, or what we recorded."""
    size = dest.stat().st_size
    if item.size is not None and size != item.size:
        return False
    if item.sha256:
        return _hashes(dest, ("sha256",))["sha256"] == item.sha256.lower()
    if item.md5:
        return _hashes(dest, ("md5",))["md5"] == item.md5.lower()
    recorded = log.get(item.dest)
    if recorded is not None:
        return recorded.get("size") == size and _hashes(dest, ("sha256",))["sha256"] == recorded.get("sha256")
    return True  # final names are only given after verification, and nothing more is known


def _finish(item: RemoteFile, part: Path, dest: Path, expected: int | None, log: ChecksumLog) -> None:
    """Check size and checksum of the received ``.part`` and give it its final name."""
    got = part.stat().st_size if part.is_file() else 0
    if expected is not None and got != expected:
        if got > expected:
            part.unlink()
            raise DownloadError(f"{dest}: received {got} bytes, more than the expected {expected}; run again")
        raise DownloadError(f"{dest}: received {got} of {expected} bytes; run again to resume")
    algos = ("sha256", "md5") if item.md5 and not item.sha256 else ("sha256",)
    digests = _hashes(part, algos)
    publisher = "sha256" if item.sha256 else "md5" if item.md5 else None
    want = (item.sha256 or item.md5 or "").lower()
    if publisher is not None and digests[publisher] != want:
        part.unlink()
        raise DownloadError(
            f"{dest}: {publisher} checksum mismatch (publisher {want}, received {digests[publisher]}); "
            f"the bad file was deleted, run again to download it afresh"
        )
    os.replace(part, dest)
    log.record(item.dest, size=got, sha256=digests["sha256"], publisher=publisher)


def http_error(url: str, exc: urllib.error.HTTPError) -> DownloadError:
    """A one-line message for an HTTP error status, with a hint for access problems."""
    exc.close()
    hint = ""
    if exc.code in (401, 403):
        hint = "; access refused: check the user name, password and that you may access this data"
    elif exc.code == 404:
        hint = "; the file is not there (a moved source? set a mirror to override)"
    return DownloadError(f"{url}: HTTP {exc.code} {exc.reason}{hint}")
