"""The tables of a prediction run, written as the scored records stream in: one ``(first, pairs)`` per
record (:func:`genolong.inference.predict.loop.score_records`), ``first`` its first
:class:`~genolong.classifier.records.Window` or :class:`~genolong.classifier.records.Skipped` reason,
``pairs`` its ``(window, probabilities (C,))``. Every table starts with :data:`RECORD_COLUMNS`; values have
4 decimals (task tables: 6 significant digits); a skipped record gets one row with its reason in ``error``.
"""

from __future__ import annotations

import contextlib
import csv
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from genolong.classifier.records import RegionMerger, Skipped, Window
from genolong.core.files import atomic_path

#: The first columns of every prediction table.
RECORD_COLUMNS = ("record", "id", "length", "windows")
PROMOTER_COLUMNS = (*RECORD_COLUMNS, "probability", "label", "error")
#: The first columns of the tables of one row per window (``chromatin predict``, ``predict-promoter --windows``).
WINDOW_COLUMNS = (*RECORD_COLUMNS, "start", "end")
#: What the ``record`` column holds, for the tables' header comment and ``--help``.
RECORD_COLUMN = "record: 1-based position of the record in the FASTA"


def record_cells(item: Window | Skipped) -> list[str]:
    """The :data:`RECORD_COLUMNS` cells of ``item``'s record: its 1-based position in the input (ids may
    repeat), id, length (bp) and number of windows scored."""
    return [str(item.record + 1), item.name, str(item.record_length), str(item.windows)]


class Table:
    """Rows of cells into ``handle``: tab-separated, or CSV (quoted where needed) with ``comma``."""

    def __init__(self, handle: TextIO, *, comma: bool = False):
        self.handle = handle
        self.csv = csv.writer(handle, lineterminator="\n") if comma else None

    @classmethod
    def for_path(cls, handle: TextIO, path: Path | None) -> Table:
        """The table of ``path``: CSV when it ends in ``.csv``, else tab-separated (standard output too)."""
        return cls(handle, comma=path is not None and Path(path).suffix.lower() == ".csv")

    def row(self, cells: Sequence[str]) -> None:
        if self.csv is None:
            self.handle.write("\t".join(cells) + "\n")
        else:
            self.csv.writerow(cells)


@dataclass
class PredictionCounts:
    """What a prediction run wrote; for promoter models also the records whose best window reaches the
    threshold, the bp scored and the bp of the called regions (the ``--bed`` regions)."""

    records: int = 0
    windows: int = 0
    skipped: int = 0
    promoters: int = 0
    scored_bp: int = 0
    called_bp: int = 0


@contextlib.contextmanager
def open_outputs(*paths: Path | None) -> Iterator[list[TextIO]]:
    """A text handle per path, each written atomically when the block ends without error; ``None`` or ``-``
    is standard output."""
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


def _scored(records: Iterable, counts: PredictionCounts, out: Table, empty: int) -> Iterator:
    """The scored records of ``records``, each counted; a skipped one gets its row in ``out`` instead, with
    ``empty`` empty cells before its reason."""
    for first, pairs in records:
        counts.records += 1
        if isinstance(first, Skipped):
            counts.skipped += 1
            out.row([*record_cells(first), *[""] * empty, first.error])
            continue
        yield first, pairs


def write_promoter_tables(records: Iterable, threshold: float, header: str, out: Table, *,
                          windows: Table | None = None, bed: TextIO | None = None,
                          strand: str = "+") -> PredictionCounts:
    """One row per record in ``out`` (the best window's probability and label), one per window in
    ``windows``, and the merged windows at or above ``threshold`` as BED6 lines (score = 1000 x probability)
    in ``bed``. ``header`` (``#`` lines naming the model) opens both tables."""
    header += f"# {RECORD_COLUMN}\n"
    counts = PredictionCounts()
    out.handle.write(header)
    out.row(PROMOTER_COLUMNS)
    if windows:
        windows.handle.write(header)
        windows.row((*WINDOW_COLUMNS, "probability", "label"))
    def called(name: str, closed: list[tuple[int, int, float]]) -> None:
        counts.called_bp += sum(end - start for start, end, _ in closed)
        if bed:
            bed.writelines(f"{name}\t{start}\t{end}\tpromoter\t{round(1000 * score)}\t{strand}\n"
                           for start, end, score in closed)

    for first, pairs in _scored(records, counts, out, 2):  # no probability or label
        best, regions = 0.0, RegionMerger(threshold)
        for window, probabilities in pairs:
            score = float(probabilities[0])
            best = max(best, score)
            if windows:
                windows.row([*record_cells(window), str(window.start), str(window.end), _cell(score),
                             str(int(score >= threshold))])
            called(first.name, regions.add(window.start, window.end, score))
        called(first.name, regions.close())
        counts.windows += first.windows
        counts.scored_bp += first.record_length
        counts.promoters += best >= threshold
        out.row([*record_cells(first), _cell(best), str(int(best >= threshold)), ""])
    return counts


def write_chromatin_table(records: Iterable, label_names: list[str], out: Table) -> PredictionCounts:
    """One row per window: :data:`WINDOW_COLUMNS`, one probability per profile in ``label_names``, error."""
    counts = PredictionCounts()
    out.row((*WINDOW_COLUMNS, *label_names, "error"))
    for _, pairs in _scored(records, counts, out, 2 + len(label_names)):
        for window, probabilities in pairs:
            counts.windows += 1
            out.row([*record_cells(window), str(window.start), str(window.end), *map(_cell, probabilities), ""])
    return counts


def write_record_table(records: Iterable, label_names: list[str], out: Table) -> PredictionCounts:
    """One row per record: :data:`RECORD_COLUMNS`, each output's best window's value (as fine-tuning
    validation scores a record: :func:`~genolong.classifier.records.best_per_record`), error."""
    counts = PredictionCounts()
    out.row((*RECORD_COLUMNS, *label_names, "error"))
    for first, pairs in _scored(records, counts, out, len(label_names)):
        best = np.full(len(label_names), -np.inf, dtype=np.float32)  # (C,)
        for _, probabilities in pairs:
            best = np.maximum(best, probabilities)
        counts.windows += first.windows
        out.row([*record_cells(first), *(f"{value:.6g}" for value in best), ""])
    return counts
