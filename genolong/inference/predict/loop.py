"""``predict-promoter`` / ``chromatin predict`` / ``task predict`` over FASTA records, on one process or many ranks.

One process (the default: one device, one node) streams as :mod:`genolong.classifier.records` does, with
no Lightning and no files in between. With ``--devices N`` or ``--num-nodes M`` the windows run
in Lightning's predict loop (:mod:`genolong.inference.loop`):

1. Every rank reads the FASTA and cuts it into the same batches of ``batch_size`` windows
   (:func:`~genolong.classifier.records.score_windows`' batches); rank ``r`` of ``W`` scores the batches
   ``b % W == r`` and appends their (B, C) float32 probabilities to ``rank{r}.f32`` in a parts
   directory beside the output.
2. Rank 0 reads the FASTA again and runs :func:`~genolong.classifier.records.score_windows` with
   :class:`ReplayedScorer`, which hands back each batch's probabilities from the rank files in
   batch order: the writers see exactly the stream one process produces, so the files are the
   same bytes. The parts directory is removed when the stream ends.

A stopped run is not resumed: the same command starts again.
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
from genolong.inference.loop import PartWriter, StepModule, build_trainer, predict
from genolong.inference.scan.parts import read_scores


def ranks_trainer(accelerator: str, devices, num_nodes: int, precision: str = "auto") -> pl.Trainer | None:
    """The predict-only Trainer of a run on several ranks; None for one device on one node
    (scored in this process, as before, with ``--device``)."""
    if devices == 1 and num_nodes == 1:
        return None
    return build_trainer(accelerator=accelerator, devices=devices, num_nodes=num_nodes, callbacks=[],
                         precision=precision)


class WindowBatches(torch.utils.data.IterableDataset):
    """This rank's batches of windows: ``{"batch": b, "sequences": [...]}``; ``batch`` -1 is the empty
    item of a rank without batches."""

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
    """Appends this rank's batch probabilities, in batch order, to ``rank{r}.f32``; rank 0 empties the
    parts directory before any rank writes."""

    def __init__(self, folder: Path, *, progress: bool, description: str):
        super().__init__(None, progress=progress, description=description, unit=" windows")
        self.folder = folder
        self.handle = None

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
    """Stands in for the model on rank 0 once the ranks are done: each call returns the next batch's
    (B, C) probabilities from the rank files (batch ``b`` from rank ``b % W``)."""

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
    """The records ``records()`` yields (every rank reads them), windowed, scored and grouped
    (:func:`~genolong.classifier.records.group_by_record`).

    Args:
        name: the input's name, on progress bars.
        scorer: ``probabilities(sequences) -> (B, C)`` and ``info`` (on this rank's device).
        trainer: from :func:`ranks_trainer`; None: score in this process, lazily.
        parts: the parts directory of a run on several ranks (beside the output).
        progress: a tqdm-like bar for the one-process stream (ranks show their own).

    Returns:
        The grouped stream; None on ranks other than 0 (rank 0 writes the outputs).
    """

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
    """The scored windows grouped by record; then the bar is closed and the parts directory removed."""
    try:
        yield from group_by_record(score_windows(windows(), scorer, batch_size, progress=progress))
    finally:
        if progress is not None:
            progress.close()
        if parts is not None:
            shutil.rmtree(parts, ignore_errors=True)
