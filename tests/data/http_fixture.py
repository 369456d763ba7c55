"""A local 127.0.0.1 HTTP server for downloader tests (Range, cuts, HTML, basic auth) and archive builders."""

from __future__ import annotations

import base64
import io
import re
import socket
import tarfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType


@dataclass
class Seen:
    """One request the server received."""

    path: str
    range: str | None
    authorization: str | None


@dataclass
class FixtureServer:
    """Serves ``files`` (path -> bytes) with knobs that misbehave on purpose."""

    files: dict[str, bytes] = field(default_factory=dict)
    content_types: dict[str, str] = field(default_factory=dict)
    #: Paths whose next response is cut after this many body bytes (once each).
    cut_once: dict[str, int] = field(default_factory=dict)
    #: Paths whose next response is chunked, without a length, and cut after this many bytes (once each).
    cut_chunked_once: dict[str, int] = field(default_factory=dict)
    #: Paths answered with a full 200 even when a Range is asked for.
    ignore_range: set[str] = field(default_factory=set)
    #: Paths answered with a 206 for the whole file whatever Range was asked for (a broken server).
    wrong_range: set[str] = field(default_factory=set)
    #: Paths answered with an HTML error page (status 200, text/html).
    html: set[str] = field(default_factory=set)
    #: Paths whose body is sent one byte every this many seconds (a stalled server), for ``trickle_for`` s.
    trickle: dict[str, float] = field(default_factory=dict)
    trickle_for: float = 5.0
    #: Paths answered with headers and then silence for ``trickle_for`` s.
    silent: set[str] = field(default_factory=set)
    #: Paths whose next 200 has no Content-Length (ends at close) and is cut after this many bytes (once each).
    cut_unsized_once: dict[str, int] = field(default_factory=dict)
    #: URL prefix -> (user, password) required as HTTP basic auth.
    auth: dict[str, tuple[str, str]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def paths_seen(self) -> list[str]:
        with self._lock:
            return [s.path for s in self.seen]

    def __enter__(self) -> FixtureServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _make_handler(state: FixtureServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - silence the test output
            pass

        def do_GET(self) -> None:
            path = self.path
            with state._lock:
                state.seen.append(Seen(path, self.headers.get("Range"), self.headers.get("Authorization")))
            for prefix, (user, password) in state.auth.items():
                if path.startswith(prefix):
                    token = base64.b64encode(f"{user}:{password}".encode()).decode()
                    if self.headers.get("Authorization") != f"Basic {token}":
                        self._send(401, b"no", "text/plain", {"WWW-Authenticate": 'Basic realm="fixture"'})
                        return
            if path in state.html:
                self._send(200, b"<html><body>Please log in</body></html>", "text/html; charset=utf-8")
                return
            body = state.files.get(path)
            if body is None:
                self._send(404, b"not found", "text/plain")
                return
            ctype = state.content_types.get(path, "application/octet-stream")
            status, start, extra = 200, 0, {}
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
            if match and path not in state.ignore_range:
                start = int(match.group(1))
                if start >= len(body):
                    self._send(416, b"", "text/plain", {"Content-Range": f"bytes */{len(body)}"})
                    return
                status = 206
                if path in state.wrong_range:
                    start = 0
                extra = {"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"}
            payload = body[start:]
            with state._lock:
                cut = state.cut_once.pop(path, None)
                cut_chunked = state.cut_chunked_once.pop(path, None)
                cut_unsized = state.cut_unsized_once.pop(path, None) if status == 200 else None
            if path in state.trickle or path in state.silent:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.flush()
                deadline = time.monotonic() + state.trickle_for
                delay = state.trickle.get(path)
                sent = 0
                try:
                    while time.monotonic() < deadline and sent < len(payload):
                        time.sleep(delay if delay is not None else 0.05)
                        if delay is not None:
                            self.wfile.write(payload[sent : sent + 1])
                            self.wfile.flush()
                            sent += 1
                except OSError:  # the client gave up
                    pass
                self.close_connection = True
                return
            if cut_unsized is not None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.end_headers()
                self.wfile.write(payload[:cut_unsized])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if cut_chunked is not None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n" % cut_chunked + payload[:cut_chunked] + b"\r\n")
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if cut is None:
                self._send(status, payload, ctype, extra)
                return
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload[:cut])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

        def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    return Handler


def zip_bytes(members: dict[str, bytes]) -> bytes:
    """A zip archive in memory with the given member names and contents."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    """A tar archive on disk; members without a body are links or directories as their TarInfo says."""
    with tarfile.open(path, "w") as tf:
        for info, body in members:
            if body is not None:
                info.size = len(body)
            tf.addfile(info, io.BytesIO(body) if body is not None else None)
