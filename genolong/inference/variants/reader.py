"""Variants in: VCF, bgzipped VCF or BCF (read with cyvcf2, i.e. htslib) or a TSV ``chrom pos ref alt [id]``,
both 1-based. Each ALT allele is its own :class:`Variant`; one that cannot be scored as sequence (symbolic
``<DEL>``, ``*``, breakends, a missing ALT ``.``) is a :class:`SkippedAllele` with the reason. Items come
in file order, one per allele, so "the first n items" is a resumable position in the input.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cyvcf2

from genolong.core.errors import InputError
from genolong.dna.sequence import numbered_lines

_BASES = frozenset("ACGTN")


@dataclass(frozen=True)
class Variant:
    """One allele: ``chrom``, 1-based ``pos``, ``ref`` and ``alt`` (uppercased) from input line ``line``."""

    chrom: str
    pos: int
    id: str
    ref: str
    alt: str
    line: int


@dataclass(frozen=True)
class SkippedAllele:
    """An allele that is not scored, and why."""

    reason: str
    line: int


def skip_reason(alt: str) -> str | None:
    """Why an ALT allele cannot be scored as sequence, or None when it can."""
    if alt in ("", "."):
        return "missing ALT"
    if alt == "*":
        return "spanning deletion (*)"
    if alt.startswith("<"):
        return "symbolic allele"
    if "[" in alt or "]" in alt or alt.startswith(".") or alt.endswith("."):
        return "breakend"
    return None


def _alleles(path, line: int, chrom: str, pos: int, vid: str, ref: str, alts) -> Iterator[Variant | SkippedAllele]:
    """One site's alleles, their bases checked."""
    ref = ref.upper()
    if not ref or not set(ref) <= _BASES:
        raise InputError(path, f"REF {ref!r} is not a DNA sequence (A, C, G, T, N)", line=line)
    if pos < 1:
        raise InputError(path, f"position {pos} is not 1-based", line=line)
    for alt in alts or ["."]:
        reason = skip_reason(alt)
        if reason is not None:
            yield SkippedAllele(reason, line)
            continue
        alt = alt.upper()
        if not set(alt) <= _BASES:
            raise InputError(path, f"ALT {alt!r} is not a DNA sequence, a symbolic allele or a breakend", line=line)
        yield Variant(chrom, pos, vid, ref, alt, line)


class VariantFile:
    """The variants of a VCF/BCF (any compression htslib reads; recognised by content) or else a TSV file;
    ``contigs``: name -> length from the ``##contig`` lines (VCF only)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        head = next(numbered_lines(self.path), (0, b""))[1][:16]
        self.is_vcf = head.startswith((b"##fileformat=VCF", b"BCF\x02"))
        self.contigs: dict[str, int] = {}
        if self.is_vcf:
            # htslib's stderr silenced (cyvcf2 raises: one line is ours); a build without the symbol keeps it
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL(cyvcf2.cyvcf2.__file__).hts_set_log_level(0)
            self.header_lines = _header_lines(self.path) if head.startswith(b"##") else None
            try:
                reader = cyvcf2.VCF(str(self.path), lazy=True)
            except Exception as err:  # cyvcf2 raises a bare Exception for a header htslib cannot parse
                raise InputError(self.path, f"not a readable VCF: {err}") from None
            with contextlib.suppress(AttributeError, ValueError):  # no ##contig lines, or one without length
                self.contigs = dict(zip(reader.seqnames, reader.seqlens, strict=True))

    def __iter__(self) -> Iterator[Variant | SkippedAllele]:
        """The alleles from the start of the file (each iteration reads it again)."""
        return self._read_vcf() if self.is_vcf else self._read_tsv()

    def _read_vcf(self) -> Iterator[Variant | SkippedAllele]:
        """Alleles with their text line number (BCF: record number). Each text line is checked before htslib
        parses it: a bad position or too few columns can crash cyvcf2 when the header declares no contigs."""
        line = self.header_lines or 0
        records = iter(cyvcf2.VCF(str(self.path), lazy=True))
        lines = _data_lines(self.path) if self.header_lines is not None else None
        while True:
            line += 1
            if lines is not None:
                line = _check_vcf_line(self.path, lines)
            try:
                record = next(records)
            except StopIteration:
                return
            except Exception as err:  # cyvcf2 raises a bare Exception for a record htslib cannot parse
                where = "" if self.header_lines is not None else f" (record {line})"
                raise InputError(self.path, f"malformed VCF record{where} ({err})",
                                 line=line if self.header_lines is not None else None) from None
            yield from _alleles(self.path, line, record.CHROM, record.POS, record.ID or ".", record.REF, record.ALT)

    def _read_tsv(self) -> Iterator[Variant | SkippedAllele]:
        first_row = True
        for line, raw in numbered_lines(self.path):
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not text.strip() or text.startswith("#"):
                continue
            fields = text.split("\t")
            if first_row and fields[0].lower() == "chrom":  # an optional header line
                first_row = False
                continue
            first_row = False
            if len(fields) not in (4, 5):
                raise InputError(self.path, "expected 4 or 5 tab-separated columns (chrom pos ref alt [id]), "
                                 f"got {len(fields)}", line=line)
            try:
                pos = int(fields[1])
            except ValueError:
                raise InputError(self.path, f"position {fields[1]!r} is not an integer", line=line) from None
            vid = fields[4] if len(fields) == 5 else "."
            yield from _alleles(self.path, line, fields[0], pos, vid, fields[2], fields[3].split(","))


def _header_lines(path: Path) -> int:
    """Number of ``#`` lines at the top of a text VCF (htslib's parsed header adds lines of its own)."""
    return sum(1 for _ in itertools.takewhile(lambda line: line[1].startswith(b"#"), numbered_lines(path)))


def _data_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    return ((number, raw) for number, raw in numbered_lines(path) if not raw.startswith(b"#") and raw.strip())


def _check_vcf_line(path: Path, lines: Iterator[tuple[int, bytes]]) -> int:
    """The number of the next record line, after checking its columns and position."""
    number, raw = next(lines, (None, b""))
    if number is None:
        return 0  # htslib ends here too
    fields = raw.rstrip(b"\r\n").split(b"\t")
    if len(fields) < 8:
        raise InputError(path, f"expected 8 or more tab-separated VCF columns, got {len(fields)}", line=number)
    if not fields[1].isdigit() or int(fields[1]) < 1:
        raise InputError(path, f"position {fields[1].decode(errors='replace')!r} is not a 1-based integer",
                         line=number)
    return number
