"""``score-variants`` in Lightning's predict loop (:mod:`genolong.inference.loop`).

The input's alleles are cut into numbered chunks of ``chunk_size``; rank ``r`` of ``W`` scores the chunks
``i % W == r`` that an earlier, interrupted run did not finish (every rank reads the whole input, but
builds windows only for its own chunks). A chunk's scores depend only on the chunk, so whichever rank
computes it writes the same bytes.
"""

from __future__ import annotations

import itertools
import warnings
from collections import Counter

import torch

from genolong.core.files import atomic_write_text
from genolong.inference.loop import PartWriter
from genolong.inference.variants.reader import SkippedAllele, Variant, VariantFile
from genolong.inference.variants.vcf_annotation import annotation_rows
from genolong.inference.variants.windows import VariantWindows, WindowBuilder

ANNOTATION_SUFFIX = ".annotations.tsv"
# one process reads the input and builds the windows: the model, not the reading, is the cost
warnings.filterwarnings("ignore", message=".*does not have many workers.*")


class Chunk:
    """Chunk ``index`` of the input (-1: the empty item): its scoreable ``windows`` and the ``counts`` of its
    alleles; a plain class, so that Lightning moves no part of it to a device."""

    def __init__(self, index: int, windows: list[VariantWindows], counts: Counter):
        self.index, self.windows, self.counts = index, windows, counts


def windows_of(chunk: list, builder: WindowBuilder, source) -> tuple[list[VariantWindows], Counter]:
    """The scoreable windows of a chunk of alleles, and the chunk's counts."""
    windows, counts = [], Counter()
    for item in chunk:
        counts["alleles"] += 1
        if isinstance(item, Variant):
            item = builder(item, source)
        if isinstance(item, SkippedAllele):
            counts[f"skipped: {item.reason}"] += 1
            continue
        counts["scored"] += 1
        counts.update(f"flagged: {flag}" for flag in item.flags)
        windows.append(item)
    return windows, counts


class VariantChunks(torch.utils.data.IterableDataset):
    """This rank's chunks not ``run.done`` (read when iterating, after rank 0 prepared the directory)."""

    def __init__(self, variants: VariantFile, builder: WindowBuilder, chunk_size: int, run, rank: int,
                 world_size: int):
        super().__init__()
        self.variants, self.builder, self.chunk_size, self.run = variants, builder, chunk_size, run
        self.rank, self.world_size, self.chunks = rank, world_size, 0

    def __iter__(self):
        alleles = iter(self.variants)
        mine = 0
        for index, chunk in enumerate(iter(lambda: list(itertools.islice(alleles, self.chunk_size)), [])):
            self.chunks = index + 1
            if index % self.world_size == self.rank and not self.run.done(index):
                mine += 1
                yield Chunk(index, *windows_of(chunk, self.builder, self.variants.path))
        if not mine:
            yield Chunk(-1, [], Counter())


class VariantPartWriter(PartWriter):
    """Writes each scored chunk into the partial directory ``run`` through ``writer`` (``write_part``), with
    its annotation rows of ``top_k`` effects (None: none), and its counts file last (then it is done)."""

    def __init__(self, run, writer, labels: list[str], top_k: int | None, *, progress: bool, description: str):
        super().__init__(None, progress=progress, description=description, unit=" variants")
        self.run, self.writer, self.labels, self.top_k = run, writer, labels, top_k

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Rank 0 keeps or clears the partial directory before any rank looks at it."""
        if trainer.global_rank == 0:
            self.run.prepare()
        trainer.strategy.barrier("variant partial directory")

    def write(self, prediction: tuple[Chunk, dict]) -> int:
        chunk, scores = prediction
        if chunk.index < 0:
            return 0
        if self.top_k is not None:
            rows = annotation_rows(chunk.windows, scores, self.labels, self.top_k)
            atomic_write_text(self.run.part(chunk.index, ANNOTATION_SUFFIX), "".join(rows))
        self.writer.write_part(self.run.part(chunk.index, self.writer.part_suffix), chunk.windows, scores)
        self.run.commit(chunk.index, chunk.counts)
        return chunk.counts["alleles"]
