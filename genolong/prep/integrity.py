"""Is a download what it claims to be, and safe to unpack?

Checksums: SHA-256 for our records, and the providers' files (UCSC ``md5sum.txt``, Ensembl
``CHECKSUMS``: ``sum`` output), all hashers with the ``hashlib`` interface, fed in one pass.
Archives: :func:`safe_extract` refuses the whole archive at the first member that is absolute, climbs
out with ``..``, links outside the destination (a later member could write through it) or is a device
file or FIFO (tarfile's ``data`` filter too where Python has it), leaving nothing behind.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from tqdm.auto import tqdm

from genolong.core.errors import InputError, UserError
from genolong.core.files import atomic_path

log = logging.getLogger(__name__)

#: Bytes per read of a file or a network stream.
CHUNK_SIZE = 1 << 20
#: Algorithms understood by :func:`new_hasher`.
ALGORITHMS = ("sha256", "md5", "bsd-sum")

# rotate-right-by-one of the low 16 bits of every value a BSD-sum state can take before
# masking (at most 0xFFFF + 0xFF), so that the inner loop is one lookup and one addition.
_ROTATE_RIGHT = [((x & 0xFFFF) >> 1) | ((x & 1) << 15) for x in range(0x10000 + 0x100)]


class BsdSum:
    """The BSD ``sum`` checksum (GNU ``sum -r``, the default of ``sum`` on Linux): per byte, rotate the
    16-bit checksum right by one bit and add the byte. ``hexdigest()`` is ``"<checksum> <blocks>"``
    (1024-byte blocks, rounded up), the two numbers ``sum`` prints."""

    name = "bsd-sum"

    def __init__(self) -> None:
        self._state = 0  # unmasked: the low 16 bits are the checksum
        self.size = 0

    def update(self, data: bytes) -> None:
        state, table = self._state, _ROTATE_RIGHT
        for byte in data:
            state = table[state] + byte
        self._state = state
        self.size += len(data)

    def hexdigest(self) -> str:
        return f"{self._state & 0xFFFF} {-(-self.size // 1024)}"


def new_hasher(algorithm: str):
    """A fresh hasher for ``algorithm`` (one of :data:`ALGORITHMS`)."""
    if algorithm == "bsd-sum":
        return BsdSum()
    if algorithm in ("sha256", "md5"):
        return hashlib.new(algorithm)
    raise ValueError(f"unknown checksum algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")


def file_digests(path: str | os.PathLike, algorithms: Iterable[str]) -> dict[str, str]:
    """Digest the whole file at ``path`` with every algorithm in one read."""
    hashers = _hash_file(path, {name: new_hasher(name) for name in algorithms})
    return {name: hasher.hexdigest() for name, hasher in hashers.items()}


def _hash_file(path: str | os.PathLike, hashers: dict) -> dict:
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            for hasher in hashers.values():
                hasher.update(chunk)
    return hashers


@dataclass(frozen=True)
class Checksum:
    """An expected digest (lowercase hex, or ``"<checksum> <blocks>"`` for ``bsd-sum``) and its
    ``origin`` (a URL, a file, ``--sha256``) for messages."""

    algorithm: str
    value: str
    origin: str

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown checksum algorithm {self.algorithm!r}")
        pattern = {"sha256": r"[0-9a-f]{64}", "md5": r"[0-9a-f]{32}", "bsd-sum": r"\d+ \d+"}[self.algorithm]
        if not re.fullmatch(pattern, self.value):
            raise UserError(f"malformed {self.algorithm} value {self.value!r} from {self.origin}")


def satisfied(digests: dict[str, str], expected: Iterable[Checksum]) -> bool:
    """True if ``digests`` (algorithm -> value) agree with every checksum in ``expected``."""
    return all(digests.get(check.algorithm) == check.value for check in expected)


def sha256_checksum(value: str, origin: str = "--sha256") -> Checksum:
    """A user-given SHA-256 (case-insensitive hex), checked for shape."""
    return Checksum("sha256", value.strip().lower(), origin)


def parse_md5sum(text: str, filename: str, origin: str) -> Checksum | None:
    """The MD5 of ``filename`` in ``md5sum`` output (UCSC ``md5sum.txt``), or None if unlisted."""
    for line in text.splitlines():
        match = re.fullmatch(r"([0-9a-fA-F]{32}) [ *](?:\./)?(.+?)\s*", line)
        if match and match.group(2) == filename:
            return Checksum("md5", match.group(1).lower(), origin)
    return None


def parse_sum_checksums(text: str, filename: str, origin: str) -> Checksum | None:
    """The BSD ``sum`` of ``filename`` in Ensembl ``CHECKSUMS``, or None if unlisted."""
    for line in text.splitlines():
        match = re.fullmatch(r"\s*(\d+)\s+(\d+)\s+(?:\./)?(.+?)\s*", line)
        if match and match.group(3) == filename:
            return Checksum("bsd-sum", f"{int(match.group(1))} {int(match.group(2))}", origin)
    return None


#: Parsers of the providers' checksum-file formats, by format name.
CHECKSUM_FILE_PARSERS = {"md5sum": parse_md5sum, "sum": parse_sum_checksums}


class PartFile:
    """The ``.part`` file opened for appending, and the digests of its bytes, in step; ``.part.validator``
    keeps the first response's ``ETag`` (or ``Last-Modified``), sent as ``If-Range`` on resuming (a
    server whose file changed then sends the whole new file)."""

    def __init__(self, path: Path, algorithms: set[str]):
        self.path = path
        self._validator_path = path.with_name(path.name + ".validator")
        self.algorithms = sorted(algorithms)
        self.handle: BinaryIO = open(path, "ab")  # noqa: SIM115 (closed by close/commit/discard)
        self.size = self.handle.tell()
        self.received = 0  # bytes appended by this process
        self._hashers = {name: new_hasher(name) for name in self.algorithms}
        if self.size:
            log.info("%s: resuming after %d bytes", path.name, self.size)
            _hash_file(path, self._hashers)

    def append(self, chunk: bytes) -> None:
        self.handle.write(chunk)
        for hasher in self._hashers.values():
            hasher.update(chunk)
        self.size += len(chunk)
        self.received += len(chunk)

    def restart(self) -> None:
        """Drop every byte: the source will be read again from its start."""
        self.handle.seek(0)
        self.handle.truncate()
        self.size = 0
        self._hashers = {name: new_hasher(name) for name in self.algorithms}

    @property
    def validator(self) -> str | None:
        """The validator of the resource the bytes came from, if the server gave one."""
        try:
            return self._validator_path.read_text() or None
        except FileNotFoundError:
            return None

    @validator.setter
    def validator(self, value: str | None) -> None:
        if value:
            self._validator_path.write_text(value)
        else:
            self._validator_path.unlink(missing_ok=True)

    def digests(self) -> dict[str, str]:
        return {name: hasher.hexdigest() for name, hasher in self._hashers.items()}

    def commit(self, dest: Path) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.path, dest)
        self.validator = None

    def discard(self) -> None:
        self.handle.close()
        self.path.unlink(missing_ok=True)
        self.validator = None

    def close(self) -> None:
        """Close the file; an empty one (nothing received) is removed."""
        if not self.handle.closed:
            self.handle.close()
            if self.size == 0:
                self.path.unlink(missing_ok=True)
                self.validator = None


class UnsafeArchiveError(InputError):
    """An archive member would land outside the destination, or is a device file."""


def check_member(member: tarfile.TarInfo, root: Path, archive: Path) -> None:
    """Raise :class:`UnsafeArchiveError` unless ``member`` stays inside ``root`` (resolved) once
    extracted; links already extracted are followed, so a chain of harmless links cannot escape."""
    def refuse(why: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(archive, f"{why}; refusing the archive")

    name = PurePosixPath(member.name)
    if name.is_absolute():
        raise refuse(f"member {member.name!r} has an absolute path")
    if ".." in name.parts:
        raise refuse(f"member {member.name!r} climbs out with '..'")
    target = root.joinpath(*name.parts)
    if not _inside(target.parent.resolve() / target.name, root):
        raise refuse(f"member {member.name!r} lands outside the destination through a symlink")
    if member.issym() or member.islnk():
        link = PurePosixPath(member.linkname)
        base = target.parent.resolve() if member.issym() else root  # hardlink targets are archive paths
        if link.is_absolute() or not _inside((base / Path(*link.parts)).resolve(), root):
            kind = "symlink" if member.issym() else "hardlink"
            raise refuse(f"{kind} {member.name!r} -> {member.linkname!r} points outside the destination")
    elif not (member.isfile() or member.isdir()):
        raise refuse(f"member {member.name!r} is a device file or FIFO")


def safe_extract(archive: str | os.PathLike, dest: str | os.PathLike, *,
                 progress: bool = True) -> dict[str, int]:
    """Extract the tar ``archive`` (any compression) into the directory ``dest``, checking each member
    as it streams past (:func:`check_member`: else :class:`UnsafeArchiveError`); returns relative path
    -> size of every regular file. An InputError for a file that is not a readable tar archive."""
    archive = Path(archive)
    files: dict[str, int] = {}
    try:
        with (
            open(archive, "rb") as raw,
            tarfile.open(fileobj=raw, mode="r:*") as tar,
            atomic_path(dest, directory=True) as tmp,
            tqdm(total=archive.stat().st_size, unit="B", unit_scale=True, unit_divisor=1024,
                 desc=f"unpacking {archive.name}", disable=None if progress else True) as bar,
        ):
            root = tmp.resolve()
            for member in tar:
                check_member(member, root, archive)
                tar.extract(member, root, **_DATA_FILTER)
                if member.isfile():
                    files[str(PurePosixPath(member.name))] = member.size
                bar.update(raw.tell() - bar.n)
    except _FILTER_ERRORS as err:
        raise UnsafeArchiveError(archive, f"{err}; refusing the archive") from None
    except (tarfile.TarError, EOFError, OSError) as err:
        raise InputError(archive, f"cannot unpack: {err}") from None
    log.info("unpacked %d files from %s into %s", len(files), archive.name, dest)
    return files


# tarfile's extraction filters (Python 3.12, 3.11.4, 3.10.12) and their error; else check_member protects.
_FILTER_ERRORS = (tarfile.FilterError,) if hasattr(tarfile, "FilterError") else ()
_DATA_FILTER = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
