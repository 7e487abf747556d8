"""Streaming, batched inference over FASTA records, in windows; memory bounded by the largest record
plus one batch: :func:`iter_windows` cuts records into model inputs, :func:`score_windows` scores
them in batches, in order, :func:`group_by_record` regroups them lazily per record and
:class:`RegionMerger` merges a record's high-scoring windows into regions. Held-out sets are scored
in memory the same way (:func:`best_window_probabilities`: a record's score is its best window's).

A scorer is anything with ``probabilities(sequences) -> (B, C)`` and ``info``: a
:class:`~genolong.classifier.directory.Classifier` or a ``StrandAveraged`` one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from genolong.core.errors import UserError
from genolong.dna.sequence import FastaRecord

#: A window with a larger fraction of bases other than A, C, G, T is not scored (``genolong scan``'s default).
MAX_N_FRACTION = 0.5


@dataclass(frozen=True)
class Window:
    """One model input: ``sequence = record[start:end]``; ``record`` is the record's ordinal and
    ``windows`` the number of windows of that record that are scored."""

    record: int
    name: str
    record_length: int
    start: int
    end: int
    sequence: str
    windows: int


@dataclass(frozen=True)
class Skipped:
    """A record that cannot be scored, and why; it has no windows."""

    record: int
    name: str
    record_length: int
    error: str
    windows: int = 0


def window_starts(length: int, window: int, stride: int) -> list[int]:
    """Starts of the scanning windows of a record of ``length`` bp: ``[0]`` when it fits in one window;
    else ``0, stride, 2 * stride, ...`` while the window fits, then ``length - window`` if not yet there."""
    if window < 1 or stride < 1:
        raise UserError(f"window and stride must be positive, got window={window}, stride={stride}")
    if length <= window:
        return [0]
    starts = list(range(0, length - window + 1, stride))
    if starts[-1] != length - window:
        starts.append(length - window)
    return starts


def check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise UserError(f"batch size must be positive, got {batch_size}")


def check_stride(stride: int, window: int) -> None:
    """Refuse windows ``stride`` bp apart that leave bases between them unread (a stride above the window)."""
    if stride > window:
        raise UserError(f"--stride {stride} is larger than the model's window of {window} bp: "
                        "bases between windows would never be scored")


def record_stride(window: int) -> int:
    """The default bp between the windows of a record longer than the model's window: half the window."""
    return max(1, window // 2)


def record_windows(sequences: Sequence[str], window: int, stride: int) -> tuple[list[str], np.ndarray]:
    """Every scanning window of every sequence, in order, and the index (W,) int64 of its sequence."""
    pairs = [(sequence[start : start + window], index) for index, sequence in enumerate(sequences)
             for start in window_starts(len(sequence), window, stride)]
    return [w for w, _ in pairs], np.array([i for _, i in pairs], dtype=np.int64)


def best_window_probabilities(scorer, sequences: Sequence[str], batch_size: int, window: int,
                              stride: int | None = None) -> np.ndarray:
    """Each sequence's probabilities (N, C) as the prediction table reports them: a longer sequence than
    ``window`` gets its best window's per class, windows ``stride`` bp apart (default: half a window)."""
    windows, record = record_windows(sequences, window, record_stride(window) if stride is None else stride)
    return best_per_record(predict_all(scorer, windows, batch_size), record, len(sequences))


def best_per_record(values: np.ndarray, record: np.ndarray, n_records: int) -> np.ndarray:
    """The largest of each record's window ``values``: ``values`` (W, ...), ``record`` (W,) with
    every index below ``n_records`` present -> (n_records, ...)."""
    best = np.full((n_records, *values.shape[1:]), -np.inf, dtype=values.dtype)
    np.maximum.at(best, record, values)
    return best


def mostly_called(sequence: str) -> bool:
    """Whether at most :data:`MAX_N_FRACTION` of ``sequence`` (upper case) is N or another ambiguous code."""
    called = sum(sequence.count(base) for base in "ACGT")
    return len(sequence) - called <= MAX_N_FRACTION * len(sequence)


def iter_windows(records: Iterable[FastaRecord], window: int, stride: int,
                 min_length: int) -> Iterator[Window | Skipped]:
    """The model inputs of ``records`` (upper-case), record by record: windows ``stride`` bp apart plus
    one flush with the end; a record shorter than ``min_length`` or without a window at most
    :data:`MAX_N_FRACTION` N is :class:`Skipped` with the reason."""
    check_stride(stride, window)
    for ordinal, record in enumerate(records):
        length = len(record.sequence)
        if length < min_length:
            yield Skipped(ordinal, record.name, length,
                          f"shorter than the model's minimum of {min_length} bp")
            continue
        starts = window_starts(length, window, stride)
        kept = np.fromiter((mostly_called(record.sequence[start : start + window]) for start in starts),
                           dtype=bool, count=len(starts))  # (len(starts),)
        count = int(kept.sum())
        if not count:
            yield Skipped(ordinal, record.name, length, f"every window is more than {MAX_N_FRACTION:.0%} N")
            continue
        for start in itertools.compress(starts, kept):
            end = min(start + window, length)
            yield Window(ordinal, record.name, length, start, end, record.sequence[start:end], count)


def score_windows(items: Iterable[Window | Skipped], scorer, batch_size: int, *,
                  progress=None) -> Iterator[tuple[Window | Skipped, np.ndarray | None]]:
    """``(item, probabilities (C,))`` for each :func:`iter_windows` item in order (None for a
    :class:`Skipped` one), ``batch_size`` windows per model call; ``progress`` (tqdm-like) counts windows."""
    check_batch_size(batch_size)
    pending: list[Window | Skipped] = []

    def flush() -> Iterator[tuple[Window | Skipped, np.ndarray | None]]:
        windows = [item for item in pending if isinstance(item, Window)]
        scores = iter(scorer.probabilities([w.sequence for w in windows]) if windows else [])
        for item in pending:
            yield item, next(scores) if isinstance(item, Window) else None
        if progress is not None:
            progress.update(len(windows))
        pending.clear()

    scored = 0
    for item in items:
        pending.append(item)
        scored += isinstance(item, Window)
        if scored == batch_size:
            yield from flush()
            scored = 0
    if pending:
        yield from flush()


def group_by_record(scored: Iterable[tuple[Window | Skipped, np.ndarray | None]]):
    """Regroup :func:`score_windows` output lazily: ``(first item, pairs)`` per record, ``pairs`` its
    ``(item, probabilities)`` (the first included), to consume before the next record (nothing is held)."""
    for _, group in itertools.groupby(scored, key=lambda pair: pair[0].record):
        first = next(group)
        yield first[0], itertools.chain([first], group)  # noqa: B031 (each group is read once, in order)


class RegionMerger:
    """Merge the windows of one record that score at least ``threshold`` and overlap or touch into
    ``(start, end, best probability)`` regions: :meth:`add` windows by start returns the regions it
    closed, :meth:`close` the last one."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.open: list | None = None

    def add(self, start: int, end: int, probability: float) -> list[tuple[int, int, float]]:
        if probability < self.threshold:
            return []
        if self.open is not None and start <= self.open[1]:
            self.open[1] = max(self.open[1], end)
            self.open[2] = max(self.open[2], probability)
            return []
        closed = self.close()
        self.open = [start, end, probability]
        return closed

    def close(self) -> list[tuple[int, int, float]]:
        closed = [] if self.open is None else [tuple(self.open)]
        self.open = None
        return closed


def predict_all(scorer, sequences: Iterable[str], batch_size: int, *, progress=None) -> np.ndarray:
    """Probabilities (N, C) of every sequence, each one model input, in batches of ``batch_size``."""
    check_batch_size(batch_size)
    chunks = []
    iterator = iter(sequences)
    while batch := list(itertools.islice(iterator, batch_size)):
        chunks.append(scorer.probabilities(batch))
        if progress is not None:
            progress.update(len(batch))
    if not chunks:
        raise UserError("nothing to score: no sequences")
    return np.concatenate(chunks)
