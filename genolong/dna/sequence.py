"""DNA alphabet, base codes, cleaning, reverse complement and a validating, streaming FASTA reader.

Cleaning maps a raw FASTA sequence onto the model alphabet ``ACGTN``: soft-masked
(lowercase) bases are uppercased and IUPAC ambiguity codes (R, Y, S, W, K, M, B, D,
H, V) become ``N``. Anything else (digits, ``X``, ``*``, ``-``, ...) is an error.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError, UserError
from genolong.core.files import atomic_path

#: The model alphabet.
ALPHABET = "ACGTN"
#: The four bases in code order: a base's 2-bit code is its index here.
BASES = "ACGT"
#: ASCII byte -> 2-bit code (A0 C1 G2 T3); every other byte (N, lowercase, ...) -> 4.
BASE_CODES = np.full(256, 4, dtype=np.uint8)
BASE_CODES[np.frombuffer(BASES.encode(), np.uint8)] = np.arange(4, dtype=np.uint8)
#: IUPAC nucleotide codes accepted in input (either case); all but ACGT become N.
IUPAC_CODES = "ACGTRYSWKMBDHVN"

_INVALID = ord("!")  # sentinel byte for characters outside IUPAC


def _make_tables() -> tuple[bytes, bytes]:
    clean = bytearray([_INVALID] * 256)
    raw = bytearray([_INVALID] * 256)
    for code in IUPAC_CODES:
        target = code if code in BASES else "N"
        for char in (code, code.lower()):
            clean[ord(char)] = ord(target)
            raw[ord(char)] = ord(char)
    return bytes(clean), bytes(raw)


_CLEAN_TABLE, _VALIDATE_TABLE = _make_tables()
_PAIRS = "ACGTN" + "RYSWKMBDHV"
_PARTNERS = "TGCAN" + "YRSWMKVHDB"
# ASCII byte -> its complement: IUPAC codes of either case; every other byte is left as it is.
_COMPLEMENT = bytes.maketrans((_PAIRS + _PAIRS.lower()).encode(), (_PARTNERS + _PARTNERS.lower()).encode())
_COMPLEMENT_ARRAY = np.frombuffer(_COMPLEMENT, np.uint8)


class InvalidSequenceError(UserError):
    """A sequence holds a character outside the IUPAC nucleotide codes."""

    def __init__(self, char: str, position: int):
        self.char = char
        self.position = position
        super().__init__(
            f"invalid character {char!r} at position {position}; allowed: IUPAC nucleotide codes {IUPAC_CODES}"
        )


def clean(seq: str | bytes) -> str:
    """Map ``seq`` onto ``ACGTN``: uppercase, IUPAC ambiguity codes -> ``N``; InvalidSequenceError for a
    character outside the IUPAC nucleotide codes."""
    data = seq.encode("ascii", errors="replace") if isinstance(seq, str) else bytes(seq)
    out = data.translate(_CLEAN_TABLE)
    bad = out.find(_INVALID)
    if bad >= 0:
        raise InvalidSequenceError(chr(data[bad]), bad)
    return out.decode("ascii")


def reverse_complement(seq: str) -> str:
    """Reverse complement of a DNA string; case and IUPAC codes are complemented too."""
    return seq.encode("ascii").translate(_COMPLEMENT)[::-1].decode("ascii")


def reverse_complement_rows(seqs: np.ndarray) -> np.ndarray:
    """Reverse complement of every row of ``(..., length)`` uint8 ASCII, as :func:`reverse_complement`
    does a string; a new array of the same shape."""
    return _COMPLEMENT_ARRAY[seqs[..., ::-1]]


@dataclass(frozen=True)
class FastaRecord:
    """One FASTA record: ``name`` is the header up to its first whitespace, ``description`` the rest."""

    name: str
    sequence: str
    description: str = ""

    def __len__(self) -> int:
        return len(self.sequence)


#: Compressions read as a stream through the standard library: name -> (magic number, opener).
STREAMS = {"gzip": (b"\x1f\x8b", gzip.open), "bzip2": (b"BZh", bz2.open), "xz": (b"\xfd7zXZ\x00", lzma.open)}
#: Compressions recognised but not read: name -> magic number.
UNREAD = {"zstd": b"\x28\xb5\x2f\xfd"}
#: What a damaged compressed stream raises.
STREAM_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


def compression(path: str | os.PathLike) -> str | None:
    """``gzip`` (bgzip included), ``bzip2``, ``xz`` or ``zstd`` by the file's magic number; None otherwise."""
    with open(path, "rb") as handle:
        head = handle.read(6)
    known = {name: magic for name, (magic, _) in STREAMS.items()} | UNREAD
    return next((name for name, magic in known.items() if head.startswith(magic)), None)


