"""``predict-promoter`` / ``chromatin predict`` / ``task predict`` over FASTA records, on one process or many ranks.

One process streams as :mod:`genolong.classifier.records` does. On several ranks every rank cuts the FASTA
into the same batches of windows, rank ``r`` of ``W`` appends the (B, C) float32 probabilities of batches
``b % W == r`` to ``rank{r}.f32`` beside the output, and rank 0 replays them in batch order
(:class:`ReplayedScorer`): the writers see the one-process stream. A stopped run starts again.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

from genolong.classifier.records import Window, group_by_record, iter_windows, score_windows
from genolong.dna.sequence import FastaRecord
from genolong.inference.loop import PartWriter, StepModule, predict
from genolong.inference.scan.parts import read_scores


class WindowBatches(torch.utils.data.IterableDataset):
    """This rank's batches of windows: ``{"batch": b, "sequences": [...]}`` (``batch`` -1: the empty item)."""

    def __init__(self, windows, batch_size: int, rank: int, world_size: int):
        super().__init__()
        self.windows, self.batch_size, self.rank, self.world_size = windows, batch_size, rank, world_size

    def __iter__(self):
        windows = (item for item in self.windows() if isinstance(item, Window))
        mine = 0
        for index, batch in enumerate(iter(lambda: list(itertools.islice(windows, self.batch_size)), [])):
            if index % self.world_size == self.rank:
                mine += 1
                yield {"batch": index, "sequences": [window.sequence for window in batch]}
        if not mine:
            yield {"batch": -1, "sequences": []}


class RankFileWriter(PartWriter):
    """Appends this rank's batch probabilities to ``rank{r}.f32``; rank 0 empties the parts directory."""

    def __init__(self, folder: Path, *, progress: bool, description: str):
        super().__init__(None, progress=progress, description=description, unit=" windows")
        self.folder, self.handle = folder, None

    def setup(self, trainer, pl_module, stage: str) -> None:
        if trainer.global_rank == 0:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
        trainer.strategy.barrier("prediction parts")

    def open(self, trainer) -> None:
        self.handle = open(self.folder / f"rank{trainer.global_rank}.f32", "wb")  # noqa: SIM115 (closed by close)

    def write(self, prediction: tuple[int, np.ndarray | None]) -> int:
        index, probabilities = prediction
        if index < 0:
            return 0
        self.handle.write(np.ascontiguousarray(probabilities, dtype=np.float32).tobytes())
        return len(probabilities)

    def close(self, finished: bool) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class ReplayedScorer:
    """Stands in for the model on rank 0: each call returns the next batch's (B, C) probabilities from the
    rank files (batch ``b`` from rank ``b % W``)."""

    def __init__(self, folder: Path, world_size: int, columns: int):
        self.sources = [read_scores(folder / f"rank{rank}.f32", columns) for rank in range(world_size)]
        self.offsets = [0] * world_size
        self.batch = 0

    def probabilities(self, sequences: list[str]) -> np.ndarray:
        rank = self.batch % len(self.sources)
        start = self.offsets[rank]
        rows = np.asarray(self.sources[rank][start : start + len(sequences)])
        if len(rows) != len(sequences):
            raise RuntimeError(f"rank {rank} wrote {len(rows)} rows for batch {self.batch} of {len(sequences)}")
        self.offsets[rank] += len(sequences)
        self.batch += 1
        return rows


def score_records(records: Callable[[], Iterable[FastaRecord]], name: str, scorer, *, window: int, stride: int,
                  min_length: int, batch_size: int, trainer: pl.Trainer | None, parts: Path | None,
                  progress) -> Iterator | None:
    """The records ``records()`` yields, windowed, scored by ``scorer`` (``probabilities(sequences) -> (B,
    C)``) and grouped by record; None on ranks other than 0. ``trainer`` None scores in this process, lazily,
    with the bar ``progress``; else the ranks share the batches through the directory ``parts``."""

    def windows():
        return iter_windows(records(), window, stride, min_length)

    if trainer is None:
        return _grouped(windows, scorer, batch_size, progress=progress)
    rank, world = trainer.global_rank, trainer.world_size
    loader = torch.utils.data.DataLoader(WindowBatches(windows, batch_size, rank, world), batch_size=None)
    writer = RankFileWriter(parts, progress=progress is not None, description=name)
    try:
        module = StepModule(lambda batch: (batch["batch"], scorer.probabilities(batch["sequences"])
                                           if batch["sequences"] else None))  # (b, (B, C) probabilities)
        predict(trainer, module, loader, writer, resume="run the same command again")
        if world > 1:
            trainer.strategy.barrier("prediction parts written")
    except BaseException:
        shutil.rmtree(parts, ignore_errors=True)
        raise
    if rank != 0:
        return None
    return _grouped(windows, ReplayedScorer(parts, world, len(scorer.info.label_names)), batch_size, parts=parts)


def _grouped(windows, scorer, batch_size: int, *, progress=None, parts: Path | None = None) -> Iterator:
    """The scored windows grouped by record; at the end the bar is closed and the parts directory removed."""
    try:
        yield from group_by_record(score_windows(windows(), scorer, batch_size, progress=progress))
    finally:
        if progress is not None:
            progress.close()
        if parts is not None:
            shutil.rmtree(parts, ignore_errors=True)
