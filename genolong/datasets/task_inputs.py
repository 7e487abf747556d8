"""Labelled sequences read from the formats users bring, as :class:`Row` lists for the task
builder (:mod:`genolong.prep.task_dataset`): a FASTA file per class (:func:`read_class_fastas`),
tables (:func:`read_table`) and BED / narrowPeak regions on a genome (:func:`read_bed`). Labels stay
as written (str, or numbers from Parquet); the builder decides the problem type."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from genolong.core.errors import InputError, UserError
from genolong.datasets.table_files import expand_lists, read_cells
from genolong.dna.genome import Genome
from genolong.dna.sequence import IUPAC_CODES, numbered_lines, read_fasta

#: Column names taken as the sequence column when none is named.
SEQUENCE_COLUMNS = ("sequence", "seq", "Sequence", "dna")
#: Column names taken as the record id when present.
ID_COLUMNS = ("id", "name", "ID", "Name")
#: narrowPeak / BED columns by name (1-based), for ``--label-column``.
BED_COLUMNS = {"name": 4, "score": 5, "signalValue": 7, "pValue": 8, "qValue": 9}
#: The class of background windows.
BACKGROUND = "background"

_NOT_IUPAC = re.compile(f"[^{IUPAC_CODES}{IUPAC_CODES.lower()}]")


@dataclass
class Row:
    """One labelled sequence: a raw value per label column; ``where``: ``(file, 1-based line or row)``,
    for one-line errors; ``chrom`` for genomic rows, ``split`` when the input gave it."""

    id: str
    sequence: str
    labels: tuple
    where: tuple[Path, int]
    chrom: str | None = None
    split: str | None = None


def check_sequence(sequence: str, path: Path, line: int) -> str:
    """``sequence`` uppercased, or an InputError naming the file and line for a non-IUPAC character."""
    bad = _NOT_IUPAC.search(sequence)
    if bad is not None or not sequence:
        what = "empty sequence" if not sequence else f"invalid character {bad.group()!r} at position {bad.start()}"
        raise InputError(path, f"{what}; allowed: IUPAC nucleotide codes {IUPAC_CODES}", line=line)
    return sequence.upper()


def read_class_fastas(classes: list[tuple[str, Path]], split: str | None = None) -> tuple[list[Row], list[str]]:
    """The records of each ``(class name, FASTA)``, label column ``class`` (and ``split``, when one split's);
    a UserError for two classes with one name or one file given as two classes."""
    names = [name for name, _ in classes]
    if len(set(names)) != len(names):
        raise UserError(f"--class names must differ{f' within the {split} split' if split else ''}, got {names}")
    files: dict[Path, str] = {}
    rows = []
    for name, path in classes:
        other = files.setdefault(Path(path).resolve(), name)
        if other != name:
            raise InputError(path, f"given as class {other!r} and as class {name!r}",
                             hint="give each class its own FASTA file")
        for number, record in enumerate(read_fasta(path, raw=True, unique_names=False), start=1):
            rows.append(Row(record.name, record.sequence.upper(), (name,), (Path(path), number), split=split))
    return rows, ["class"]


class Table(NamedTuple):
    """The rows of a table, its label column names, and ``{NAME: length}`` of each label column
    that held lists (read as one label column per element, ``NAME_0``, ``NAME_1``...)."""

    rows: list[Row]
    label_columns: list[str]
    label_lists: dict[str, int]


def record_id(number: int) -> str:
    """The id of the ``number``-th data row (1-based, a header not counted) of a table without an id
    column: ``row1`` is the first row of a CSV, a TSV and a Parquet file alike."""
    return f"row{number}"


def read_table(path: Path, *, sequence_column: str | None, label_columns: list[str] | None,
               id_column: str | None = None, header: bool = True, split: str | None = None) -> Table:
    """The rows of one table file (:mod:`genolong.datasets.table_files`), with its label column names.
    Defaults: ``sequence_column`` the first of :data:`SEQUENCE_COLUMNS` present (column ``0`` without a
    header; columns are then ``0``, ``1``...); ``label_columns`` every other column but the id one (a
    column of lists: one per element); ``id_column`` the first of :data:`ID_COLUMNS` present, else
    :func:`record_id`. ``split``: the split every row belongs to (a table per split), or None."""
    path = Path(path)
    columns, lines = read_cells(path, header)
    if sequence_column is None:
        sequence_column = "0" if not header else next((c for c in SEQUENCE_COLUMNS if c in columns), None)
        if sequence_column is None:
            raise InputError(path, f"no sequence column ({' or '.join(SEQUENCE_COLUMNS)}); columns are {columns}",
                             hint="name it with --sequence-column")
    if id_column is None:
        id_column = next((c for c in ID_COLUMNS if c in columns and c != sequence_column), None)
    if label_columns is None:
        label_columns = [c for c in columns if c not in (sequence_column, id_column)]
    for name in [sequence_column, *label_columns, *([id_column] if id_column else [])]:
        if name not in columns:
            raise InputError(path, f"no column {name!r}; columns are {columns[:20]}")
    if not label_columns:
        raise InputError(path, "no label column besides the sequence", hint="name them with --label-column")
    at = {name: columns.index(name) for name in columns}
    expanded, lists = expand_lists(path, lines, label_columns, at)
    rows = []
    for row_number, (number, values) in enumerate(lines, start=1):
        sequence = check_sequence(str(values[at[sequence_column]] or ""), path, number)
        record = str(values[at[id_column]]) if id_column else record_id(row_number)
        labels = tuple(label for c in label_columns
                       for label in (values[at[c]] if c in lists else [values[at[c]]]))
        rows.append(Row(record, sequence, labels, (path, number), split=split))
    return Table(rows, expanded, lists)


#: Suffixes read as tables by :func:`read_records`; anything else is read as FASTA.
TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".arrow")


def read_records(path: Path, sequence_column: str | None = None):
    """``(id, sequence)`` of each record of a FASTA file or a table (by suffix, ``.gz`` aside), for
    prediction (a table needs no label columns)."""
    suffixes = [s for s in Path(path).suffixes if s != ".gz"]
    if not suffixes or suffixes[-1] not in TABLE_SUFFIXES:
        for record in read_fasta(path, raw=True, unique_names=False):
            yield record.name, record.sequence
        return
    path = Path(path)
    columns, lines = read_cells(path, header=True)
    sequence_column = sequence_column or next((c for c in SEQUENCE_COLUMNS if c in columns), None)
    if sequence_column not in columns:
        raise InputError(path, f"no sequence column ({sequence_column or ' or '.join(SEQUENCE_COLUMNS)}); "
                         f"columns are {columns[:20]}", hint="name it with --sequence-column")
    id_column = next((c for c in ID_COLUMNS if c in columns and c != sequence_column), None)
    for row_number, (number, values) in enumerate(lines, start=1):
        sequence = check_sequence(str(values[columns.index(sequence_column)] or ""), path, number)
        yield (str(values[columns.index(id_column)]) if id_column else record_id(row_number)), sequence


@dataclass
class Windows:
    """How regions become inputs: ``window`` bp centred on each region (its narrowPeak summit when
    given), and ``background`` windows per region drawn at least ``distance`` bp from every region."""

    window: int
    background: int = 0
    distance: int = 0
    seed: int = 0


def _bed_column(spec: str, path: Path) -> int:
    """A ``--label-column`` of a BED file: a 1-based column number or a name of :data:`BED_COLUMNS`."""
    if spec.isdigit() and int(spec) >= 4:
        return int(spec)
    if spec in BED_COLUMNS:
        return BED_COLUMNS[spec]
    raise InputError(path, f"label column {spec!r} is neither a column number >= 4 nor one of {sorted(BED_COLUMNS)}")


def read_bed(path: Path, genome: Genome, windows: Windows, label_columns: list[str] | None) -> tuple[list[Row], list[str]]:
    """Windows of ``genome`` centred on the regions of a BED / narrowPeak file (on the summit when
    given; N-padded past a chromosome end), plus background windows (:func:`_background`). Without
    ``label_columns`` each region is class ``region`` (background: :data:`BACKGROUND`); with them, the
    values of those columns (background: :data:`BACKGROUND` for a class column, ``0`` for a score)."""
    path = Path(path)
    columns = [_bed_column(c, path) for c in label_columns] if label_columns else []
    rows, centres = [], {}
    for region in bed_regions(path, genome, max([3, *columns])):
        labels = tuple(region.fields[c - 1] for c in columns) if columns else ("region",)
        rows.append(Row(region.id, _window(genome, region.chrom, region.centre, windows.window), labels,
                        (path, region.line), chrom=region.chrom))
        centres.setdefault(region.chrom, []).append((region.start, region.end))
    if not rows:
        raise InputError(path, "no regions")
    names = label_columns or ["class"]
    background = tuple("0" if columns and c != "name" else BACKGROUND for c in names)
    return rows + _background(genome, centres, windows, len(rows), background, path), list(names)


@dataclass
class Region:
    """One BED / narrowPeak line: its ``fields``, 1-based ``line``, the genome's name of its
    chromosome, its 0-based half-open ``start``..``end``, and its ``centre`` (the narrowPeak summit
    when given, else the middle); ``id`` is ``chrom:start-end`` as the file writes the chromosome."""

    fields: list[str]
    line: int
    chrom: str
    start: int
    end: int
    centre: int

    @property
    def id(self) -> str:
        return f"{self.fields[0]}:{self.start}-{self.end}"


def bed_regions(path: Path, genome: Genome, min_fields: int = 3):
    """The :class:`Region` of each line of a BED / narrowPeak file on ``genome``; an InputError names a line
    with fewer than ``min_fields`` fields, a non-integer coordinate, or an unknown or overrun chromosome."""
    sizes = genome.chromosomes
    for number, raw in numbered_lines(path):  # streamed: a BED file of any size
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line.strip() or line.startswith(("#", "track", "browser")):
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) < min_fields:
            raise InputError(path, f"{len(fields)} fields; need at least {min_fields}", line=number)
        chrom, start, end = fields[0], _integer(fields[1], path, number), _integer(fields[2], path, number)
        try:
            name = genome.resolve(chrom)
        except UserError:
            raise InputError(path, f"chromosome {chrom!r} is not in {genome.path}", line=number) from None
        if not 0 <= start < end <= sizes[name]:
            raise InputError(path, f"region {chrom}:{start}-{end} is off the chromosome (length {sizes[name]})",
                             line=number)
        summit = _integer(fields[9], path, number) if len(fields) >= 10 and fields[9] != "-1" else -1
        centre = start + summit if 0 <= summit < end - start else (start + end) // 2
        yield Region(fields, number, name, start, end, centre)


def bed_records(path: Path, genome_path: Path, length: int | None = None):
    """``(id, sequence)`` of each region of a BED / narrowPeak file: the name column (4th) unless absent or
    ``.`` (then ``chrom:start-end``); ``length`` bp centred as :func:`read_bed` does, or the region itself
    (``length`` None), read while the genome stays open. Errors: as :func:`bed_regions`, or no regions."""
    path = Path(path)
    with Genome(genome_path) as genome:
        count = 0
        for region in bed_regions(path, genome):
            name = region.fields[3] if len(region.fields) > 3 and region.fields[3] not in ("", ".") else region.id
            count += 1
            yield name, (genome.fetch(region.chrom, region.start, region.end) if length is None
                         else _window(genome, region.chrom, region.centre, length))
    if count == 0:
        raise InputError(path, "no regions")


def _integer(text: str, path: Path, line: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(path, f"{text!r} is not an integer coordinate", line=line) from None


def _window(genome: Genome, chrom: str, centre: int, window: int) -> str:
    """``window`` bp of ``chrom`` centred on ``centre`` (plus strand), N-padded past the chromosome ends."""
    start = centre - window // 2
    end = start + window
    length = genome.chromosomes[chrom]
    inside = genome.fetch(chrom, max(start, 0), min(end, length))
    return "N" * max(-start, 0) + inside + "N" * max(end - length, 0)


def _background(genome: Genome, regions: dict[str, list[tuple[int, int]]], windows: Windows, count: int,
                labels: tuple, path: Path) -> list[Row]:
    """``windows.background * count`` seeded windows, at most half N, centred at least ``windows.distance``
    bp from every region (chromosomes drawn by length); an InputError when the genome has no room."""
    wanted = windows.background * count
    if wanted == 0:
        return []
    sizes = genome.chromosomes
    names = list(sizes)
    weights = np.array([sizes[n] for n in names], dtype=np.float64)
    rng = np.random.default_rng(windows.seed)
    spans = {name: _Spans(regions.get(name, [])) for name in names}
    rows, tries = [], 0
    while len(rows) < wanted:
        tries += 1
        if tries > 1000 * wanted:
            raise InputError(path, f"found {len(rows)} of {wanted} background windows {windows.distance} bp from "
                             "every region", hint="lower --background or --background-distance")
        chrom = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        centre = int(rng.integers(0, sizes[chrom]))
        if spans[chrom].near(centre, windows.distance):
            continue
        sequence = _window(genome, chrom, centre, windows.window)
        if sequence.count("N") * 2 > len(sequence):
            continue
        rows.append(Row(f"background:{chrom}:{centre}", sequence, labels, (path, 0), chrom=chrom))
    return rows


class _Spans:
    """Regions of one chromosome, sorted by start, with the running maximum of their ends."""

    def __init__(self, spans: list[tuple[int, int]]):
        spans = sorted(spans)
        self.starts = [start for start, _ in spans]
        self.max_end = np.maximum.accumulate([end for _, end in spans]) if spans else np.zeros(0, np.int64)

    def near(self, position: int, distance: int) -> bool:
        """Whether ``position`` lies within ``distance`` bp of a region: some region starts at most
        ``distance`` after it and ends less than ``distance`` before it."""
        index = bisect.bisect_right(self.starts, position + distance)
        return index > 0 and self.max_end[index - 1] + distance > position
