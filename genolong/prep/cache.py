"""The data cache: a directory (default ``$GENOLONG_HOME/data``) with a folder per source and
``manifest.json``, which records each download's URL, size, digests, time and derived files, so
that ``genolong data status`` answers without reading gigabytes and a second ``fetch`` skips work.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text, cache_home, sha256_file

from .integrity import Checksum, file_digests, satisfied
from .transfer import download, file_lock

log = logging.getLogger(__name__)

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
#: A download that failed verification or preparation is kept beside the cache under this suffix.
REJECTED_SUFFIX = ".rejected"


def default_data_root() -> Path:
    """Where ``genolong data fetch`` puts files unless told otherwise: ``$GENOLONG_HOME/data``."""
    return cache_home() / "data"


@dataclass
class Entry:
    """What the manifest knows about one downloaded file: ``path`` relative to the cache root (POSIX);
    ``digests``: always ``sha256``, plus any provider checksum; ``verified``: the checks passed at
    download time (``"md5 from <url>"``; empty when no checksum was known); ``mtime_ns`` notices later
    changes cheaply; ``fetched_at``: UTC ISO 8601; ``products``: derived files and their sizes."""

    path: str
    url: str
    size: int
    digests: dict[str, str]
    verified: list[str]
    mtime_ns: int
    fetched_at: str
    products: dict[str, int] = field(default_factory=dict)


class DataCache:
    """A cache directory (``$GENOLONG_HOME/data`` by default) with its manifest."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root).expanduser() if root is not None else default_data_root()
        if self.root.exists() and not self.root.is_dir():
            raise UserError(f"{self.root}: is a file, not a data cache directory")
        self.manifest_path = self.root / MANIFEST_NAME
        self._warned: set[str] = set()  # unreadable manifests already reported (one warning each)

    def entries(self) -> dict[str, Entry]:
        """Every manifest entry, by relative path."""
        try:
            data = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            if str(err) not in self._warned:
                self._warned.add(str(err))
                log.warning("ignoring unreadable %s (%s); it will be rewritten", self.manifest_path, err)
            return {}
        return {path: Entry(**fields) for path, fields in data.get("files", {}).items()}

    def entry(self, relpath: str) -> Entry | None:
        return self.entries().get(relpath)

    def _set_entry(self, relpath: str, entry: Entry | None) -> None:
        """Set (None: remove) the entry of ``relpath``: a locked read-modify-write, written atomically."""
        with file_lock(self.manifest_path):
            entries = {path: known for path, known in self.entries().items() if path != relpath}
            if entry is not None:
                entries[relpath] = entry
            payload = {"version": MANIFEST_VERSION,
                       "files": {path: asdict(e) for path, e in sorted(entries.items())}}
            atomic_write_text(self.manifest_path, json.dumps(payload, indent=2) + "\n")

    def path(self, relpath: str) -> Path:
        return self.root / relpath

    def set_aside(self, relpath: str) -> Path:
        """Move a cached file that proved unusable to ``<file>.rejected`` (replacing an older one)
        and forget it, so that the next fetch downloads it afresh; returns the new path."""
        rejected = self.path(relpath).with_name(self.path(relpath).name + REJECTED_SUFFIX)
        if self.path(relpath).exists():
            os.replace(self.path(relpath), rejected)
        self._set_entry(relpath, None)
        return rejected

    def cached(self, relpath: str) -> Entry | None:
        """The entry of ``relpath`` if the file on disk is still the one recorded."""
        entry = self.entry(relpath)
        if entry is None:
            return None
        try:
            stat = self.path(relpath).stat()
        except FileNotFoundError:
            return None
        return entry if (stat.st_size, stat.st_mtime_ns) == (entry.size, entry.mtime_ns) else None

    def fetch(self, url: str, relpath: str, *, expected: Iterable[Checksum] = (),
              **download_options) -> Entry:
        """Make ``relpath`` a verified copy of ``url`` (:func:`genolong.prep.transfer.download`) and return
        its manifest entry, locking the file throughout (concurrent fetches download it once). A cached
        file, or one on disk unknown to the manifest, is reused if it satisfies ``expected``."""
        expected = list(expected)
        dest = self.path(relpath)
        with file_lock(dest):
            entry = self.cached(relpath)
            if entry is not None and satisfied(entry.digests, expected):
                if sha256_file(dest) == entry.digests["sha256"]:
                    log.info("%s: already in the cache (sha256 re-checked)", relpath)
                    return entry
                log.warning("%s: the cached file no longer has its recorded sha256; moved to %s, downloading "
                            "it again", relpath, self.set_aside(relpath).name)
            if dest.exists():
                recorded = self.entry(relpath)
                digests = file_digests(dest, {"sha256", *(check.algorithm for check in expected)})
                unchanged = recorded is None or recorded.digests["sha256"] == digests["sha256"]
                if unchanged and satisfied(digests, expected):
                    log.info("%s: found on disk and verified", relpath)
                    return self._record(relpath, recorded.url if recorded else url, digests, expected)
                log.warning("%s: the file on disk does not match; downloading it again", relpath)
            result = download(url, dest, expected=expected, **download_options)
            return self._record(relpath, url, result.digests, expected)

    def _record(self, relpath: str, url: str, digests: dict[str, str], expected: list[Checksum]) -> Entry:
        stat = self.path(relpath).stat()
        entry = Entry(path=relpath, url=url, size=stat.st_size, digests=digests,
                      verified=[f"{check.algorithm} from {check.origin}" for check in expected],
                      mtime_ns=stat.st_mtime_ns,
                      fetched_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self._set_entry(relpath, entry)
        return entry

    def set_products(self, relpath: str, products: dict[str, int]) -> Entry:
        entry = self.entry(relpath)
        if entry is None:
            raise KeyError(f"{relpath} is not in the manifest")
        entry.products = dict(products)
        self._set_entry(relpath, entry)
        return entry

    def products_present(self, entry: Entry) -> bool:
        """True if every product of ``entry`` exists with its recorded size."""
        paths = {self.path(relpath): size for relpath, size in entry.products.items()}
        return bool(paths) and all(path.exists() and path.stat().st_size == size for path, size in paths.items())
