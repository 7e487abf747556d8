"""Genome preparation: any FASTA (plain, gzip, bgzip) -> an indexed FASTA ready for random access.

:func:`prepare_genome` rewrites a FASTA as BGZF with fixed-width lines (or plain), the ``.fai`` (and
``.gzi``) indexes ``samtools faidx`` and pyfaidx use, written from the offsets known while writing
(re-reading takes minutes on a human genome), and a per-chromosome table, streaming the input raw
(case and IUPAC codes kept). Only assembled chromosomes are renamed (contigs need a per-assembly table).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from Bio import bgzf
from tqdm.auto import tqdm

from genolong.core.errors import ConfigError, InputError, UserError
from genolong.core.files import atomic_path
from genolong.dna.genome import canonical_chrom
from genolong.dna.sequence import read_fasta

log = logging.getLogger(__name__)

#: Chromosome-name styles: keep the input's names, or normalise to UCSC / Ensembl.
NAME_STYLES = ("keep", "ucsc", "ensembl")
# canonical_chrom() keys of assembled chromosomes: 1..N, roman numerals (yeast, worm), sex chromosomes,
# the mitochondrion; contigs and haplotypes are not renamed, and ``primary=True`` drops them.
_ASSEMBLED = re.compile(r"\d+|[IVX]+|[XYZW]|MT")
# bases of sequence per write: a whole number of lines, about 1 MiB
_LINES_PER_WRITE = 1 << 14
_LOWERCASE = bytes(range(ord("a"), ord("z") + 1))
_BGZF_HEADER = b"\x1f\x8b\x08\x04"


@dataclass(frozen=True)
class ChromosomeStats:
    """One row of the per-chromosome table."""

    name: str
    length: int
    n_count: int
    softmasked_count: int

    @property
    def n_fraction(self) -> float:
        return self.n_count / self.length if self.length else 0.0

    @property
    def softmasked_fraction(self) -> float:
        """Fraction of lowercase (soft-masked) bases."""
        return self.softmasked_count / self.length if self.length else 0.0


@dataclass(frozen=True)
class PreparedGenome:
    """The files :func:`prepare_genome` wrote and what they hold."""

    path: Path
    fai: Path
    gzi: Path | None
    table: Path
    chromosomes: tuple[ChromosomeStats, ...]

    @property
    def length(self) -> int:
        return sum(chrom.length for chrom in self.chromosomes)


def is_assembled_chromosome(name: str) -> bool:
    """True for ``chr1``/``1``, ``chrX``, ``chrM``/``MT``, ``chrIV``...; False for contigs."""
    return _ASSEMBLED.fullmatch(canonical_chrom(name)) is not None


def normalise_name(name: str, style: str) -> str:
    """``name`` in ``style`` (:data:`NAME_STYLES`); contigs and haplotypes are unchanged."""
    if style not in NAME_STYLES:
        raise ConfigError(f"unknown chromosome name style {style!r}; choose from {', '.join(NAME_STYLES)}")
    key = canonical_chrom(name)
    if style == "keep" or not _ASSEMBLED.fullmatch(key):
        return name
    if style == "ensembl":
        return key
    return "chrM" if key == "MT" else f"chr{key}"


def index_paths(path: str | os.PathLike) -> tuple[Path, Path, Path]:
    """The ``.fai``, ``.gzi`` and chromosome-table paths that go with a prepared FASTA."""
    path = Path(path)
    return Path(f"{path}.fai"), Path(f"{path}.gzi"), Path(f"{path}.chromosomes.tsv")


def default_output(fasta: str | os.PathLike, *, plain: bool = False) -> Path:
    """In the current directory, never beside the (maybe read-only) input: ``x.fa.gz`` -> ``x.fa.bgz``
    (or ``x.fa`` with ``plain``); ``x.fa`` -> ``x.fa.bgz``."""
    fasta = Path(fasta)
    stem = fasta.name[: -len(fasta.suffix)] if fasta.suffix in (".gz", ".bgz") else fasta.name
    return Path.cwd() / (stem if plain else f"{stem}.bgz")


def prepare_genome(fasta: str | os.PathLike, out: str | os.PathLike | None = None, *, plain: bool = False,
                   names: str = "keep", primary: bool = False, line_width: int = 60, compresslevel: int = 4,
                   progress: bool = True) -> PreparedGenome:
    """Write ``fasta`` as an indexed BGZF (or ``plain``) FASTA with a per-chromosome table, at ``out``
    (default :func:`default_output`) with the indexes and table beside it (:func:`index_paths`).
    ``compresslevel``: zlib level, 1 fastest .. 9 smallest (the default 4 writes DNA much faster than
    zlib's usual 6, for a slightly larger file). An InputError for invalid FASTA or two records named
    alike after renaming (by ``names``, one of :data:`NAME_STYLES`), a UserError for an output over the
    input or unwritable."""
    fasta = Path(fasta)
    out = Path(out) if out is not None else default_output(fasta, plain=plain)
    if line_width < 1:
        raise ConfigError(f"line width must be at least 1, got {line_width}")
    normalise_name("chr1", names)  # reject an unknown style before reading anything
    if out.resolve() == fasta.resolve():
        raise UserError(f"{out}: the output would overwrite the input FASTA", hint="pass --out")
    fai, gzi, table = index_paths(out)
    started = time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            # entered table-first so that, on success, the FASTA is renamed into place first
            # and its indexes after it (pyfaidx rebuilds an index older than its FASTA)
            tmp_table = stack.enter_context(atomic_path(table))
            tmp_gzi = None if plain else stack.enter_context(atomic_path(gzi))
            tmp_fai = stack.enter_context(atomic_path(fai))
            tmp_out = stack.enter_context(atomic_path(out))
            chromosomes, fai_lines = _write_fasta(fasta, tmp_out, plain=plain, names=names, primary=primary,
                                                  line_width=line_width, compresslevel=compresslevel, progress=progress)
            tmp_fai.write_text("".join(fai_lines))
            if tmp_gzi is not None:
                _write_gzi(tmp_out, tmp_gzi)
            tmp_table.write_text(_format_table(chromosomes))
            for stale in (fai, gzi):
                stale.unlink(missing_ok=True)
    except PermissionError as err:
        raise UserError(f"cannot write {err.filename or out}: permission denied", hint="pass --out") from None
    prepared = PreparedGenome(out, fai, None if plain else gzi, table, tuple(chromosomes))
    seconds = time.perf_counter() - started
    log.info("prepared %s: %d sequences, %s bp in %.1f s (%.1f Mbp/s)", out, len(chromosomes),
             f"{prepared.length:,}", seconds, prepared.length / seconds / 1e6 if seconds else float("inf"))
    return prepared


def _write_fasta(fasta: Path, tmp_out: Path, *, plain: bool, names: str, primary: bool, line_width: int,
                 compresslevel: int, progress: bool) -> tuple[list[ChromosomeStats], list[str]]:
    """Stream the records of ``fasta`` into ``tmp_out``; return the table rows and .fai lines."""
    chromosomes: list[ChromosomeStats] = []
    fai_lines: list[str] = []
    written: set[str] = set()
    offset = 0  # uncompressed bytes written so far
    with (open(tmp_out, "wb") as handle,
          tqdm(unit="bp", unit_scale=True, desc=f"preparing {fasta.name}",
               disable=None if progress else True) as bar):
        writer = handle if plain else bgzf.BgzfWriter(fileobj=handle, compresslevel=compresslevel)
        for record in read_fasta(fasta, raw=True):
            if primary and not is_assembled_chromosome(record.name):
                log.debug("skipping %s (not an assembled chromosome)", record.name)
                continue
            name = normalise_name(record.name, names)
            if name in written:
                raise InputError(fasta, f"two records are named {name!r} after renaming", record=record.name)
            written.add(name)
            if names == "ensembl" and name == "MT" and len(record) == 16_571:
                log.warning("%s is hg19's chrM (NC_001807, 16,571 bp), not the rCRS MT of GRCh37 (16,569 bp)",
                            record.name)
            header = f">{name}\n".encode()
            writer.write(header)
            offset += len(header)
            seq = record.sequence.encode("ascii")
            _write_lines(writer, seq, line_width, bar)
            bases_per_line = min(line_width, len(seq))  # a one-line record: its own length, as samtools
            fai_lines.append(f"{name}\t{len(seq)}\t{offset}\t{bases_per_line}\t{bases_per_line + 1}\n")
            offset += len(seq) + -(-len(seq) // line_width)
            chromosomes.append(ChromosomeStats(name, len(seq), seq.count(b"N") + seq.count(b"n"),
                                               len(seq) - len(seq.translate(None, _LOWERCASE))))
        writer.close()  # BGZF: flushes the last block and writes the EOF marker
    if not chromosomes:
        raise InputError(fasta,
                         "no records left to write" + (" (--primary dropped them all)" if primary else ""))
    return chromosomes, fai_lines


def _write_lines(writer, seq: bytes, line_width: int, bar) -> None:
    """Write ``seq`` as lines of ``line_width`` bases, :data:`_LINES_PER_WRITE` lines per write."""
    step = line_width * _LINES_PER_WRITE
    for start in range(0, len(seq), step):
        piece = seq[start : start + step]
        writer.write(b"\n".join(piece[i : i + line_width] for i in range(0, len(piece), line_width)) + b"\n")
        bar.update(len(piece))


def bgzf_blocks(path: str | os.PathLike) -> list[tuple[int, int]]:
    """``(compressed offset, uncompressed offset)`` of every BGZF block of ``path``, EOF block included
    (read from the block headers and sizes only)."""
    blocks = []
    compressed = uncompressed = 0
    with open(path, "rb") as handle:
        while header := handle.read(18):
            if len(header) < 18 or header[:4] != _BGZF_HEADER or header[12:14] != b"BC":
                raise InputError(path, f"not a BGZF block at byte {compressed}")
            block_size = struct.unpack("<H", header[16:18])[0] + 1
            handle.seek(compressed + block_size - 4)
            (data_size,) = struct.unpack("<I", handle.read(4))
            blocks.append((compressed, uncompressed))
            compressed += block_size
            uncompressed += data_size
    return blocks


def _write_gzi(bgzf_path: Path, gzi_path: Path) -> None:
    """The htslib ``.gzi`` index: block count, then (compressed, uncompressed) offset pairs, without
    the first block (0, 0) and the empty EOF block, as in htslib."""
    blocks = bgzf_blocks(bgzf_path)[1:-1]
    with open(gzi_path, "wb") as handle:
        handle.write(struct.pack("<Q", len(blocks)))
        for compressed, uncompressed in blocks:
            handle.write(struct.pack("<QQ", compressed, uncompressed))


def _format_table(chromosomes: list[ChromosomeStats]) -> str:
    rows = ["name\tlength\tn_fraction\tsoftmasked_fraction\n"]
    rows += [f"{c.name}\t{c.length}\t{c.n_fraction:.6f}\t{c.softmasked_fraction:.6f}\n" for c in chromosomes]
    return "".join(rows)
