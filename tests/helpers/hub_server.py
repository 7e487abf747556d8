"""A fake Hugging Face hub on 127.0.0.1, in a thread: the routes huggingface_hub calls to download
files of a model repository, answered the way the hub answers them.

- ``GET /api/models/ORG/NAME[/revision/REV]``: the commit (``sha``) and the ``siblings`` with
  their ``size``, ``blobId`` and, for LFS files, ``lfs`` (``sha256``, ``size``, ``pointerSize``);
- ``HEAD`` / ``GET /ORG/NAME/resolve/REV/FILE``: the file, with ``X-Repo-Commit``, its ``ETag``
  (the git blob id; for an LFS file the sha256, also as ``X-Linked-Etag`` with ``X-Linked-Size``)
  and ``Content-Length``;
- an unknown repository, revision or file: 404 with the hub's ``X-Error-Code``; a gated
  repository: 403 ``GatedRepo``.

``corrupt`` serves other bytes for a file than the hashes it lists. Every request is logged.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    """One commit of a repository: its files, and which of them are stored in LFS."""

    files: dict[str, bytes]
    lfs: set[str]

    @property
    def sha(self) -> str:
        digest = hashlib.sha1()
        for name in sorted(self.files):
            digest.update(name.encode() + git_blob_id(self.files[name]).encode())
        return digest.hexdigest()

    def sibling(self, name: str) -> dict:
        data = self.files[name]
        entry = {"rfilename": name, "size": len(data), "blobId": git_blob_id(data)}
        if name in self.lfs:
            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return entry


def commit_of(directory: Path, extra: dict[str, bytes] | None = None) -> Commit:
    """The files of ``directory`` (and ``extra``) as a commit; weights are LFS files, as on the hub."""
    files = {path.name: path.read_bytes() for path in sorted(directory.iterdir())} | (extra or {})
    return Commit(files, {name for name in files if name.endswith((".safetensors", ".bin"))})


@dataclass
class FakeHub:
    """Serve ``repos`` (``ORG/NAME`` -> branch or tag -> commit) on an ephemeral port of 127.0.0.1."""

    repos: dict[str, dict[str, Commit]] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)
    corrupted: dict[str, bytes] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def corrupt(self, name: str) -> None:
        """Serve ``name`` with one byte changed (same size), still listing the true hashes."""
        for commits in self.repos.values():
            for commit in commits.values():
                if name in commit.files:
                    data = bytearray(commit.files[name])
                    data[len(data) // 2] ^= 0xFF
                    self.corrupted[name] = bytes(data)

    def requested(self, name: str, method: str | None = None) -> list[tuple[str, str]]:
        """The logged requests for the file ``name`` (any repository and revision)."""
        return [(m, path) for m, path in self.log if "/resolve/" in path and path.endswith("/" + name)
                and method in (None, m)]

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                hub._answer(self, body=True)

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

        return Handler

    def _commit(self, repo: str, revision: str) -> Commit | None:
        commits = self.repos[repo]
        return commits.get(revision) or next((c for c in commits.values() if c.sha == revision), None)

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = urlsplit(handler.path).path
        self.log.append((handler.command, path))
        parts = [unquote(part) for part in path.strip("/").split("/")]
        api = parts[:2] == ["api", "models"]
        repo = "/".join(parts[2:4] if api else parts[:2])
        if repo not in self.repos:
            return self._error(handler, 404, "RepoNotFound")
        if repo in self.gated:
            return self._error(handler, 403, "GatedRepo")
        if api:
            revision = parts[5] if parts[4:5] == ["revision"] else "main"
        elif parts[2:3] == ["resolve"]:
            revision = parts[3]
        else:
            return self._error(handler, 404, "EntryNotFound")
        commit = self._commit(repo, revision)
        if commit is None:
            return self._error(handler, 404, "RevisionNotFound")
        if api:
            info = {"id": repo, "sha": commit.sha, "siblings": [commit.sibling(name) for name in sorted(commit.files)]}
            return self._send(handler, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)
        name = "/".join(parts[4:])
        if name not in commit.files:
            return self._error(handler, 404, "EntryNotFound", {"X-Repo-Commit": commit.sha})
        sibling = commit.sibling(name)
        headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{sibling["blobId"]}"'}
        if "lfs" in sibling:
            sha256 = sibling["lfs"]["sha256"]
            headers |= {"ETag": f'"{sha256}"', "X-Linked-Etag": f'"{sha256}"', "X-Linked-Size": str(sibling["size"])}
        self._send(handler, self.corrupted.get(name, commit.files[name]), headers, body)

    @staticmethod
    def _send(handler, data: bytes, headers: dict[str, str], body: bool) -> None:
        handler.send_response(200)
        for key, value in (headers | {"Content-Length": str(len(data))}).items():
            handler.send_header(key, value)
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    @staticmethod
    def _error(handler, status: int, code: str, headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        for key, value in ({"X-Error-Code": code, "X-Error-Message": code, "Content-Length": "0"}
                           | (headers or {})).items():
            handler.send_header(key, value)
        handler.end_headers()
