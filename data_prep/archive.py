"""Safe unpacking of tar archives (the DeepSEA training bundle).

A tar member can name any path, including ``/etc/passwd`` or ``../../.bashrc``, and can
be a symlink or hardlink that points outside the destination, through which a later
member writes. :func:`safe_extract` refuses the whole archive at the first such member:
absolute paths, ``..`` escapes, links whose target resolves outside the destination,
device files and FIFOs. Where the running Python has tarfile's ``data`` filter (3.12,
and the 3.10.12 / 3.11.4 security releases), it is applied as well, which also drops
set-uid bits and rejects anything the checks here might miss.

Extraction goes into a temporary directory renamed into place at the end, so a refused
or interrupted extraction leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
import tarfile
from pathlib import Path, PurePosixPath

from tqdm.auto import tqdm

from genolong.errors import InputError
from genolong.files import atomic_path

log = logging.getLogger(__name__)


class UnsafeArchiveError(InputError):
    """An archive member would land outside the destination, or is a device file."""


def check_member(member: tarfile.TarInfo, root: Path, archive: Path) -> None:
    """Raise :class:`UnsafeArchiveError` unless ``member`` stays inside ``root`` once extracted.

    ``root`` must be a resolved path. Symlinks already extracted under ``root`` are
    followed, so a chain of individually harmless links cannot escape either.
    """
    name = PurePosixPath(member.name)
    if name.is_absolute():
        raise UnsafeArchiveError(
            archive, f"member {member.name!r} has an absolute path; refusing the archive"
        )
    if ".." in name.parts:
        raise UnsafeArchiveError(
            archive, f"member {member.name!r} climbs out with '..'; refusing the archive"
        )
    target = root.joinpath(*name.parts)
    if not _inside(target.parent.resolve() / target.name, root):
        raise UnsafeArchiveError(
            archive,
            f"member {member.name!r} lands outside the destination through a symlink; refusing the archive",
        )
    if member.issym() or member.islnk():
        link = PurePosixPath(member.linkname)
        base = target.parent.resolve() if member.issym() else root  # hardlink targets are archive paths
        if link.is_absolute() or not _inside((base / Path(*link.parts)).resolve(), root):
            kind = "symlink" if member.issym() else "hardlink"
            raise UnsafeArchiveError(
                archive,
                f"{kind} {member.name!r} -> {member.linkname!r} points outside the destination; refusing the archive",
            )
    elif not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(
            archive, f"member {member.name!r} is a device file or FIFO; refusing the archive"
        )


def safe_extract(
    archive: str | os.PathLike, dest: str | os.PathLike, *, progress: bool = True
) -> dict[str, int]:
    """Extract the tar ``archive`` (any compression tarfile reads) into the directory ``dest``.

    Members are checked one by one as the archive streams past (:func:`check_member`);
    ``dest`` appears only when every member is extracted.

    Returns:
        Relative path -> size in bytes of every regular file extracted.

    Raises:
        UnsafeArchiveError: a member escapes ``dest`` or is a device file.
        InputError: the file is not a readable tar archive.
    """
    archive = Path(archive)
    files: dict[str, int] = {}
    try:
        with (
            open(archive, "rb") as raw,
            tarfile.open(fileobj=raw, mode="r:*") as tar,
            atomic_path(dest, directory=True) as tmp,
            tqdm(
                total=archive.stat().st_size,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=f"unpacking {archive.name}",
                disable=None if progress else True,
            ) as bar,
        ):
            root = tmp.resolve()
            for member in tar:
                check_member(member, root, archive)
                _extract(tar, member, root)
                if member.isfile():
                    files[str(PurePosixPath(member.name))] = member.size
                bar.update(raw.tell() - bar.n)
    except _FILTER_ERRORS as err:
        raise UnsafeArchiveError(archive, f"{err}; refusing the archive") from None
    except (tarfile.TarError, EOFError, OSError) as err:
        raise InputError(archive, f"cannot unpack: {err}") from None
    log.info("unpacked %d files from %s into %s", len(files), archive.name, dest)
    return files


# tarfile's extraction filters (Python 3.12, 3.11.4, 3.10.12) and the error they raise.
_FILTER_ERRORS = (tarfile.FilterError,) if hasattr(tarfile, "FilterError") else ()


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, root: Path) -> None:
    if hasattr(tarfile, "data_filter"):
        tar.extract(member, root, filter="data")
    else:  # no extraction filters in this Python: check_member is the protection
        tar.extract(member, root)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
