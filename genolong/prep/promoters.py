"""Promoter positives as :class:`PromoterRecord`: windows around the TSSs of a BED list
(:func:`cut_tss_windows`), the DeePromoter text format (:func:`read_sequence_lines`) or FASTA.

Window offsets count bases along the transcript, the TSS at offset 0 (as the EPDnew select tool,
whose "-249 to 50" gives 300 bp); a :class:`TssWindow` is half-open: ``TssWindow(-249, 51)`` is the
300-bp DeePromoter window, ``TssWindow(-5000, 3000)`` BigBird's (App. F.2, "8000 bp (-5000 ...
+3000)", as GENA-LM cuts). Minus-strand windows are reverse-complemented: the TSS is column
``-window.start``. EPDnew BED lines span -49..+10 around the TSS, its 1-bp thick interval (columns 7-8).
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from genolong.core.errors import ConfigError, InputError, UserError
from genolong.datasets.promoter import PromoterRecord
from genolong.dna.sequence import InvalidSequenceError, clean, open_text_or_gzip, read_fasta


@dataclass(frozen=True)
class Tss:
    """A transcription start site: 0-based ``position`` on ``chrom``, ``strand`` '+' or '-'."""

    chrom: str
    position: int
    strand: str
    name: str


@dataclass(frozen=True)
class TssWindow:
    """TSS offsets ``start .. end - 1`` (half-open, along the transcript): ``end - start`` bp, the TSS
    at column ``-start``."""

    start: int
    end: int

    def __post_init__(self):
        if not self.start <= 0 < self.end:
            raise ConfigError(f"window {self.start}:{self.end} must contain the TSS (need start <= 0 < end)")

    @property
    def length(self) -> int:
        return self.end - self.start

    @classmethod
    def parse(cls, text: str) -> TssWindow:
        """A preset name (``deepromoter``, ``bigbird``) or ``START:END`` (half-open offsets)."""
        if text in WINDOW_PRESETS:
            return WINDOW_PRESETS[text]
        match = re.fullmatch(r"\s*(-?\d+)\s*:\s*(-?\d+)\s*", text)
        if match is None:
            raise ConfigError(f"window {text!r} is neither a preset ({', '.join(WINDOW_PRESETS)}) "
                              "nor START:END, e.g. -249:51")
        return cls(int(match[1]), int(match[2]))

    def genomic_interval(self, tss: int, strand: str) -> tuple[int, int]:
        """The forward-strand half-open interval ``[lo, hi)`` the window covers: offset ``o`` is position
        ``tss + o`` on the plus strand, ``tss - o`` on the minus strand (read backwards)."""
        if strand == "+":
            return tss + self.start, tss + self.end
        return tss - self.end + 1, tss - self.start + 1


#: Named windows: DeePromoter (Oubounyt et al. 2019) and BigBird's long window (App. F.2).
WINDOW_PRESETS = {"deepromoter": TssWindow(-249, 51), "bigbird": TssWindow(-5000, 3000)}


def read_tss_bed(path: str | Path) -> list[Tss]:
    """Read TSSs from a BED file (plain or gzip) with a strand column (6 or more columns): ``thickStart``
    of a 1-bp thick interval (EPDnew), else ``start`` of a 1-bp interval; anything else is an
    :class:`InputError` naming the line, as is a file without TSSs."""
    path = Path(path)
    with open_text(path) as handle:
        sites = [_parse_tss_line(path, number, line.split()) for number, line in enumerate(handle, start=1)
                 if line.strip() and not line.startswith(("#", "track", "browser"))]
    if not sites:
        raise InputError(path, "no TSS lines found (expected BED with a strand column)")
    return sites


def _parse_tss_line(path: Path, line_number: int, fields: list[str]) -> Tss:
    def fail(message: str) -> InputError:
        return InputError(path, message, line=line_number)

    if len(fields) < 6:
        raise fail(f"{len(fields)} columns; a TSS BED needs at least 6 (chrom start end name score strand)")
    chrom, name, strand = fields[0], fields[3], fields[5]
    if strand not in ("+", "-"):
        raise fail(f"strand is {strand!r}; expected '+' or '-'")
    try:
        start, end = int(fields[1]), int(fields[2])
        thick = (int(fields[6]), int(fields[7])) if len(fields) >= 8 else None
    except ValueError:
        raise fail("start, end, thickStart and thickEnd must be integers") from None
    if not 0 <= start < end:
        raise fail(f"interval {start}-{end} is empty or negative")
    if thick is not None and thick[1] - thick[0] == 1:
        if not start <= thick[0] < end:
            raise fail(f"thickStart {thick[0]} lies outside the interval {start}-{end}")
        return Tss(chrom, thick[0], strand, name)
    if end - start == 1:
        return Tss(chrom, start, strand, name)
    raise fail(f"cannot tell where the TSS is: the interval {start}-{end} is {end - start} bp and there is "
               "no 1-bp thickStart/thickEnd; give the TSS as a 1-bp interval")


def n_fraction(sequence: str) -> float:
    return sequence.count("N") / len(sequence)


def cut_tss_windows(genome, sites: list[Tss], window: TssWindow, *,
                    max_n_fraction: float = 0.0) -> tuple[list[PromoterRecord], Counter]:
    """Cut one positive window per TSS from a :class:`genolong.dna.genome.Genome`, reverse-complemented on
    the minus strand; returns the records (in input order, on the genome's names) and the skip counts
    ``unknown_chromosome``, ``off_chromosome_end``, ``too_many_n`` (more than ``max_n_fraction``)."""
    lengths = genome.chromosomes
    records, skipped = [], Counter()
    for site in sites:
        chrom = resolve_chrom(genome, site.chrom)
        if chrom is None:
            skipped["unknown_chromosome"] += 1
            continue
        lo, hi = window.genomic_interval(site.position, site.strand)
        if lo < 0 or hi > lengths[chrom]:
            skipped["off_chromosome_end"] += 1
            continue
        sequence = genome.fetch(chrom, lo, hi, site.strand)
        if n_fraction(sequence) > max_n_fraction:
            skipped["too_many_n"] += 1
            continue
        record_id = f"{site.name}|{chrom}:{site.position}{site.strand}"
        records.append(PromoterRecord(record_id, sequence, 1, chrom, lo, hi, site.strand))
    return records, skipped


def resolve_chrom(genome, chrom: str) -> str | None:
    """The genome's name for ``chrom`` (aliases such as ``1``/``chr1`` resolved), or ``None``."""
    try:
        return genome.resolve(chrom)
    except UserError:
        return None


def read_sequence_lines(path: str | Path, label: int) -> list[PromoterRecord]:
    """Read the DeePromoter text format (plain or gzip): one sequence per line, all of one length,
    named ``<file stem>:<line number>``; an :class:`InputError` names a line with invalid characters
    or another length, or an empty file."""
    path = Path(path)
    records, length = [], None
    with open_text(path) as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                sequence = clean(line.strip())
            except InvalidSequenceError as err:
                raise InputError(path, err.message, line=line_number) from None
            if length is None:
                length = len(sequence)
            elif len(sequence) != length:
                raise InputError(path, f"sequence is {len(sequence)} bp but the first is {length} bp; "
                                 "the one-sequence-per-line format needs one length", line=line_number)
            records.append(PromoterRecord(f"{path.stem}:{line_number}", sequence, label))
    if not records:
        raise InputError(path, "no sequences found")
    return records


def read_fasta_records(path: str | Path, label: int) -> list[PromoterRecord]:
    """Read every FASTA record (plain or gzip) as one example named ``<file stem>:<record number>``
    (1-based; FASTA names repeat in real data sets); an :class:`InputError` for no records, a record
    without sequence, or invalid characters."""
    return [PromoterRecord(f"{Path(path).stem}:{number}", record.sequence, label)
            for number, record in enumerate(read_fasta(path, unique_names=False), start=1)]


def open_text(path: Path) -> io.TextIOWrapper:
    """Open a plain or gzip text file; a missing file is a one-line :class:`UserError`."""
    return io.TextIOWrapper(open_text_or_gzip(path), encoding="utf-8", errors="replace")

