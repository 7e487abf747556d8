"""Random access to a reference genome: one small class around ``pyfaidx.Fasta``.

Plain and bgzip FASTA files are indexed (``.fai``, plus ``.gzi`` for bgzip) and sliced at random; a plain
``.gz`` (gzip, not bgzip) can only be streamed (:meth:`Genome.records`; ``genolong genome prepare`` writes
an indexed bgzip copy). Sequences come back cleaned (``ACGTN``); chromosome names resolve through aliases
(``chr1`` == ``1``, ``chrM`` == ``MT`` == ``chrMT`` == ``M``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from genolong.core.errors import InputError, UserError
from genolong.core.files import cache_dir
from genolong.dna.sequence import (
    IUPAC_CODES,
    FastaRecord,
    InvalidSequenceError,
    clean,
    compression,
    open_text_or_gzip,
    read_fasta,
    reverse_complement,
)

_BGZF_MAGIC = b"\x1f\x8b\x08\x04"  # gzip with the FEXTRA flag; BGZF adds the 'BC' subfield


def is_bgzip(path: str | os.PathLike) -> bool:
    """True for a BGZF (block gzip) file, the random-access gzip that ``bgzip`` writes."""
    with open(path, "rb") as handle:
        head = handle.read(18)
    return len(head) == 18 and head[:4] == _BGZF_MAGIC and head[12:14] == b"BC"


def canonical_chrom(name: str) -> str:
    """The alias key of a chromosome name: ``chr`` prefix dropped, mitochondrion as ``MT``."""
    key = name[3:] if name.lower().startswith("chr") else name
    return "MT" if key.upper() in ("M", "MT") else key


def _index_paths(path: Path) -> tuple[Path, Path]:
    """The .fai/.gzi of ``path``: the ones beside it if present, else built in the cache (never beside
    the user's data, which may be read-only or shared)."""
    beside = Path(f"{path}.fai"), Path(f"{path}.gzi")
    if beside[0].exists() and (beside[1].exists() or not is_bgzip(path)):
        return beside
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    folder = cache_dir("fai")
    return folder / f"{path.name}.{key}.fai", folder / f"{path.name}.{key}.gzi"


def _check_line_endings(path: Path) -> None:
    """Refuse a plain FASTA with CR-only (classic Mac) or mixed line endings, which the index
    cannot describe (it was read as one header line): its first MiB decides."""
    with open(path, "rb") as handle:
        head = handle.read(1 << 20)
    if head.count(b"\r") > head.count(b"\r\n"):
        raise InputError(path, "has CR-only (classic Mac) or mixed line endings, which cannot be read at random",
                         hint=f"run `genolong genome prepare {path}` to write a copy with LF endings")


def _check_index(path: Path, fai: Path, index) -> None:
    """Refuse a ``.fai`` beside a plain FASTA that does not describe it (an older version of the file, or
    another file): each record's header must end where pyfaidx's ``index`` (name -> ``offset``, the
    first sequence byte; ``bend``, the byte after the sequence; ``prev_bend``) says its sequence starts,
    and the last sequence must end where the file does."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        for name, record in index.items():
            span = record.offset - record.prev_bend
            handle.seek(record.prev_bend)
            header = handle.read(span).strip().split(maxsplit=1) if 0 < span <= 1 << 16 else []
            if not header or header[0] != f">{name}".encode() or record.bend > size:
                raise InputError(path, f"the index {fai} does not match the file (record {name!r})",
                                 hint=f"delete {fai} and run again: it is rebuilt")
        handle.seek(record.bend)
        if handle.read(1 << 16).strip():
            raise InputError(path, f"the index {fai} does not match the file (data after {name!r})",
                             hint=f"delete {fai} and run again: it is rebuilt")


class Genome:
    """A FASTA genome (plain, bgzip, or stream-only gzip) with random access and chromosome-name aliases;
    coordinates are 0-based, half-open, as in BED."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_file():
            raise UserError(f"{self.path}: no such genome FASTA file")
        self.compression = compression(self.path)
        self.random_access = self.compression is None or is_bgzip(self.path)
        self._fasta = None

    @property
    def fasta(self):
        """The underlying ``pyfaidx.Fasta`` (opened and indexed on first use)."""
        if self._fasta is None:
            if not self.random_access:
                open_text_or_gzip(self.path).close()  # a compression genolong does not read at all: what to do
                raise UserError(
                    f"{self.path} is {self.compression}-compressed, not bgzip, so it cannot be read at random",
                    hint=f"run `genolong genome prepare {self.path}` to write an indexed bgzip copy",
                )
            if self.compression is None:
                _check_line_endings(self.path)
            import pyfaidx

            fai, gzi = _index_paths(self.path)
            try:
                self._fasta = pyfaidx.Fasta(str(self.path), indexname=str(fai), gzi_indexname=str(gzi),
                                            as_raw=True, duplicate_action="stop", read_long_names=False)
            except (pyfaidx.FastaIndexingError, ValueError) as err:
                raise InputError(self.path, f"cannot index FASTA: {err}") from None
            if fai == Path(f"{self.path}.fai") and not is_bgzip(self.path):
                _check_index(self.path, fai, self._fasta.faidx.index)
            self._aliases = {canonical_chrom(name): name for name in self._fasta.records}
        return self._fasta

    @property
    def chromosomes(self) -> dict[str, int]:
        """Chromosome name -> length, in file order."""
        return {name: len(record) for name, record in self.fasta.records.items()}

    def resolve(self, chrom: str) -> str:
        """The genome's own name for ``chrom`` (``chr1``/``1``, ``chrM``/``MT`` aliases)."""
        fasta = self.fasta
        if chrom in fasta.records:
            return chrom
        name = self._aliases.get(canonical_chrom(chrom))
        if name is None:
            raise UserError(f"chromosome {chrom!r} not in {self.path} (it has {len(self._aliases)} records, "
                            f"e.g. {', '.join(list(fasta.records)[:3])})")
        return name

    def fetch(self, chrom: str, start: int, end: int, strand: str = "+") -> str:
        """Cleaned sequence of ``chrom[start:end]``, reverse-complemented for ``strand='-'``; UserError for
        an unknown chromosome or an interval outside it."""
        name = self.resolve(chrom)
        length = len(self.fasta.records[name])
        if not 0 <= start <= end <= length:
            raise UserError(f"interval {chrom}:{start}-{end} is outside {name} (length {length})")
        if strand not in "+-" or len(strand) != 1:
            raise UserError(f"strand must be '+' or '-', got {strand!r}")
        try:
            seq = clean(self.fasta.records[name][start:end])
        except InvalidSequenceError as err:
            raise self._invalid(name, start + err.position, err.char) from None
        return reverse_complement(seq) if strand == "-" else seq

    def _invalid(self, name: str, position: int, char: str) -> InputError:
        """The error for an invalid character met at ``position`` (0-based) of ``name``: the streaming
        reader's, which names the line of the file's first one; else the record and the position."""
        try:
            for _ in read_fasta(self.path):
                pass
        except InputError as err:
            return err
        return InputError(self.path, f"invalid character {char!r} at bp {position + 1}; "
                          f"allowed: IUPAC nucleotide codes {IUPAC_CODES}", record=name)

    def records(self) -> Iterator[FastaRecord]:
        """Stream every record, cleaned; works for all formats including plain gzip."""
        return read_fasta(self.path)

    def close(self) -> None:
        if self._fasta is not None:
            self._fasta.close()
            self._fasta = None

    def __enter__(self) -> Genome:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
