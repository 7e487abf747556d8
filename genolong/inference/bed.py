"""BED regions of a genome, checked line by line (``scan --regions``, ``explain --regions``): 0-based,
half-open; ``track``, ``browser``, ``#`` and blank lines skipped; columns after the fourth ignored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from genolong.core.errors import InputError, UserError


class BedRegion(NamedTuple):
    """One BED line: ``chrom`` resolved to the genome's name; ``name`` the fourth column or None."""

    line: int
    chrom: str
    start: int
    end: int
    name: str | None


def read_bed_regions(path: Path, genome) -> Iterator[BedRegion]:
    """The regions of BED file ``path`` on ``genome``; an unreadable file or one without regions, a malformed
    line, an unknown chromosome, an empty region or one outside its chromosome raise :class:`InputError`."""
    lengths = genome.chromosomes
    found = False
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip() or line.startswith(("#", "track", "browser")):
                    continue
                yield _region(path, number, line.rstrip("\r\n").split("\t"), genome, lengths)
                found = True
    except UnicodeDecodeError:
        raise InputError(path, "not a text BED file (undecodable bytes)") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a BED file") from None
    except OSError as err:
        raise InputError(path, f"cannot read: {err.strerror or err}") from None
    if not found:
        raise InputError(path, "no regions")


def _region(path: Path, number: int, fields: list[str], genome, lengths: dict[str, int]) -> BedRegion:
    try:
        chrom, start, end = fields[0], int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        raise InputError(path, "not a BED line (chrom, start, end; tab-separated integers)", line=number) from None
    try:
        name = genome.resolve(chrom)
    except UserError:
        raise InputError(path, f"chromosome {chrom!r} is not in the genome {genome.path}", line=number) from None
    if not 0 <= start < end <= lengths[name]:
        raise InputError(path, f"region {chrom}:{start}-{end} is outside {name} (length {lengths[name]:,}) "
                         "or empty", line=number)
    label = fields[3].strip() if len(fields) > 3 and fields[3].strip() else None
    return BedRegion(number, name, start, end, label)
