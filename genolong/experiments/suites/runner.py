"""Run a benchmark suite (:mod:`genolong.experiments.suites.suite`) over prepared tasks, cell by cell.

The output directory::

    OUT/suite.yaml                    every setting, pinned (a rerun with other settings is refused)
    OUT/tasks/<task>/data/            the prepared task (``genolong task prepare``'s format)
    OUT/tasks/<task>/leakage.json     train/test leakage and conflicting labels (:func:`task_leakage`)
    OUT/tasks/<task>/kmer.json        the k-mer baseline on the same splits
    OUT/runs/<task>/<model>/<mode>/seed<N>/   a ``genolong task finetune`` run; cell.json when finished
    OUT/results.csv, references.csv, leakage.csv, summary.md, figure.png   (:mod:`genolong.experiments.suites.report`)

A cell (task x model x mode x seed) whose ``cell.json`` holds the same settings is read back; an
interrupted one resumes exactly from its last checkpoint, so a rerun after a kill gives the same
``results.csv``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from genolong.classifier.directory import Classifier
from genolong.config import to_dict
from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text
from genolong.core.interrupts import stop
from genolong.datasets.task import PreparedTask
from genolong.evaluation.kmer_models import activate, fit_kmer_model
from genolong.evaluation.leakage import find_leakage
from genolong.evaluation.metrics import best_f1_threshold
from genolong.evaluation.task_metrics import BENCHMARK_METRICS, classification_metrics
from genolong.experiments.compare import identity_hash, load_result, save_result
from genolong.experiments.suites.report import write_reports
from genolong.experiments.suites.suite import ModelEntry, SuiteConfig, TaskEntry
from genolong.training.finetune import run_finetune

log = logging.getLogger(__name__)

#: Test rows per model call when scoring a finished cell.
BATCH = 64


def task_directory(out: Path, task: TaskEntry) -> Path:
    """Where the prepared data and the per-task results of ``task`` go."""
    return out / "tasks" / task.name


def task_leakage(out: Path, task: TaskEntry, prepared: PreparedTask, suite: SuiteConfig) -> np.ndarray:
    """(N_test,) bool: the leaked test rows; their counts go to ``leakage.json``, with the training rows
    whose sequence (or its reverse complement) is also in training with other labels (``conflicting``,
    :mod:`genolong.prep.task_duplicates`)."""
    leakage = find_leakage(prepared["train"].sequences, prepared["test"].sequences, suite.leakage)
    conflicting = prepared.manifest["duplicates"]["splits"]["train"]["conflicting"]
    counts = {"task": task.name, "test_rows": len(prepared["test"]), **leakage.counts(), "k": suite.leakage.k,
              "cut": suite.leakage.cut, "conflicting": conflicting}
    atomic_write_text(task_directory(out, task) / "leakage.json", json.dumps(counts, indent=1) + "\n")
    return leakage.leaked


def _row(task: TaskEntry, model: str, mode: str, seed: int | str, steps: int | str, prepared: PreparedTask,
         outputs: np.ndarray, threshold: float | None, leaked: np.ndarray) -> dict:
    """One line of results.csv: the headline metric and every metric of the test ``outputs``, and both
    on the rows that do not leak (NaN when fewer than two are left)."""
    targets = prepared["test"].targets()
    metrics = classification_metrics(prepared.problem_type, targets, outputs, threshold)
    clean = dict.fromkeys(metrics, float("nan"))
    if (~leaked).sum() >= 2:
        clean = classification_metrics(prepared.problem_type, targets[~leaked], outputs[~leaked], threshold)
    return {"task": task.name, "model": model, "mode": mode, "seed": seed, "metric": task.metric,
            "value": metrics[task.metric], **{k: metrics[k] for k in BENCHMARK_METRICS},
            "value_without_leaked": clean[task.metric], "auroc_without_leaked": clean["auroc"],
            "test_rows": len(leaked), "test_rows_without_leaked": int((~leaked).sum()), "steps": steps}


def kmer_row(out: Path, task: TaskEntry, prepared: PreparedTask, leaked: np.ndarray) -> dict:
    """The k-mer baseline of the problem type, fitted on the training split (C chosen on
    validation; binary: the threshold too): one deterministic fit, so one row (seed empty)."""
    problem = prepared.problem_type
    path = task_directory(out, task) / "kmer.json"
    identity = identity_hash(prepared.manifest["rows"], prepared.manifest["inputs"], task.metric, leaked.tolist())
    if (row := load_result(path, identity)) is not None:
        return row
    train, valid = prepared["train"], prepared["valid"]
    model, _ = fit_kmer_model(problem, (train.sequences, train.targets()), (valid.sequences, valid.targets()))
    threshold = None
    if problem == "binary":
        threshold = best_f1_threshold(valid.targets()[:, 0],
                                      activate(problem, model.logits(valid.sequences))[:, 0])
    outputs = activate(problem, model.logits(prepared["test"].sequences))
    row = _row(task, "k-mer", "-", "", "", prepared, outputs, threshold, leaked)
    save_result(path, identity, row)
    return row


def run_cell(out: Path, task: TaskEntry, prepared: PreparedTask, leaked: np.ndarray, model: ModelEntry, mode: str,
             seed: int, *, show_progress: bool = False, extra_callbacks: Sequence = ()) -> dict:
    """Fine-tune one cell (or read it back, or continue it) and score its test split."""
    config = model.finetune_config(mode, seed)
    run_dir = out / "runs" / task.name / model.name / mode / f"seed{seed}"
    identity = identity_hash(to_dict(config), model.source, prepared.manifest["inputs"], prepared.manifest["rows"],
                             task.metric, leaked.tolist())
    if (row := load_result(run_dir / "cell.json", identity)) is not None:
        return row
    log.info("benchmark cell %s / %s / %s / seed %d", task.name, model.name, mode, seed)
    report = run_finetune(prepared.directory, run_dir, config, pretrained=model.pretrained,
                          asked=model.asked if model.pretrained is not None else (), resume=True,
                          show_progress=show_progress, extra_callbacks=extra_callbacks)
    if "stopped_at_step" in report:
        stop(f"the benchmark stopped in {run_dir} at step {report['stopped_at_step']}; "
             "run the same command again to continue")
    classifier = Classifier.load(run_dir / "model", task="labelled", device="cpu")
    sequences = prepared["test"].sequences
    outputs = np.concatenate([classifier.probabilities(sequences[i:i + BATCH]) for i in range(0, len(sequences), BATCH)])
    row = _row(task, model.name, mode, seed, report["steps"], prepared, outputs.astype(np.float64),
               report.get("threshold"), leaked)
    save_result(run_dir / "cell.json", identity, row)
    return row


def run_benchmark(suite: SuiteConfig, out: Path, *, show_progress: bool = False,
                  extra_callbacks: Sequence = ()) -> list[dict]:
    """Run every cell of ``suite`` on the tasks prepared in ``out`` (:func:`task_directory` ``/data``);
    writes the reports and returns the rows of ``results.csv``. A task that is not classification, or
    a model that cannot serve one, is a ConfigError before any training."""
    prepared = {task.name: PreparedTask(task_directory(out, task) / "data") for task in suite.tasks}
    suite.check_problem_types({name: p.problem_type for name, p in prepared.items()})
    for task in suite.tasks:
        if "test" not in prepared[task.name].splits:
            raise UserError(f"task {task.name} has no test split")
    leaked = {task.name: task_leakage(out, task, prepared[task.name], suite) for task in suite.tasks}
    rows = []
    if suite.kmer_baseline:
        rows += [kmer_row(out, task, prepared[task.name], leaked[task.name]) for task in suite.tasks]
    for task, model, mode, seed in suite.cells():
        rows.append(run_cell(out, task, prepared[task.name], leaked[task.name], model, mode, seed,
                             show_progress=show_progress, extra_callbacks=extra_callbacks))
    write_reports(out, rows, suite.reference_rows(), suite.confidence)
    return rows
