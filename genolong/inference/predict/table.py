"""``genolong task predict``: one row per input record for a classifier of any task and problem type.

Records come from a FASTA file (plain, gzip or bgzip) or a CSV/TSV/Parquet table with a sequence
column (``sequence``, ``seq``...; ids from ``id`` or ``name``, else the row number), read by
:func:`genolong.datasets.task_inputs.read_records`. Each record is one model input (a record longer
than the model's ``max_len`` tokens keeps its central tokens, as in training); ``--rc`` averages it
with its reverse complement. The TSV written has the columns ``ordinal`` (0-based position in the
input), ``id``, and one column per model output (its label name): a probability for sigmoid and
softmax outputs, a value for regression.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from genolong.classifier.directory import StrandAveraged
from genolong.core.files import atomic_path
from genolong.tasks.task import load_classifier


def predict_table(model: Path, records: Iterable[tuple[str, str]], out: Path, *, batch_size: int = 64,
                  rc: bool = False, device: str = "auto") -> int:
    """Score ``records`` (``(id, sequence)``, e.g. :func:`genolong.datasets.task_inputs.read_records`)
    with the classifier directory ``model`` into the TSV ``out``; returns the number of records."""
    classifier = load_classifier(model, device=device)
    scorer = StrandAveraged(classifier) if rc else classifier
    names = classifier.info.label_names
    count = 0
    with atomic_path(out) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["ordinal", "id", *names])
        batch: list[tuple[str, str]] = []
        for record in records:
            batch.append(record)
            if len(batch) == batch_size:
                count = _write(writer, scorer, batch, count)
                batch = []
        if batch:
            count = _write(writer, scorer, batch, count)
    return count


def _write(writer, scorer, batch: list[tuple[str, str]], start: int) -> int:
    values = np.asarray(scorer.probabilities([sequence.upper() for _, sequence in batch]))  # (B, C)
    for offset, ((name, _), row) in enumerate(zip(batch, values, strict=True)):
        writer.writerow([start + offset, name, *(f"{v:.6g}" for v in row)])
    return start + len(batch)
