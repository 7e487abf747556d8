"""Genome regions: ``chrom:start-end`` intervals and the FASTA records cropped to them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from genolong.core.errors import InputError, UserError
from genolong.dna.genome import canonical_chrom
from genolong.dna.sequence import FastaRecord, read_fasta


@dataclass(frozen=True)
class Region:
    """A 0-based half-open interval ``chrom:start-end`` (``end=None``: to the chromosome end)."""

    chrom: str
    start: int = 0
    end: int | None = None

    @classmethod
    def parse(cls, text: str) -> Region:
        match = re.fullmatch(r"([^:\s]+)(?::(\d[\d,]*)?-(\d[\d,]*)?)?", text.strip())
        if not match:
            raise UserError(f"bad region {text!r}; expected CHROM or CHROM:START-END (0-based, half-open)")
        chrom, start, end = match.groups()
        region = cls(chrom, int(start.replace(",", "")) if start else 0,
                     int(end.replace(",", "")) if end else None)
        if region.end is not None and region.end <= region.start:
            raise UserError(f"bad region {text!r}: end must be greater than start")
        return region


def iter_regions(path: str | Path, regions: list[Region] | None = None) -> Iterator[FastaRecord]:
    """Stream the records of ``path``, cropped to ``regions`` when given (aliases not applied)."""
    wanted: dict[str, list[Region]] = {}
    for region in regions or []:
        wanted.setdefault(canonical_chrom(region.chrom), []).append(region)
    found = set()
    for record in read_fasta(path):
        if not wanted:
            yield record
            continue
        for region in wanted.get(canonical_chrom(record.name), []):
            found.add(region)
            end = len(record) if region.end is None else region.end
            if end > len(record) or region.start >= len(record):
                raise InputError(path, f"region {region.chrom}:{region.start}-{end} extends past the record's end "
                                 f"({len(record):,} bp)", record=record.name)
            yield FastaRecord(f"{record.name}:{region.start}-{end}", record.sequence[region.start:end])
    missing = [r.chrom for r in regions or [] if r not in found]
    if missing:
        raise UserError(f"{path}: no record named {', '.join(sorted(set(missing)))}")
