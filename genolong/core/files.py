"""Atomic outputs (written under a temporary name, renamed when complete), the work files named
``.NAME.*`` after an output (:func:`work_path`), genolong's directory markers and the cache directory."""

from __future__ import annotations

import contextlib
import csv
import glob
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from genolong import __version__
from genolong.core.errors import UserError

#: The file in every output directory genolong made: ``{"kind": ..., "genolong": version}``.
MARKER = ".genolong-run.json"


def cache_home() -> Path:
    """The cache directory: ``$GENOLONG_HOME`` or ``~/.cache/genolong``; a UserError when neither
    ``GENOLONG_HOME`` nor a home directory is known (``HOME`` unset)."""
    if "GENOLONG_HOME" in os.environ:
        return Path(os.environ["GENOLONG_HOME"]).expanduser()
    try:
        return Path.home() / ".cache" / "genolong"
    except (RuntimeError, KeyError):  # HOME unset and no password-file entry
        raise UserError("no cache directory: HOME is unset; set GENOLONG_HOME to a writable directory") from None


def cache_dir(name: str) -> Path:
    """``cache_home() / name``, created and checked writable; a UserError naming it and ``GENOLONG_HOME``
    when it is unusable (a file, read-only, on a full disk...)."""
    folder = cache_home() / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe_writable(folder)
    except OSError as err:
        raise UserError(f"the cache directory {folder} is unusable ({err.strerror or err})",
                        hint="set GENOLONG_HOME to a writable directory") from None
    return folder


def probe_writable(folder: Path) -> None:
    """Create and remove a hidden file in ``folder``: an OSError when none can be written there (tried, not
    guessed: permissions, read-only mounts and pseudo-file systems all answer)."""
    fd, probe = tempfile.mkstemp(prefix=".genolong-probe.", dir=folder)
    os.close(fd)
    os.unlink(probe)


def work_path(path: str | os.PathLike, kind: str) -> Path:
    """The hidden work file or directory ``.NAME.KIND`` beside the output ``path`` (``kind``:
    ``partial``, ``lock``, ``parts``...; ``""`` gives the prefix ``.NAME.`` of temporary names)."""
    path = Path(path)
    return path.parent / f".{path.name}.{kind}"


def work_files(path: str | os.PathLike) -> set[Path]:
    """Every hidden file and directory named after the output ``path`` beside it (``.NAME.*``)."""
    path = Path(os.path.abspath(path))
    if not (path.name and path.parent.is_dir()):
        return set()
    return set(path.parent.glob(f".{glob.escape(path.name)}.*"))


def directory_kind(path: Path) -> str | None:
    """The kind in ``path``'s marker; None without one (a marker genolong cannot read counts as none)."""
    try:
        return json.loads((path / MARKER).read_text())["kind"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mark_directory(path: Path, kind: str) -> None:
    """Write the marker that makes ``path`` genolong's ``kind`` directory."""
    atomic_write_text(path / MARKER, json.dumps({"kind": kind, "genolong": __version__}) + "\n")


def claim_directory(path: Path, kind: str) -> None:
    """Create ``path`` if needed and mark it as genolong's ``kind`` directory when it is new or empty."""
    path.mkdir(parents=True, exist_ok=True)
    if directory_kind(path) is None and not any(path.iterdir()):
        mark_directory(path, kind)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` (a created directory with ``directory``), renamed to
    ``path`` on success; on an exception it is removed and ``path`` is left untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = work_path(path, "").name
    if directory:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=path.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
    tmp.chmod((0o777 if directory else 0o666) & ~_umask())  # tempfile makes it owner-only: apply the umask
    try:
        yield tmp
        if directory:
            _replace_directory(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _replace_directory(new: Path, path: Path) -> None:
    """Rename ``new`` to ``path``; an existing ``path`` is set aside, then deleted (put back on failure)."""
    if not path.exists():
        new.rename(path)
        return
    old = work_path(path, "old")
    shutil.rmtree(old, ignore_errors=True)
    try:
        path.rename(old)
        new.rename(path)
    except BaseException:
        if old.exists() and not path.exists():
            old.rename(path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


#: The highest csv field limit every platform takes (the limit is a C long, 32 bits on Windows).
CSV_FIELD_MAX = 2**31 - 1


@contextlib.contextmanager
def csv_field_limit(size: int) -> Iterator[None]:
    """While the block runs, let :mod:`csv` read fields of up to ``size`` characters (default: 131,072)."""
    previous = csv.field_size_limit()
    csv.field_size_limit(min(max(size, previous), CSV_FIELD_MAX))
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def sha256_file(path: str | os.PathLike) -> str:
    """The hex SHA-256 of the file at ``path``, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
