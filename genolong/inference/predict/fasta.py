"""Score the records of a FASTA file (or a table) with a classifier and write the tables (``promoter predict``
or ``predict-promoter``, ``chromatin predict``, ``task predict``): records streamed one at a time, cut into
windows ``stride`` bp apart (:mod:`genolong.classifier.records`), on one process or several ranks
(:mod:`genolong.inference.predict.loop`)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from genolong.classifier.directory import default_promoter_model, describe_model, strand_reader
from genolong.classifier.records import check_stride, record_stride
from genolong.classifier.task_info import TaskInfo, reads_both_strands
from genolong.core.errors import UserError
from genolong.core.files import work_path
from genolong.core.progress import progress_bar
from genolong.dna.sequence import FastaRecord, read_fasta
from genolong.inference.loop import build_trainer
from genolong.inference.predict.loop import score_records
from genolong.inference.predict.writers import (
    PredictionCounts,
    Table,
    open_outputs,
    write_chromatin_table,
    write_promoter_tables,
    write_record_table,
)
from genolong.tasks.chromatin import CHROMATIN
from genolong.tasks.promoter import PROMOTER
from genolong.tasks.task import load_classifier


@dataclass(frozen=True)
class FastaPrediction:
    """What to score and how. ``model`` None: the shipped promoter model; ``out`` None: standard output (one
    rank only); ``stride`` / ``min_length`` None: the model's (promoter: half the window; chromatin: its
    inference spec's, at most the window; minimum: ``min_bp``); ``device``: that of a one-process run.
    ``records`` reads the input's records (``name``, upper-case ``sequence``) anew on each call; None: those
    of the FASTA file ``fasta`` (which names the input on the progress bar)."""

    fasta: Path
    records: Callable[[], Iterable[FastaRecord]] | None = None
    model: Path | None = None
    out: Path | None = None
    stride: int | None = None
    rc: bool | None = None
    batch_size: int = 32
    min_length: int | None = None
    device: str = "auto"
    accelerator: str = "auto"
    devices: int | str = 1
    num_nodes: int = 1
    precision: str = "auto"


def _scored_records(run: FastaPrediction, path: Path, task: str | None, default_stride: Callable[[TaskInfo], int]):
    """The classifier at ``path`` (of ``task``; None: any) on this rank's device, and the records of ``run``
    windowed (``default_stride(info)`` without ``run.stride``), scored, grouped; None on other ranks."""
    trainer = None if run.devices == 1 and run.num_nodes == 1 else build_trainer(
        accelerator=run.accelerator, devices=run.devices, num_nodes=run.num_nodes, callbacks=[],
        precision=run.precision)
    if trainer is not None and run.out is None:
        raise UserError("--devices/--num-nodes above 1 need --out (the ranks' parts are kept beside it)")
    device = run.device if trainer is None else str(trainer.strategy.root_device)
    classifier = load_classifier(path, task=task, device=device, precision=run.precision)
    info = classifier.info
    progress = None if trainer is not None else progress_bar(unit=" windows", disable=None, file=sys.stderr,
                                                     desc=run.fasta.name)
    records = run.records or functools.partial(read_fasta, run.fasta, unique_names=False)
    stride = default_stride(info) if run.stride is None else run.stride
    check_stride(stride, info.window_bp)  # before any output is opened
    scorer = strand_reader(classifier, run.rc)
    scored = score_records(records, run.fasta.name, scorer, window=info.window_bp, stride=stride,
                           min_length=info.min_bp if run.min_length is None else run.min_length,
                           batch_size=run.batch_size, trainer=trainer, progress=progress,
                           parts=None if run.out is None else work_path(run.out, "parts"))
    return classifier, scored


def predict_promoters(run: FastaPrediction, *, windows: Path | None = None,
                      bed: Path | None = None) -> tuple[PredictionCounts, TaskInfo] | None:
    """Write the per-record table to ``run.out``, optionally the per-window table and the BED of promoter
    regions, at the model's record threshold; the counts and task description (None on other ranks)."""
    path = run.model or default_promoter_model()
    classifier, records = _scored_records(run, path, PROMOTER.name, lambda info: record_stride(info.window_bp))
    if records is None:
        return None
    shipped = Path(path).resolve() == default_promoter_model().resolve()
    header = f"# {describe_model(f'{path} (default)' if shipped else path, classifier.info)}\n"
    extra = [path for path in (windows, bed) if path is not None]
    with open_outputs(run.out, *extra) as handles:
        counts = write_promoter_tables(records, classifier.info.threshold, header,
                                       Table.for_path(handles[0], run.out),
                                       windows=Table.for_path(handles[1], windows) if windows else None,
                                       bed=handles[-1] if bed else None,
                                       strand="." if reads_both_strands(run.rc, classifier.info) else "+")
    return counts, classifier.info


def predict_chromatin(run: FastaPrediction) -> PredictionCounts | None:
    """Write one row of profile probabilities per window to ``run.out``; None on a rank other than 0."""
    classifier, records = _scored_records(run, run.model, CHROMATIN.name,
                                          lambda info: min(info.inference.scan_stride, info.window_bp))
    if records is None:
        return None
    with open_outputs(run.out) as (out,):
        return write_chromatin_table(records, classifier.info.label_names, Table.for_path(out, run.out))


def predict_records(run: FastaPrediction) -> tuple[PredictionCounts, TaskInfo] | None:
    """Write one row per record to ``run.out`` for a classifier of any task, read in windows every
    ``run.stride`` bp (default :func:`~genolong.classifier.records.record_stride`, as fine-tuning validation
    reads them); the counts and the model's task description (None on a rank other than 0)."""
    classifier, records = _scored_records(run, run.model, None, lambda info: record_stride(info.window_bp))
    if records is None:
        return None
    with open_outputs(run.out) as (out,):
        counts = write_record_table(records, classifier.info.label_names, Table.for_path(out, run.out))
    return counts, classifier.info
