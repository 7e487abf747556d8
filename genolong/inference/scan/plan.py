"""What a scan covers: chromosomes or BED regions, cut into bins of ``stride`` bp, one window per bin.

Bin ``k`` of a target ``[a, b)`` is ``[a + k*stride, min(a + (k+1)*stride, b))``, scored by the window
centred on it, moved inside the chromosome at its ends (user guide, prediction, "What a value means").
The bins of each chromosome are split into batches of ``batch_bins`` (never across chromosomes), numbered
over the plan: the unit of work ranks share.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.classifier.records import check_stride
from genolong.core.errors import UserError
from genolong.inference.bed import read_bed_regions


@dataclass(frozen=True)
class ChromosomePlan:
    """The bins of one chromosome of ``length`` bp: ``segments`` (S, 2) int64, the target intervals
    ``[start, end)``, sorted, disjoint; ``first_bin`` (S + 1,) int64, each segment's first bin (``[-1]``:
    bins); ``first_batch``, its first batch in the plan."""

    name: str
    length: int
    segments: np.ndarray
    first_bin: np.ndarray
    first_batch: int

    @property
    def bins(self) -> int:
        return int(self.first_bin[-1])

    @property
    def target_bp(self) -> int:
        return int((self.segments[:, 1] - self.segments[:, 0]).sum())


@dataclass(frozen=True)
class Batch:
    """Bins ``[lo, hi)`` of chromosome ``chromosome`` (an index into the plan)."""

    index: int
    chromosome: int
    lo: int
    hi: int


class ScanPlan:
    """Chromosome plans, bins and batches; memory is O(chromosomes + regions), bins are computed on demand."""

    def __init__(self, chromosomes: list[tuple[str, int, np.ndarray]], *, window: int, stride: int,
                 batch_bins: int):
        if window < 1 or stride < 1 or batch_bins < 1:
            raise UserError(f"window, stride and batch size must be positive, got {window}, {stride}, {batch_bins}")
        check_stride(stride, window)
        self.window, self.stride, self.batch_bins = window, stride, batch_bins
        self.chromosomes: list[ChromosomePlan] = []
        first_batch = 0
        for name, length, segments in chromosomes:
            segments = np.asarray(segments, dtype=np.int64).reshape(-1, 2)
            counts = -(-(segments[:, 1] - segments[:, 0]) // stride)  # ceil
            first_bin = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            plan = ChromosomePlan(name, length, segments, first_bin, first_batch)
            self.chromosomes.append(plan)
            first_batch += -(-plan.bins // batch_bins)
        self.batches = first_batch

    @property
    def target_bp(self) -> int:
        return sum(c.target_bp for c in self.chromosomes)

    def batch_range(self, chromosome: int) -> range:
        plan = self.chromosomes[chromosome]
        return range(plan.first_batch, plan.first_batch + -(-plan.bins // self.batch_bins))

    def batch(self, index: int) -> Batch:
        starts = [c.first_batch for c in self.chromosomes]
        chromosome = int(np.searchsorted(starts, index, side="right")) - 1
        plan = self.chromosomes[chromosome]
        lo = (index - plan.first_batch) * self.batch_bins
        return Batch(index, chromosome, lo, min(lo + self.batch_bins, plan.bins))

    def bins(self, chromosome: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Starts and ends (bp) of bins ``[lo, hi)`` of a chromosome, each (hi - lo,) int64."""
        plan = self.chromosomes[chromosome]
        index = np.arange(lo, hi, dtype=np.int64)
        segment = np.searchsorted(plan.first_bin, index, side="right") - 1
        starts = plan.segments[segment, 0] + (index - plan.first_bin[segment]) * self.stride
        return starts, np.minimum(starts + self.stride, plan.segments[segment, 1])

    def window_starts(self, chromosome: int, bin_starts: np.ndarray) -> np.ndarray:
        """Start of the window scored for each bin: centred on the bin, kept inside the chromosome."""
        return centred_window_starts(self.chromosomes[chromosome].length, self.window, self.stride, bin_starts)

    def fingerprint(self) -> str:
        """A digest of the bins and batches (any change in them changes it)."""
        digest = hashlib.sha256(f"{self.window}:{self.stride}:{self.batch_bins}".encode())
        for plan in self.chromosomes:
            digest.update(f"|{plan.name}:{plan.length}:".encode())
            digest.update(plan.segments.tobytes())
        return digest.hexdigest()[:16]


def centred_window_starts(length: int, window: int, stride: int, bin_starts: np.ndarray) -> np.ndarray:
    """(B,) int64 starts of the ``window``-bp windows scored for bins of ``stride`` bp at ``bin_starts`` (B,)
    on a chromosome of ``length`` bp: centred on the bin, kept inside the chromosome."""
    centred = bin_starts + stride // 2 - window // 2
    return np.clip(centred, 0, max(length - window, 0))


def whole_chromosomes(lengths: dict[str, int]) -> list[tuple[str, int, np.ndarray]]:
    """Every listed chromosome as one target interval."""
    return [(name, length, np.array([[0, length]])) for name, length in lengths.items()]


def read_regions(path: Path, genome) -> list[tuple[str, int, np.ndarray]]:
    """Target intervals of a BED file (:func:`~genolong.inference.bed.read_bed_regions`), per chromosome in
    genome order, sorted, overlapping or touching ones merged (every base is scored once)."""
    lengths = genome.chromosomes
    by_chromosome: dict[str, list[tuple[int, int]]] = {}
    for region in read_bed_regions(path, genome):
        by_chromosome.setdefault(region.chrom, []).append((region.start, region.end))
    return [(name, lengths[name], merge_intervals(by_chromosome[name])) for name in lengths if name in by_chromosome]


def merge_intervals(intervals: list[tuple[int, int]]) -> np.ndarray:
    """Sort half-open intervals and merge those that overlap or touch: (S, 2) int64."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return np.array(merged, dtype=np.int64)
