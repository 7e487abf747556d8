"""Resumable, verified downloads over HTTP(S) (``urllib``), or copies from a local file.

:func:`download` appends to ``DEST.part``, resumed with ``Range`` and ``If-Range`` (so the rest comes
from the same version of the file; a server answering 200 restarts it), retries transient failures
with exponential backoff, checks the expected checksums and only then renames it to ``DEST``: a
``DEST`` that exists is complete and verified. It does not lock: concurrent callers hold
:func:`file_lock` on ``DEST`` (:meth:`genolong.prep.cache.DataCache.fetch` does).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import http.client
import logging
import os
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tqdm.auto import tqdm

from genolong import __version__
from genolong.core.errors import UserError

from .integrity import CHUNK_SIZE, Checksum, PartFile

log = logging.getLogger(__name__)

USER_AGENT = f"genolong/{__version__} (Python urllib)"
#: Longest wait between two attempts, in seconds.
MAX_BACKOFF = 60.0
#: HTTP statuses worth another try: timeouts, rate limiting, server-side trouble.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
#: OS errors that mean "this machine has no route to the internet": no point in retrying.
_OFFLINE_ERRNOS = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN})
_OFFLINE_HINT = "are you offline? use --url with a mirror or a local file, or --offline to use only the cache"


class DownloadError(UserError):
    """The network or the server failed in a way retrying did not (or cannot) fix."""


class NotFoundError(DownloadError):
    """The server answered 404 or 410 for the URL."""


class ChecksumMismatch(UserError):
    """A finished download does not match an expected checksum; the file was removed."""


class _Transient(Exception):
    """A failure worth retrying: timeout, dropped connection, 5xx."""


class _RangeNotSatisfiable(Exception):
    """HTTP 416 to a resume request: the resource has ``total`` bytes (None if unsaid)."""

    def __init__(self, total: int | None):
        super().__init__(total)
        self.total = total


@dataclass(frozen=True)
class Download:
    """The outcome of :func:`download`: the verified file, its size in bytes, its digests by
    algorithm (always ``sha256``) and the bytes this call ``fetched`` (less than ``size`` after a resume)."""

    path: Path
    size: int
    digests: dict[str, str]
    fetched: int


def partial_path(dest: str | os.PathLike) -> Path:
    """Where the bytes of an unfinished download of ``dest`` live."""
    return Path(dest).with_name(Path(dest).name + ".part")


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``PATH.lock`` (waits, saying so, if another holds it), which
    excludes other processes and other threads alike; the empty lock file stays behind."""
    lock = Path(path).with_name(Path(path).name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another genolong process working on %s", Path(path).name)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def download(url: str, dest: str | os.PathLike, *, expected: Iterable[Checksum] = (), timeout: float = 30.0,
             retries: int = 4, backoff: float = 1.0, progress: bool = True) -> Download:
    """Fetch ``url`` (``http(s)://``, ``file://`` or a local path) to ``dest``, verified, waiting ``timeout``
    seconds for a connection or the next bytes; a transient failure is retried ``retries`` times (counted
    afresh when an attempt brings new bytes) after ``backoff`` seconds, doubled each time (at most 60 s).

    Raises:
        NotFoundError: 404/410, or a missing local file.
        DownloadError: unreachable host, another HTTP error, or retries exhausted (``.part`` kept).
        ChecksumMismatch: the complete file differs from ``expected`` (``.part`` removed).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    expected = list(expected)
    part = PartFile(partial_path(dest), {"sha256", *(check.algorithm for check in expected)})
    try:
        def kept() -> str | None:
            resume = f"{part.size} bytes kept in {part.path.name}: run the same command again to resume"
            return resume if part.size else None

        _retrying(lambda: _attempt(url, part, timeout, progress, dest.name), url=url, retries=retries,
                  backoff=backoff, progress=lambda: part.size, hint=kept)
        digests = part.digests()
        for check in expected:
            if digests[check.algorithm] != check.value:
                part.discard()
                raise ChecksumMismatch(f"{dest.name}: {check.algorithm} mismatch: expected {check.value} "
                                       f"(from {check.origin}), got {digests[check.algorithm]}",
                                       hint="the download was removed; run the command again to fetch it "
                                       "afresh, or check the URL/--sha256")
        part.commit(dest)
    finally:
        part.close()
    return Download(dest, dest.stat().st_size, digests, part.received)


def fetch_bytes(url: str, *, timeout: float = 30.0, retries: int = 4, backoff: float = 1.0) -> bytes:
    """Read a small resource (a checksum file) into memory, retrying transient failures."""

    def attempt() -> bytes:
        response = _open(url, 0, timeout)
        with response.stream:
            try:
                return response.stream.read()
            except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
                raise _Transient(f"connection lost ({_describe(err)})") from None

    return _retrying(attempt, url=url, retries=retries, backoff=backoff)


def _retrying(attempt, *, url: str, retries: int, backoff: float, progress=lambda: 0, hint=lambda: None):
    """Call ``attempt()`` until it returns, retrying :class:`_Transient` failures after ``backoff * 2**k``
    seconds (at most :data:`MAX_BACKOFF`); :class:`DownloadError` after ``retries`` retries in a row
    without progress (an attempt that increased ``progress()``, such as new bytes, resets the count)."""
    failures = 0
    while True:
        before = progress()
        try:
            return attempt()
        except _Transient as err:
            failures = 1 if progress() > before else failures + 1
            if failures > retries:
                raise DownloadError(f"{url}: {err}; gave up after {failures} attempt(s)",
                                    hint=hint()) from None
            delay = min(backoff * 2 ** (failures - 1), MAX_BACKOFF)
            log.warning("%s: %s; retry %d/%d in %.1f s", url, err, failures, retries, delay)
            time.sleep(delay)


@dataclass
class _Response:
    """An open source stream that starts at byte ``start`` of a resource of ``total`` bytes."""

    stream: BinaryIO
    start: int
    total: int | None
    validator: str | None = None


def _attempt(url: str, part: PartFile, timeout: float, progress: bool, label: str) -> None:
    """One request: append what the source sends to ``part``; raise _Transient if cut short."""
    try:
        response = _open(url, part.size, timeout, part.validator)
    except _RangeNotSatisfiable as err:
        if err.total == part.size:  # the part file already holds every byte
            return
        part.restart()
        raise _Transient("the partial file does not fit the resource; restarting") from None
    if part.size and response.start == part.size and part.validator not in (None, response.validator):
        response.stream.close()  # a server that ignored If-Range, serving a changed file
        part.restart()
        raise _Transient("the file changed on the server since the partial download; restarting")
    if response.start != part.size:
        if part.size:
            log.warning("%s: the server ignored the resume request; restarting from the beginning", label)
        part.restart()
    if part.size == 0:
        part.validator = response.validator
    with response.stream, tqdm(total=response.total, initial=part.size, unit="B", unit_scale=True,
                               unit_divisor=1024, desc=label, disable=None if progress else True,
                               dynamic_ncols=True) as bar:
        try:
            while chunk := response.stream.read(CHUNK_SIZE):
                part.append(chunk)
                bar.update(len(chunk))
        except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
            raise _Transient(f"connection lost after {part.size} bytes ({_describe(err)})") from None
    if response.total is not None and part.size != response.total:
        if part.size > response.total:
            part.restart()
            raise _Transient(f"received more bytes than the announced {response.total}")
        raise _Transient(f"connection closed after {part.size} of {response.total} bytes")


def _open(url: str, offset: int, timeout: float, validator: str | None = None) -> _Response:
    """Open ``url`` asking for the bytes from ``offset`` on (conditional on ``validator``, an ETag or a
    Last-Modified date); the response says where it starts."""
    local = local_path(url)
    if local is not None:
        if not local.is_file():
            raise NotFoundError(f"{local}: no such file")
        total = local.stat().st_size
        if offset > total:
            raise _RangeNotSatisfiable(total)
        stream = open(local, "rb")  # noqa: SIM115 (closed by the caller)
        stream.seek(offset)
        return _Response(stream, offset, total)
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    host = urllib.parse.urlsplit(url).hostname or url
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as err:
        err.close()
        if err.code == 416 and offset:
            raise _RangeNotSatisfiable(_content_range(err.headers.get("Content-Range", ""))[2]) from None
        if err.code in (404, 410):
            raise NotFoundError(f"{url}: the server says {err.code} {err.reason}",
                                hint="check the URL, or pass --url with a mirror or a local copy") from None
        if err.code in RETRY_STATUSES:
            raise _Transient(f"the server says {err.code} {err.reason}") from None
        raise DownloadError(f"{url}: the server says {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, socket.gaierror) or getattr(reason, "errno", None) in _OFFLINE_ERRNOS:
            raise DownloadError(f"cannot reach {host} ({_describe(reason)})", hint=_OFFLINE_HINT) from None
        if isinstance(reason, OSError) and not isinstance(reason, ssl.SSLCertVerificationError):
            raise _Transient(f"cannot connect to {host} ({_describe(reason)})") from None
        raise DownloadError(
            f"{url}: {_describe(reason) if isinstance(reason, OSError) else reason}") from None
    except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
        raise _Transient(f"no answer from {host} ({_describe(err)})") from None
    if response.status == 206:
        start, _, total = _content_range(response.headers.get("Content-Range", ""))
        if start is None:
            response.close()
            raise _Transient("the server sent a partial response without a usable Content-Range")
        return _Response(response, start, total, _validator(response.headers))
    length = response.headers.get("Content-Length", "")
    return _Response(response, 0, int(length) if length.isdigit() else None, _validator(response.headers))


def _validator(headers) -> str | None:
    """A strong ETag, else Last-Modified: what If-Range accepts (weak ETags are not allowed)."""
    etag = headers.get("ETag")
    return etag if etag and not etag.startswith("W/") else headers.get("Last-Modified")


def local_path(url: str) -> Path | None:
    """The local file a ``file://`` URL or a plain path names; None for network URLs; a
    :class:`UserError` for an unsupported scheme."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        return Path(urllib.request.url2pathname(parts.path))
    if parts.scheme in ("http", "https", "ftp"):
        return None
    if parts.scheme and len(parts.scheme) > 1:
        raise UserError(
            f"unsupported URL scheme {parts.scheme!r} in {url}; use http(s)://, file:// or a path")
    return Path(url).expanduser()


def _content_range(value: str) -> tuple[int | None, int | None, int | None]:
    """``bytes START-END/TOTAL`` (or ``bytes */TOTAL``) as three ints, None where absent."""
    unit, _, spec = value.strip().partition(" ")
    if unit != "bytes" or "/" not in spec:
        return None, None, None
    span, _, total = spec.partition("/")
    first, _, last = span.partition("-")
    as_int = lambda text: int(text) if text.isdigit() else None  # noqa: E731
    return as_int(first), as_int(last), as_int(total)


def _describe(err: BaseException) -> str:
    if isinstance(err, TimeoutError | socket.timeout):
        return "timed out"
    return getattr(err, "strerror", None) or str(err) or type(err).__name__
