"""The scan's work directory: per-rank, per-chromosome score files, their merge, and resume.

Layout of ``WORK`` (beside the output, named after it and the run's fingerprint)::

    00003.rank1of2.f32    rank 1's scores of chromosome 3 (its batches b = 1 mod 2, in order),
                          renamed from ``.tmp`` when the rank has written its last batch there
    00003.f32             chromosome 3, all bins in order: (bins, C) float32, NaN = skipped

A chromosome is *finished* (never recomputed) when its merged file exists, or when every rank with
batches on it has renamed its part. The merge only reorders batches: the same bytes on any number of ranks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from genolong.inference.scan.plan import ScanPlan


class WorkDirectory:
    """Score files of one scan in the directory ``path`` (created): ``columns`` (C) scores per bin,
    ``world_size`` ranks."""

    def __init__(self, path: Path, plan: ScanPlan, columns: int, world_size: int):
        self.path, self.plan, self.columns, self.world_size = path, plan, columns, world_size
        path.mkdir(parents=True, exist_ok=True)

    def merged_path(self, chromosome: int) -> Path:
        return self.path / f"{chromosome:05d}.f32"

    def rank_path(self, chromosome: int, rank: int) -> Path:
        return self.path / f"{chromosome:05d}.rank{rank}of{self.world_size}.f32"

    def rank_batches(self, chromosome: int, rank: int) -> list[int]:
        return [b for b in self.plan.batch_range(chromosome) if b % self.world_size == rank]

    def finished(self, chromosome: int) -> bool:
        return self.merged_path(chromosome).is_file() or all(
            self.rank_path(chromosome, rank).is_file() or not self.rank_batches(chromosome, rank)
            for rank in range(self.world_size))

    def pending(self) -> list[int]:
        return [i for i in range(len(self.plan.chromosomes)) if not self.finished(i)]

    def merge(self, chromosome: int) -> None:
        """Write a finished chromosome's merged file from its rank parts (no-op when present)."""
        target = self.merged_path(chromosome)
        if target.is_file():
            return
        plan, width = self.plan, self.columns
        sources = {rank: read_scores(self.rank_path(chromosome, rank), width)
                   for rank in range(self.world_size) if self.rank_batches(chromosome, rank)}
        offsets = dict.fromkeys(sources, 0)
        tmp = target.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            for index in plan.batch_range(chromosome):
                batch = plan.batch(index)
                rank, rows = index % self.world_size, batch.hi - batch.lo
                out.write(sources[rank][offsets[rank] : offsets[rank] + rows].tobytes())
                offsets[rank] += rows
        tmp.replace(target)
        for rank in sources:
            self.rank_path(chromosome, rank).unlink()

    def scores(self, chromosome: int) -> np.ndarray:
        """A finished chromosome's (bins, C) float32 scores, memory-mapped."""
        return read_scores(self.merged_path(chromosome), self.columns)


class RankWriter:
    """Appends one rank's batch scores to its chromosome parts, in batch order."""

    def __init__(self, work: WorkDirectory, rank: int):
        self.work, self.rank = work, rank
        self.chromosome, self.handle = None, None

    def write(self, batch_index: int, scores: np.ndarray) -> None:
        """Scores (bins, C) float32 of the plan's batch ``batch_index``."""
        chromosome = self.work.plan.batch(batch_index).chromosome
        if chromosome != self.chromosome:
            self.close()
            self.chromosome = chromosome
            part = self.work.rank_path(chromosome, self.rank).with_suffix(".tmp")
            self.handle = open(part, "wb")  # noqa: SIM115 (open across batches; closed by write/close)
        self.handle.write(np.ascontiguousarray(scores, dtype=np.float32).tobytes())
        if batch_index == self.work.rank_batches(chromosome, self.rank)[-1]:
            self.handle.close()
            final = self.work.rank_path(chromosome, self.rank)
            final.with_suffix(".tmp").replace(final)
            self.chromosome, self.handle = None, None

    def close(self) -> None:
        """Drop an unfinished part (an interrupted chromosome is recomputed)."""
        if self.handle is not None:
            self.handle.close()
            self.work.rank_path(self.chromosome, self.rank).with_suffix(".tmp").unlink(missing_ok=True)
            self.chromosome, self.handle = None, None


def read_scores(path: Path, columns: int) -> np.ndarray:
    """A score file as a (rows, columns) float32 memory map (read on demand: constant memory)."""
    if path.stat().st_size == 0:
        return np.zeros((0, columns), dtype=np.float32)
    return np.memmap(path, dtype=np.float32, mode="r").reshape(-1, columns)
