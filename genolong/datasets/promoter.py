"""The promoter dataset directory (built by ``genolong promoter prepare``,
:mod:`genolong.prep.promoter_dataset`): ``train.tsv``, ``valid.tsv``, ``test.tsv`` and
``manifest.json``. Each TSV has the header ``id chrom start end strand label sequence``
(tab-separated, plus ``source`` in datasets built across sources); the origin columns are ``.``
when unknown (:class:`PromoterRecord`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from genolong.core.errors import InputError, UserError
from genolong.dna.sequence import InvalidSequenceError, clean

COLUMNS = ("id", "chrom", "start", "end", "strand", "label", "sequence")
#: The columns of a dataset built across sources (:mod:`genolong.prep.source_split`).
SOURCE_COLUMNS = (*COLUMNS, "source")
MANIFEST = "manifest.json"
FORMAT = "genolong-promoter-dataset"


@dataclass(frozen=True)
class PromoterRecord:
    """One example: ``sequence`` uppercase ``ACGTN`` in the direction of transcription, ``label`` 1 for a
    promoter, its origin 0-based half-open on the forward strand (None when unknown; a negative keeps its
    positive's), ``source`` its data set in datasets built across sources (None elsewhere)."""

    id: str
    sequence: str
    label: int
    chrom: str | None = None
    start: int | None = None
    end: int | None = None
    strand: str | None = None
    source: str | None = None


def load_manifest(data_dir: str | Path) -> dict:
    """The manifest of a dataset directory; a UserError when it is not one."""
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise UserError(f"{data_dir} is not a promoter dataset (no {MANIFEST})",
                        hint="build one with `genolong promoter prepare`")
    try:
        manifest = json.loads(path.read_text())
    except (UnicodeDecodeError, ValueError) as err:
        raise InputError(path, f"invalid JSON: {err}", hint="rebuild the dataset with `genolong promoter prepare`") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(path, f"not a promoter dataset manifest (format {FORMAT!r} expected)")
    return manifest


def load_split(data_dir: str | Path, split: str) -> list[PromoterRecord]:
    """Read one split (``train``, ``valid`` or ``test``) of a dataset directory; an error names a
    missing file, a wrong header, or a malformed row (by line): not 7 fields, a label other than 0/1,
    a non-integer coordinate, a non-IUPAC character, a length not the manifest's."""
    path = Path(data_dir) / f"{split}.tsv"
    if not path.is_file():
        raise UserError(f"{path}: no such split file",
                        hint="build the dataset with `genolong promoter prepare`")
    manifest = load_manifest(data_dir)
    longest = manifest.get("sequence_length")
    lengths = None if longest is None else (manifest.get("min_sequence_length", longest), longest)
    with open(path) as handle:
        header = tuple(handle.readline().rstrip("\n").split("\t"))
        if header not in (COLUMNS, SOURCE_COLUMNS):
            raise InputError(path, f"header is {list(header)}, expected {list(COLUMNS)} [+ source]", line=1)
        return [_parse_row(line.rstrip("\n").split("\t"), len(header), lengths, path, number)
                for number, line in enumerate(handle, start=2)]


def _parse_row(fields: list[str], columns: int, lengths: tuple[int, int] | None, path: Path,
               line: int) -> PromoterRecord:
    """One dataset row; ``lengths`` = (shortest, longest) sequence length of the dataset, if known."""
    if len(fields) != columns or fields[5] not in ("0", "1"):
        raise InputError(path, f"expected {columns} tab-separated fields with label 0 or 1", line=line)
    record_id, chrom, start, end, strand, label, sequence, *source = (None if f == "." else f for f in fields)
    try:
        clean(sequence or "")
        start, end = (None if v is None else int(v) for v in (start, end))
    except (InvalidSequenceError, ValueError) as err:
        raise InputError(path, str(err), line=line, record=record_id) from None
    if sequence is None or (lengths is not None and not lengths[0] <= len(sequence) <= lengths[1]):
        expected = "unknown" if lengths is None else "-".join(str(n) for n in sorted(set(lengths)))
        raise InputError(path, f"sequence of {len(sequence or '')} bp; the dataset's are {expected} bp",
                         line=line, record=record_id)
    return PromoterRecord(record_id, sequence, int(label), chrom, start, end, strand, source[0] if source else None)
