"""Fetch one file over HTTP into ``<name>.part``, resumed only on a matching 206, verified before its final name."""

from __future__ import annotations

import http.client
import json
import logging
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ppgbench_pl.data.download.files import (
    CHUNK_BYTES,
    ChecksumLog,
    RemoteFile,
    already_complete,
    finish_download,
)
from ppgbench_pl.errors import DownloadError

logger = logging.getLogger(__name__)
USER_AGENT = "ppgbench-downloader/0.1 (+research benchmark; Python urllib)"
TIMEOUT_S = 120.0
#: A transfer that delivers fewer than STALL_MIN_BYTES in STALL_S seconds is stalled (a socket timeout
#: alone never fires for a server that sends one byte a minute).
STALL_S = 120.0
STALL_MIN_BYTES = 1024
#: A stalled or cut transfer is resumed this many times before the file fails.
RETRIES = 2
RETRY_WAIT_S = 2.0
#: Listings and JSON answers are small; anything larger is not what we asked for.
MAX_LISTING_BYTES = 64 << 20
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


class Interrupted(DownloadError):
    """A transfer that stalled or lost its connection part-way; the ``.part`` file keeps what arrived."""


class Client:
    """Opens URLs with our User-Agent and timeout, optionally with HTTP basic auth for one URL prefix.

    The password lives only inside urllib's password manager (never on this object, on disk or in a message).

    Args:
        progress: Show a progress bar per file.
        auth: ``(url_prefix, user, password)``; credentials are sent only below that prefix.
        stall_s: A transfer with under ``STALL_MIN_BYTES`` in this many seconds is stalled (also the socket timeout).
        retries: Resumptions of a stalled or cut transfer before the file fails.
        retry_wait_s: Pause before the first retry (doubled each time).
        force: Fetch every file afresh, ignoring what is on disk and in the checksum log.
    """

    def __init__(self, *, progress: bool = True, auth: tuple[str, str, str] | None = None, stall_s: float = STALL_S,
                 retries: int = RETRIES, retry_wait_s: float = RETRY_WAIT_S, force: bool = False) -> None:
        if not stall_s > 0 or retries < 0:
            raise DownloadError(f"stall timeout must be positive and retries >= 0 (got {stall_s}, {retries})")
        self.progress = progress
        self.stall_s = float(stall_s)
        self.retries = int(retries)
        self.retry_wait_s = float(retry_wait_s)
        self.force = force
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
            return self._opener.open(request, timeout=min(TIMEOUT_S, self.stall_s))  # type: ignore[no-any-return]
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise Interrupted(f"{url}: no answer within {self.stall_s:g} s") from None
            raise DownloadError(f"could not reach {url}: {reason}") from None

    def get_text(self, url: str, *, missing_ok: bool = False, head: int | None = None) -> str | None:
        """Read a small text resource (a listing; ``head``: only its first bytes); ``missing_ok``: a 404 gives None."""
        try:
            with self.open(url, {"Accept": "application/json, text/html, text/plain, */*"}) as resp:
                body = resp.read(head or MAX_LISTING_BYTES + 1)
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
            return json.loads(text)
        except ValueError:
            raise DownloadError(f"{url} did not answer with JSON; is the API address right?") from None

    def fetch(self, item: RemoteFile, folder: Path, log: ChecksumLog) -> bool:
        """Make ``folder/item.dest`` a verified copy of ``item`` (False: it was there); resumes ``retries`` times."""
        dest = folder / item.dest
        part = dest.with_name(dest.name + ".part")
        if self.force:
            dest.unlink(missing_ok=True)
            part.unlink(missing_ok=True)
            log.forget(item.dest)
        if dest.is_file():
            if already_complete(dest, item, log):
                return False
            dest.unlink()  # a final file that fails its check is stale; fetch it afresh
        dest.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(self.retries + 1):
            try:
                have = part.stat().st_size if part.is_file() else 0
                if item.size is not None and have > item.size:
                    part.unlink()
                    have = 0
                if item.size is not None and have == item.size:
                    expected: int | None = item.size
                else:  # no size from publisher or server: ask whether anything follows
                    expected = self._stream(item, part, have)
                    expected = self._confirm_length(item, part) if expected is None else expected
                break
            except Interrupted as exc:
                if attempt == self.retries:
                    tries = f" (tried {attempt + 1} times)" if attempt else ""
                    raise Interrupted(f"{exc}{tries}; run again to resume") from None
                wait = self.retry_wait_s * 2**attempt
                logger.warning("%s; retrying in %g s", exc, wait)
                time.sleep(wait)
        finish_download(item, part, dest, expected, log)
        return True

    def _confirm_length(self, item: RemoteFile, part: Path) -> int | None:
        """For a body of unknown length, ask what follows: 416 ends it, 206 resumes, 200 gives the size."""
        have = part.stat().st_size if part.is_file() else 0
        try:
            resp = self.open(item.url, {"Range": f"bytes={have}-"})
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 416:
                return have
            return None  # the server cannot say; the received bytes are all there is to go on
        with resp:
            match, length = _ranges(resp)
            if resp.status == 206 and match and int(match.group(1)) == have:
                total = None if match.group(3) == "*" else int(match.group(3))
                if total == have or length == 0:
                    return have
        if resp.status == 206:
            logger.info("%s: more bytes follow a body of unknown length; resuming", item.dest)
            return self._stream(item, part, have)
        return length if resp.status == 200 else None

    def _stream(self, item: RemoteFile, part: Path, have: int) -> int | None:
        """Download into ``part`` (appending when the server honours the Range); return the total size."""
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            resp = self.open(item.url, headers)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # our partial file does not fit the server's any more
                exc.close()
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
            self._write_body(resp, part, offset, item.size if total is None else total, item.dest)
        got = part.stat().st_size
        if total is not None and got < total:  # the server closed early without an error
            raise Interrupted(f"{part.with_suffix('')}: connection closed after {got} of {total} bytes")
        return item.size if item.size is not None else total

    def _write_body(
        self, resp: http.client.HTTPResponse, part: Path, offset: int, total: int | None, desc: str
    ) -> None:
        """Write the body into ``part`` from ``offset``; a stall or a cut flushes it and raises :class:`Interrupted`."""
        bar = tqdm(total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=desc,
                   leave=False, disable=not self.progress)
        of, where = (f" of {total}" if total is not None else ""), part.with_suffix("")
        with part.open("ab" if offset else "wb") as out, bar:
            window_start, window_bytes = time.monotonic(), 0
            try:
                while block := resp.read1(CHUNK_BYTES):  # read1 keeps what arrived before a cut
                    out.write(block)
                    bar.update(len(block))
                    window_bytes += len(block)
                    now = time.monotonic()
                    if now - window_start >= self.stall_s:
                        if window_bytes < STALL_MIN_BYTES:
                            out.flush()
                            raise Interrupted(f"{where}: stalled at {part.stat().st_size}{of} bytes "
                                              f"({window_bytes} bytes in {now - window_start:.0f} s)")
                        window_start, window_bytes = now, 0
            except (OSError, http.client.HTTPException) as exc:
                if isinstance(exc, http.client.IncompleteRead):
                    out.write(exc.partial)
                out.flush()
                what = f"no data for {self.stall_s:g} s" if isinstance(exc, TimeoutError) else type(exc).__name__
                raise Interrupted(f"{where}: connection lost after {part.stat().st_size}{of} bytes ({what})") from None


