"""The tables of a FASTA prediction run (``genolong promoter predict``, ``genolong chromatin predict``):
TSV rows per record or window and BED regions, written as the scored records stream in.

The writers take the stream of :func:`genolong.inference.predict.loop.score_records`: one
``(first, pairs)`` per record, where ``first`` is the record's first :class:`~genolong.classifier.records.Window`
or its :class:`~genolong.classifier.records.Skipped` reason, and ``pairs`` yields ``(window, probabilities (C,))``.
Probabilities are written with 4 decimals; a skipped record gets one row with its reason in ``error``.
Every row starts with ``record``, the 1-based position of its record in the FASTA: ids may repeat
(a header's first word), the ordinal joins a row back to its record.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from genolong.classifier.records import RegionMerger, Skipped
from genolong.core.files import atomic_path

PROMOTER_COLUMNS = ("record", "id", "length", "windows", "probability", "label", "error")
WINDOW_COLUMNS = ("record", "id", "start", "end", "probability", "label")
CHROMATIN_FIXED_COLUMNS = ("record", "id", "length", "start", "end")
#: What the ``record`` column holds, for the tables' header comment and ``--help``.
RECORD_COLUMN = "record: 1-based position of the record in the FASTA"


@dataclass
class PredictionCounts:
    """What a prediction run wrote: records read, windows scored, records too short to score, and (promoter
    models) records whose best window reaches the threshold, the bp of the records scored and the bp of
    their called regions (the ``--bed`` regions)."""

    records: int = 0
    windows: int = 0
    skipped: int = 0
    promoters: int = 0
    scored_bp: int = 0
    called_bp: int = 0


@contextlib.contextmanager
def open_outputs(*paths: Path | None) -> Iterator[list[TextIO]]:
    """A text handle per path, each written under a temporary name and renamed into place when the block
    ends without error; ``None`` (or ``-``) is standard output."""
    with contextlib.ExitStack() as stack:
        handles = []
        for path in paths:
            if path is None or str(path) == "-":
                handles.append(sys.stdout)
            else:
                handles.append(stack.enter_context(open(stack.enter_context(atomic_path(path)), "w")))
        yield handles


def _cell(value: float) -> str:
    return f"{value:.4f}"


def _write_regions(bed: TextIO, name: str, regions: list[tuple[int, int, float]], strand: str) -> None:
    bed.writelines(f"{name}\t{start}\t{end}\tpromoter\t{round(1000 * score)}\t{strand}\n"
                   for start, end, score in regions)


def _scored(records: Iterable, counts: PredictionCounts, out: TextIO, skipped_cells: str) -> Iterator:
    """The scored records of ``records``; each record is counted, and a skipped one gets its row in ``out``:
    record (1-based), id, length, ``skipped_cells`` (the tab-separated cells between length and error), its
    reason."""
    for first, pairs in records:
        counts.records += 1
        if isinstance(first, Skipped):
            counts.skipped += 1
            out.write(f"{first.record + 1}\t{first.name}\t{first.record_length}{skipped_cells}{first.error}\n")
            continue
        yield first, pairs


def write_promoter_tables(records: Iterable, threshold: float, header: str, out: TextIO, *,
                          windows: TextIO | None = None, bed: TextIO | None = None,
                          strand: str = "+") -> PredictionCounts:
    """One row per record in ``out`` (the best window's probability and label), one per window in
    ``windows``, and the merged windows at or above ``threshold`` as BED6 lines (score = 1000 x probability)
    in ``bed``. ``header`` (``#`` comment lines naming the model) opens both tables, followed by a comment
    line saying what ``record`` holds."""
    header += f"# {RECORD_COLUMN}\n"
    counts = PredictionCounts()
    out.write(header + "\t".join(PROMOTER_COLUMNS) + "\n")
    if windows:
        windows.write(header + "\t".join(WINDOW_COLUMNS) + "\n")
    for first, pairs in _scored(records, counts, out, "\t0\t\t\t"):  # 0 windows, no probability or label
        scored, best, regions = 0, 0.0, RegionMerger(threshold)
        for window, probabilities in pairs:
            score = float(probabilities[0])
            scored, best = scored + 1, max(best, score)
            if windows:
                windows.write(f"{window.record + 1}\t{window.name}\t{window.start}\t{window.end}\t{_cell(score)}\t{int(score >= threshold)}\n")
            closed = regions.add(window.start, window.end, score)
            counts.called_bp += sum(end - start for start, end, _ in closed)
            if bed:
                _write_regions(bed, first.name, closed, strand)
        closed = regions.close()
        counts.called_bp += sum(end - start for start, end, _ in closed)
        if bed:
            _write_regions(bed, first.name, closed, strand)
        counts.windows += scored
        counts.scored_bp += first.record_length
        counts.promoters += best >= threshold
        out.write(f"{first.record + 1}\t{first.name}\t{first.record_length}\t{scored}\t{_cell(best)}\t{int(best >= threshold)}\t\n")
    return counts


def write_chromatin_table(records: Iterable, label_names: list[str], out: TextIO) -> PredictionCounts:
    """One row per window: record (1-based), id, record length, start, end, one probability per profile in
    ``label_names``, then error (a skipped record's reason, with empty probabilities)."""
    counts = PredictionCounts()
    out.write("\t".join((*CHROMATIN_FIXED_COLUMNS, *label_names, "error")) + "\n")
    for _, pairs in _scored(records, counts, out, "\t\t\t" + "\t" * len(label_names)):  # no start, end, probabilities
        for window, probabilities in pairs:
            counts.windows += 1
            cells = "\t".join(map(_cell, probabilities))
            out.write(f"{window.record + 1}\t{window.name}\t{window.record_length}\t{window.start}\t{window.end}\t{cells}\t\n")
    return counts