def open_text_or_gzip(path: str | os.PathLike):
    """Open ``path`` for binary reading, transparently decompressing gzip, bgzip, bzip2 and xz; UserError
    for no such file, a directory, or a compression genolong does not read (zstd), with what to do."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path}: is a directory, not a file")
    kind = compression(path)
    if kind in UNREAD:
        raise InputError(path, f"{kind}-compressed, which genolong does not read (plain, gzip, bgzip, bzip2 or xz)",
                         hint=f"decompress it first, e.g. `{kind} -d {path}`")
    return STREAMS[kind][1](path, "rb") if kind else open(path, "rb")


def text_lines(handle) -> Iterator[bytes]:
    """The lines of a binary text stream without their end: LF, CRLF, CR-only (classic Mac) and
    mixed endings alike."""
    for line in handle:
        line = line.rstrip(b"\r\n")
        if b"\r" in line:
            yield from line.split(b"\r")
        else:
            yield line


def numbered_lines(path: str | os.PathLike) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of a plain, gzip or bgzip text file, read as bytes; a truncated or
    corrupt stream is an InputError naming the file and line."""
    line_number = 0
    try:
        with open_text_or_gzip(path) as handle:
            for line_number, line in enumerate(handle, start=1):
                yield line_number, line
    except STREAM_ERRORS as err:
        raise InputError(path, f"cannot read: {err}", line=line_number + 1,
                         hint="the file is truncated or corrupt; download or copy it again") from None


def read_fasta(path: str | os.PathLike, *, raw: bool = False, unique_names: bool = True) -> Iterator[FastaRecord]:
    """Stream the records of a FASTA file (plain, gzip, bgzip, bzip2 or xz; any line endings), one record
    in memory at a time, validating as it goes.

    Args:
        raw: keep the sequence as written (case and IUPAC codes preserved, still validated) instead of
            cleaning it to ``ACGTN``.
        unique_names: reject a repeated record name (right for a genome; sequence collections such as
            promoter sets may repeat names).

    Raises:
        InputError: naming the file and line: empty file, missing ``>`` header, invalid character,
            duplicate record name, or a record without sequence.
    """
    table = _VALIDATE_TABLE if raw else _CLEAN_TABLE
    seen: set[str] = set()
    name: str | None = None
    description = ""
    header_line = 0
    chunks: list[bytes] = []
    line_number = 0

    def finish() -> FastaRecord:
        data = b"".join(chunks)
        if not data:
            raise InputError(path, "record has no sequence", line=header_line, record=name)
        translated = data.translate(table)
        if translated.find(_INVALID) >= 0:
            _raise_at_line(path, name, header_line, chunks, table)
        return FastaRecord(name, translated.decode("ascii"), description)

    with open_text_or_gzip(path) as handle:
        try:
            for line_number, line in enumerate(text_lines(handle), start=1):  # noqa: B007 (used after loop)
                if line.startswith(b">"):
                    if name is not None:
                        yield finish()
                    try:  # record names reach output columns: carried byte for byte, or refused
                        header = line[1:].decode("utf-8").strip()
                    except UnicodeDecodeError as err:
                        raise InputError(path, f"header is not UTF-8 text (byte {line[1 + err.start]:#04x} at "
                                         f"column {err.start + 2})", line=line_number) from None
                    if not header:
                        raise InputError(path, "header line has no record name", line=line_number)
                    # the name ends at the first whitespace, so that no TAB reaches a TSV, BED or .fai column
                    name, *rest = header.split(maxsplit=1)
                    description = rest[0] if rest else ""
                    if unique_names and name in seen:
                        raise InputError(path, "duplicate record name", line=line_number, record=name)
                    seen.add(name)
                    header_line = line_number
                    chunks = []
                elif name is None:
                    if line.strip():
                        raise InputError(path, "expected a FASTA header line starting with '>'",
                                         line=line_number)
                else:
                    chunks.append(line.strip())
        except STREAM_ERRORS as err:  # truncated or corrupt compressed stream
            raise InputError(path, f"cannot read: {err}", line=line_number or None,
                             hint="the file is truncated or corrupt; download or copy it again") from None
    if name is None:
        raise InputError(path, "empty file: no FASTA records")
    yield finish()


def _raise_at_line(path, name, header_line: int, chunks: list[bytes], table: bytes) -> None:
    """Locate the first invalid character of a record and raise with its line number."""
    for offset, chunk in enumerate(chunks, start=1):
        bad = chunk.translate(table).find(_INVALID)
        if bad >= 0:
            raise InputError(path, f"invalid character {chr(chunk[bad])!r} (column {bad + 1}); "
                             f"allowed: IUPAC nucleotide codes {IUPAC_CODES}", line=header_line + offset,
                             record=name)


def write_fasta(path: str | os.PathLike, records, *, width: int = 60) -> None:
    """Write ``records`` (FastaRecord or ``(name, sequence)`` pairs) to ``path`` atomically."""
    with atomic_path(path) as tmp, open(tmp, "w") as out:
        for record in records:
            name, seq = (record.name, record.sequence) if isinstance(record, FastaRecord) else record
            out.write(f">{name}\n")
            for start in range(0, len(seq), width):
                out.write(seq[start : start + width] + "\n")
