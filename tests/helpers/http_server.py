"""A real HTTP server on 127.0.0.1, in a thread, for the download tests.

It serves in-memory files with ``Range`` and ``If-Range`` support (the ETag is the CRC-32
of the content) and can misbehave on purpose: close the
connection after N bytes, ignore ``Range`` (answer 200), or stall without answering.
Every request is logged with the bytes of body it sent.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Served:
    """One request as the server saw it."""

    path: str
    range: str | None
    status: int
    sent: int = 0


@dataclass
class Behaviour:
    """How the server treats one path.

    Attributes:
        cut_after: close the connection after this many body bytes, ``cuts`` times.
        cuts: how many responses are cut.
        ignore_range: answer 200 with the whole file even to a Range request.
        stall: accept the request and never answer (until the server stops).
        pace: seconds to sleep after each 16 KiB of body (keeps a transfer in flight).
        ignore_if_range: serve the range even when ``If-Range`` names another version.
    """

    cut_after: int | None = None
    cuts: int = 1
    ignore_range: bool = False
    stall: bool = False
    pace: float = 0.0
    ignore_if_range: bool = False


@dataclass
class FixtureServer:
    """Serve ``files`` (URL path -> bytes) on an ephemeral port of 127.0.0.1."""

    files: dict[str, bytes] = field(default_factory=dict)
    behaviour: dict[str, Behaviour] = field(default_factory=dict)
    log: list[Served] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{path.lstrip('/')}"

    def requests(self, path: str) -> list[Served]:
        with self._lock:
            return [served for served in self.log if served.path == "/" + path.lstrip("/")]

    def __enter__(self) -> FixtureServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self):
        fixture = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                fixture._serve(self)

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?")[0]
        rule = self.behaviour.get(path.lstrip("/"), Behaviour())
        range_header = handler.headers.get("Range")
        served = Served(path, range_header, 0)
        with self._lock:
            self.log.append(served)
        if rule.stall:
            self._stop.wait(30)
            return
        data = self.files.get(path.lstrip("/"))
        if data is None:
            served.status = 404
            handler.send_error(404, "Not Found")
            return
        start = 0
        etag = f'"{zlib.crc32(data):08x}"'
        match = re.fullmatch(r"bytes=(\d+)-", range_header or "")
        if_range = handler.headers.get("If-Range")
        if match and not rule.ignore_range and (if_range is None or if_range == etag or rule.ignore_if_range):
            start = int(match.group(1))
            if start >= len(data):
                served.status = 416
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            served.status = 206
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            served.status = 200
            handler.send_response(200)
        body = data[start:]
        handler.send_header("ETag", etag)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        limit = len(body)
        with self._lock:
            if rule.cut_after is not None and rule.cuts > 0:
                rule.cuts -= 1
                limit = min(limit, rule.cut_after)
        for offset in range(0, limit, 16384):
            piece = body[offset : min(offset + 16384, limit)]
            handler.wfile.write(piece)
            served.sent += len(piece)
            if rule.pace:
                time.sleep(rule.pace)
        handler.wfile.flush()
        handler.close_connection = True
