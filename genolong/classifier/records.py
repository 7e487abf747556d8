"""Streaming, batched inference over FASTA records, in windows.

One pass over the file, memory bounded by the largest record plus one batch:

1. :func:`iter_windows` cuts each record into model inputs. A record no longer than the
   model window is one input; a longer one is scanned with windows of ``window`` bp every
   ``stride`` bp, plus a last window flush with the record's end so that its tail is scored.
   A window more than :data:`MAX_N_FRACTION` N (or another ambiguous code) is not scored, as
   ``genolong scan`` skips it. A record shorter than ``min_length``, or without a window to
   score, becomes a :class:`Skipped` item carrying the reason.
2. :func:`score_windows` runs the model on batches of windows and yields every item with
   its probabilities, in input order (skipped items pass through unscored).
3. :func:`group_by_record` regroups the scored windows per record, lazily, for the writers;
   :class:`RegionMerger` merges a record's high-scoring windows into regions as they come.

Held-out sets are scored the same way in memory (:func:`best_window_probabilities`): a record's
score is its best window's, as in the per-record prediction table.

Any scorer with ``probabilities(sequences) -> (B, C)`` and ``info`` works: a
:class:`~genolong.classifier.directory.Classifier` or a :class:`~genolong.classifier.directory.StrandAveraged` one.
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
    """Starts of the scanning windows of a record of ``length`` bp.

    ``[0]`` when the record fits in one window; else ``0, stride, 2 * stride, ...`` while the
    window fits, and ``length - window`` last when the stride does not land on it.
    """
    if window < 1 or stride < 1:
        raise UserError(f"window and stride must be positive, got window={window}, stride={stride}")
    if length <= window:
        return [0]
    starts = list(range(0, length - window + 1, stride))
    if starts[-1] != length - window:
        starts.append(length - window)
    return starts


def check_stride(stride: int, window: int) -> None:
    """Refuse windows ``stride`` bp apart that leave bases between them unread (a stride above the window)."""
    if stride > window:
        raise UserError(f"--stride {stride} is larger than the model's window of {window} bp: "
                        "bases between windows would never be scored")


def record_stride(window: int) -> int:
    """The default bp between the windows a record longer than the model's window is read in
    (predict, fine-tuning validation, evaluation): half the window."""
    return max(1, window // 2)


def record_windows(sequences: Sequence[str], window: int, stride: int) -> tuple[list[str], np.ndarray]:
    """Every scanning window of every sequence (:func:`window_starts`), in order, and the index
    of the sequence each one comes from: ``(windows, record)``, ``record`` shape ``(W,)`` int64."""
    windows, record = [], []
    for index, sequence in enumerate(sequences):
        for start in window_starts(len(sequence), window, stride):
            windows.append(sequence[start : start + window])
            record.append(index)
    return windows, np.array(record, dtype=np.int64)


def best_window_probabilities(
    scorer, sequences: Sequence[str], batch_size: int, window: int, stride: int | None = None
) -> np.ndarray:
    """Each sequence's probabilities as the prediction table reports them, shape (N, C): a
    sequence no longer than ``window`` is one input; a longer one is scanned in windows
    ``stride`` bp apart (default :func:`record_stride`) and gets its best window's
    probability per class. Evaluation sets scored this way measure what a user's
    ``predict-promoter`` run on the same records would report.
    """
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


def iter_windows(
    records: Iterable[FastaRecord], window: int, stride: int, min_length: int
) -> Iterator[Window | Skipped]:
    """The model inputs of ``records`` (``name`` and upper-case ``sequence``), record by record (see
    the module docstring); a ``stride`` above the ``window`` is refused (:func:`check_stride`)."""
    check_stride(stride, window)
    for ordinal, record in enumerate(records):
        length = len(record.sequence)
        if length < min_length:
            yield Skipped(
                ordinal, record.name, length, f"shorter than the model's minimum of {min_length} bp"
            )
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


def score_windows(
    items: Iterable[Window | Skipped], scorer, batch_size: int, *, progress=None
) -> Iterator[tuple[Window | Skipped, np.ndarray | None]]:
    """``(item, probabilities (C,))`` for each item in order; ``None`` for a :class:`Skipped` one.

    Args:
        items: from :func:`iter_windows`.
        scorer: ``probabilities(list[str]) -> (B, C)``.
        batch_size: windows per model call.
        progress: optional tqdm-like object, advanced by one per window.
    """
    if batch_size < 1:
        raise UserError(f"batch size must be positive, got {batch_size}")
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
    """Regroup :func:`score_windows` output lazily, record by record.

    Yields ``(first item, pairs)`` per record, where ``pairs`` iterates over that record's
    ``(item, probabilities)`` (the first included). Like :func:`itertools.groupby`, consume
    ``pairs`` before moving to the next record; nothing is held, so a chromosome-long record
    scanned in millions of windows takes no more memory than one batch.
    """
    for _, group in itertools.groupby(scored, key=lambda pair: pair[0].record):
        first = next(group)
        yield first[0], itertools.chain([first], group)  # noqa: B031 (each group is read once, in order)


class RegionMerger:
    """Merge the windows of one record that score at least ``threshold`` and overlap or touch.

    Feed windows in order of start with :meth:`add`; each call returns the regions it closed,
    :meth:`close` the last one. Regions are ``(start, end, best probability)``.
    """

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
    """Probabilities of every sequence, shape (N, C), in batches of ``batch_size``.

    Each sequence is one model input, scanned in no windows (see :func:`best_window_probabilities`).
    """
    if batch_size < 1:
        raise UserError(f"batch size must be positive, got {batch_size}")
    chunks = []
    iterator = iter(sequences)
    while batch := list(itertools.islice(iterator, batch_size)):
        chunks.append(scorer.probabilities(batch))
        if progress is not None:
            progress.update(len(batch))
    if not chunks:
        raise UserError("nothing to score: no sequences")
    return np.concatenate(chunks)
