"""``genolong chromatin eval``: a chromatin classifier directory on one split of a prepared DeepSEA
dataset, its per-profile AUC table and the median ROC AUC per profile class."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from genolong.classifier.directory import Classifier, StrandAveraged, strand_reader
from genolong.core.progress import progress_bar
from genolong.datasets.chromatin import PreparedChromatin
from genolong.evaluation.chromatin import evaluate_chromatin, write_auc_table
from genolong.evaluation.metrics import ProfileAUCs, median_auc_by_class
from genolong.evaluation.profiles import profile_classes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChromatinEvaluation:
    """The per-profile AUCs, the number of rows scored, the median ROC AUC per profile class
    (:func:`~genolong.evaluation.metrics.median_auc_by_class`) and whether both strands were read."""

    aucs: ProfileAUCs
    rows: int
    medians: dict[str, dict[str, float | int]]
    both_strands: bool


def evaluate_chromatin_model(model: Path, data: Path, split_name: str, out: Path, *, rc: bool | None = None,
                             limit: int | None = None, batch_size: int = 16, device: str = "auto",
                             precision: str = "auto") -> ChromatinEvaluation:
    """Score split ``split_name`` of the prepared dataset ``data`` with the chromatin classifier ``model``
    (``rc``: averaged with the reverse complement, None: as the model reads; ``limit`` evenly spaced rows; another window length
    gets a warning), write the AUC table to ``out`` and return the summary; an InputError for another
    kind of model, or ``data`` not a prepared dataset with that split."""
    classifier = Classifier.load(model, task="chromatin", device=device, precision=precision)
    split = PreparedChromatin(data)[split_name]
    if split.context != classifier.info.window_bp:
        log.warning("the model was trained on %d-bp windows, %s holds %d-bp windows",
                    classifier.info.window_bp, data, split.context)
    scorer = strand_reader(classifier, rc)
    with progress_bar(unit=" rows", disable=None, file=sys.stderr, desc=split.name) as progress:
        aucs, rows = evaluate_chromatin(scorer, split, batch_size=batch_size, limit=limit, progress=progress)
    write_auc_table(out, aucs)
    return ChromatinEvaluation(aucs, len(rows), median_auc_by_class(aucs.roc_auc, profile_classes()),
                               isinstance(scorer, StrandAveraged))
