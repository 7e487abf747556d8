"""Promoter classification (BigBird App. F.2): one sigmoid output, 1 for a promoter.

Data: a ``genolong promoter prepare`` directory. The test report: metrics at the threshold chosen on
validation (after Platt scaling when ``calibrate``), per pair of sources for a dataset split by
source, next to the k-mer baseline; a record longer than the window scores its best window.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import numpy as np

from genolong.classifier.directory import Classifier, strand_reader
from genolong.classifier.records import best_window_probabilities
from genolong.classifier.task_info import InferenceSpec
from genolong.core.errors import UserError
from genolong.datasets.promoter import load_manifest, load_split
from genolong.evaluation.calibration import fit_platt, fold_into_head
from genolong.evaluation.cross_source import format_pair_table, pair_metrics
from genolong.evaluation.kmer_baseline import run_kmer_baseline
from genolong.evaluation.metrics import (
    best_f1_threshold,
    expected_calibration_error,
    format_metrics_table,
    promoter_metrics,
)
from genolong.tasks.task import FinetuneConfig, FinetuneTask, SequenceRows, TaskData, register_task

#: The k-mer baseline's report entries copied into the fine-tuning report.
KMER_REPORT_KEYS = ("C", "features", "valid", "test", "by_source")


class PromoterRows(SequenceRows):
    """A promoter split: label (1,) = 1 for a promoter; ``sources`` name each record's source."""

    def __init__(self, records):
        super().__init__([record.sequence for record in records], np.array([record.label for record in records]))
        self.sources = [record.source for record in records]


class PromoterTask(FinetuneTask):
    """Promoter or not, from a ``genolong promoter prepare`` dataset; early stopping on validation F1."""

    name = "promoter"
    monitor = "val/f1"
    calibrates = True

    def inference_spec(self, window_bp: int, problem_type: str | None) -> InferenceSpec:
        """Scan bins of 50 bp, with the caution on scans that call much of an unseen species."""
        return replace(super().inference_spec(window_bp, problem_type), scan_stride=50, called_fraction_caution=True)

    def load_data(self, data_dir: Path) -> TaskData:
        """train/valid/test (and random_test) TSV; each split must hold both labels."""
        manifest = load_manifest(data_dir)
        splits = {}
        for name in ("train", "valid", "test", *(["random_test"] if "random_test" in manifest["counts"] else [])):
            records = load_split(data_dir, name)
            if {r.label for r in records} != {0, 1}:
                raise UserError(f"{data_dir}/{name}.tsv needs promoters and non-promoters; it has "
                                f"{len(records)} rows with labels {sorted({r.label for r in records})}")
            splits[name] = PromoterRows(records)
        # the classifier's window: the longest input it trains on (held-out sources may be longer;
        # their records are scanned in windows the model has seen, as predict-promoter scans them)
        length = max(map(len, splits["train"].sequences))
        source = {"data": str(data_dir.resolve()), "negatives": manifest["negatives"]["method"],
                  "split": manifest["split"]["method"], "counts": manifest["counts"]}
        min_length = min(manifest.get("min_sequence_length", length), length)
        return TaskData(self.name, splits, ["promoter"], length, min_length, source)

    def validation_metrics(self, labels: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
        """``val/f1`` (at the F1-best threshold), ``val/auroc``, ``val/auprc``."""
        y, p = labels[:, 0], probabilities[:, 0]
        metrics = promoter_metrics(y, p, best_f1_threshold(y, p))
        return {"val/f1": metrics["f1"], "val/auroc": metrics["auroc"], "val/auprc": metrics["auprc"]}

    def test_report(self, classifier: Classifier, data: TaskData, config: FinetuneConfig, out: Path) -> dict:
        """Calibration and threshold (max F1) on validation; test metrics; the k-mer baseline beside
        them; for a dataset split by source, metrics per source pair of test, valid and random_test."""

        @functools.cache  # each split is scored once (after calibration, when there is one)
        def scores(name: str) -> tuple[np.ndarray, np.ndarray]:
            rows = data.splits[name]
            sequences = [rows.sequence(i) for i in range(len(rows))]
            probabilities = best_window_probabilities(strand_reader(classifier), sequences, config.batch_size_eval,
                                                      classifier.info.window_bp)  # read as predict-promoter reads
            return rows.all_labels(np.arange(len(rows)))[:, 0], probabilities[:, 0]

        report = {}
        if config.calibrate:
            report["calibration"] = calibrate_on(classifier, *scores("valid"))
            scores.cache_clear()
        valid_true, valid_prob = scores("valid")
        threshold = best_f1_threshold(valid_true, valid_prob)
        report |= {"threshold": threshold, "threshold_chosen_on": "valid (max F1)",
                   "valid": promoter_metrics(valid_true, valid_prob, threshold),
                   "test": promoter_metrics(*scores("test"), threshold)}
        if data.source["split"] == "source":
            report["by_source"] = {name: pair_metrics(*scores(name), threshold, data.splits[name].sources)
                                   for name in ("test", "valid", "random_test")}
        if config.kmer_baseline:
            baseline = run_kmer_baseline(data.source["data"])
            report["kmer_baseline"] = {key: baseline[key] for key in KMER_REPORT_KEYS if key in baseline}
        return report

    def summary(self, report: dict) -> str:
        """Valid and test metrics next to the k-mer baseline's; per source pair when split by source."""
        name = f"genolong {report['backbone']}"
        rows = {f"{name} valid": report["valid"], f"{name} test": report["test"]}
        if "kmer_baseline" in report:
            rows[f"kmer baseline (C={report['kmer_baseline']['C']:g}) test"] = report["kmer_baseline"]["test"]
        table = format_metrics_table(rows)
        if "by_source" in report and "by_source" in report.get("kmer_baseline", {}):
            table += "\n\nper source pair (test: held-out sources; random_test: random split of the train sources):\n"
            table += format_pair_table(report["by_source"], report["kmer_baseline"]["by_source"])
        return table


def calibrate_on(classifier: Classifier, labels: np.ndarray, probabilities: np.ndarray) -> dict:
    """Platt-scale ``classifier`` in place from its ``probabilities`` (N,) of held-out ``labels`` (N,)."""
    logits = np.log(np.clip(probabilities, 1e-7, 1 - 1e-7) / np.clip(1 - probabilities, 1e-7, 1))
    scale, offset = fit_platt(logits, labels)
    fold_into_head(classifier.model.classifier.classifier, scale, offset)
    return {"method": "Platt scaling on valid, folded into the output layer", "scale": scale,
            "offset": offset, "valid_ece_before": expected_calibration_error(labels, probabilities)}


PROMOTER = register_task(PromoterTask())