def _ranges(resp: http.client.HTTPResponse) -> tuple[re.Match[str] | None, int | None]:
    """The answer's parsed ``Content-Range`` and its ``Content-Length`` (None where absent or malformed)."""
    length = resp.headers.get("Content-Length")
    match = _CONTENT_RANGE.fullmatch((resp.headers.get("Content-Range") or "").strip())
    return match, int(length) if length and length.isdigit() else None


def _resume_offset(resp: http.client.HTTPResponse, have: int) -> tuple[int, int | None] | None:
    """Where the body starts in the file and the file's total size; None for a 206 that does not fit."""
    match, length = _ranges(resp)
    if resp.status != 206:
        return 0, length
    if not (have and match and int(match.group(1)) == have):
        return None
    if match.group(3) != "*":
        return have, int(match.group(3))
    return have, have + length if length is not None else None


def http_error(url: str, exc: urllib.error.HTTPError) -> DownloadError:
    """A one-line message for an HTTP error status, with a hint for access problems."""
    exc.close()
    hint = ""
    if exc.code in (401, 403):
        hint = "; access refused: check the user name, password and that you may access this data"
    elif exc.code == 404:
        hint = "; the file is not there (a moved source? set a mirror to override)"
    return DownloadError(f"{url}: HTTP {exc.code} {exc.reason}{hint}")
