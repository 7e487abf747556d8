"""Your own task: a ``genolong task prepare`` dataset of any problem type (:mod:`genolong.datasets.task`),
which sets the model's ``problem_type`` and ``val/score``, the metric early stopping follows
(:data:`genolong.evaluation.task_metrics.METRICS`).

The test report (with ``kmer_baseline``) shows the network alone, the k-mer model fitted on the
training split and their stack fitted on validation (:mod:`genolong.evaluation.kmer_models`), which is
saved as the classifier's k-mer component, so ``valid`` and ``test`` are the saved model's (binary:
at the max-F1 threshold of validation). A model trained on both strands is read on both, as inference
reads it (``one_strand``: as ``--no-rc``); the k-mer model and stack rows on the forward strand. A task
of the 919 DeepSEA profiles also writes ``OUT/aucs.csv`` as ``chromatin eval`` does.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from genolong.classifier.directory import Classifier
from genolong.classifier.scoring import average_strands
from genolong.classifier.task_info import reads_both_strands
from genolong.core.errors import UserError
from genolong.datasets.task import PreparedTask
from genolong.dna.sequence import reverse_complement
from genolong.evaluation.chromatin import write_auc_table
from genolong.evaluation.kmer_models import activate, fit_kmer_model, fit_stack
from genolong.evaluation.metrics import per_profile_auc
from genolong.evaluation.profiles import N_PROFILES
from genolong.evaluation.task_metrics import METRICS, task_metrics
from genolong.tasks.task import FinetuneConfig, FinetuneTask, SequenceRows, TaskData, register_task

log = logging.getLogger(__name__)

#: A task dataset's problem type -> the model's (transformers') ``problem_type``.
MODEL_PROBLEM_TYPE = {"binary": "multi_label_classification", "multiclass": "single_label_classification",
                      "multilabel": "multi_label_classification", "regression": "regression"}


class LabelledTask(FinetuneTask):
    """A prepared task dataset of any problem type; ``problem_type`` is set by :meth:`load_data`."""

    name = "labelled"
    monitor = "val/score"
    problem_type = "binary"

    def load_data(self, data_dir: Path) -> TaskData:
        """The prepared splits; the window is the longest training sequence."""
        prepared = PreparedTask(data_dir)
        self.problem_type = prepared.problem_type
        splits = {name: SequenceRows(prepared[name].sequences, prepared[name].targets()) for name in prepared.splits}
        lengths = [len(s) for name in prepared.splits for s in prepared[name].sequences]
        source = {"data": str(Path(data_dir).resolve()), "problem_type": prepared.problem_type,
                  "rows": prepared.manifest["rows"], "leakage": prepared.manifest["leakage"]["line"]}
        return TaskData(self.name, splits, prepared.outputs, max(map(len, splits["train"].sequences)), min(lengths),
                        source, MODEL_PROBLEM_TYPE[prepared.problem_type])

    def validation_metrics(self, labels: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
        """``val/score`` (the problem type's metric) and the problem type's other metrics."""
        metrics = task_metrics(self.problem_type, labels, probabilities)
        monitor, shown = METRICS[self.problem_type].monitor, METRICS[self.problem_type].shown
        score = metrics[monitor]
        if np.isnan(score):
            raise UserError(f"the validation {monitor} is undefined on {len(labels)} rows "
                            "(a label without both classes, or constant values)", hint="raise train.val_windows")
        return {"val/score": float(score), **{f"val/{k}": float(metrics[k]) for k in shown}}

    def test_report(self, classifier: Classifier, data: TaskData, config: FinetuneConfig, out: Path) -> dict:
        """Network, k-mer model and stack on valid and test; the stack saved in ``classifier`` (its k-mer component)."""
        problem = self.problem_type
        splits = [name for name in ("valid", "test") if name in data.splits]
        rows = {name: (data.splits[name].sequences, data.splits[name].targets) for name in ("train", *splits)}
        reader = None
        if config.kmer_baseline:
            kmer_model, kmer_report = fit_kmer_model(problem, rows["train"], rows["valid"])
            reader = kmer_model.component().bind(classifier.tokenizer)
        scored = {name: network_and_kmer_logits(classifier, rows[name][0], config.batch_size_eval, reader) for name in splits}
        network = {name: scored[name][0] for name in splits}
        kmer = {name: scored[name][1] for name in splits}  # None without kmer_baseline
        forward = {name: rows[name][0] for name in splits}
        reverse = {name: [reverse_complement(s) for s in forward[name]] for name in splits} \
            if reads_both_strands(None, classifier.info) else None  # read as the inference commands read it

        def logits(sequences: dict[str, list[str]] | None) -> dict[str, np.ndarray] | None:
            return None if sequences is None else {
                name: network_and_kmer_logits(classifier, sequences[name], config.batch_size_eval)[0]
                for name in splits}

        network_reverse = logits(reverse)
        report = {"problem_type": problem, "network": _scores(problem, network, rows, splits, network_reverse)}
        if config.kmer_baseline:
            stack = fit_stack(problem, network["valid"], kmer["valid"], rows["valid"][1])
            stacked = {name: stack.logits(network[name], kmer[name]) for name in splits}
            report["kmer_baseline"] = kmer_report | _scores(problem, kmer, rows, splits)
            report["stack"] = stack.describe() | _scores(problem, stacked, rows, splits)
            component = stack.saved(kmer_model)
            classifier.kmer = None if component is None else component.bind(classifier.tokenizer)
        # the saved model is the network unless a k-mer component was folded into it
        saved, saved_reverse = (network, network_reverse) if classifier.kmer is None \
            else (logits(forward), logits(reverse))
        report["saved_model"] = stack.label() if config.kmer_baseline else "network"
        report |= _scores(problem, saved, rows, splits, saved_reverse)
        if reverse is not None:
            report["one_strand"] = {"network": _scores(problem, network, rows, splits),
                                    "saved_model": _scores(problem, saved, rows, splits)}
        if problem == "binary":
            report["threshold"] = report["valid"]["threshold"]
            report["threshold_chosen_on"] = "valid (max F1)"
        if problem == "multilabel" and "test" in splits and len(data.label_names) == N_PROFILES:
            outputs = _outputs(problem, saved["test"], None if saved_reverse is None else saved_reverse["test"])
            write_auc_table(out / "aucs.csv", per_profile_auc(rows["test"][1].astype(np.uint8), outputs))
            report["aucs"] = str(out / "aucs.csv")
        return report

    def summary(self, report: dict) -> str:
        """Valid and test metrics of the saved model, the network alone, the k-mer model and the stack."""
        shown = METRICS[report["problem_type"]].shown
        table = {}
        one = report.get("one_strand", {})
        for label, entry in (("saved model", report), ("network alone", report["network"]),
                             ("k-mer alone", report.get("kmer_baseline")), ("stack", report.get("stack")),
                             ("saved model, --no-rc", one.get("saved_model")),
                             ("network, --no-rc", one.get("network"))):
            if entry is not None:
                table |= {f"{label} {name}": {k: entry[name][k] for k in shown}
                          for name in ("valid", "test") if name in entry}
        width = max(map(len, table))
        lines = [" " * width + "".join(f"  {k:>14}" for k in shown)]
        lines += [f"{label:<{width}}" + "".join(f"  {row[k]:>14.4f}" for k in shown) for label, row in table.items()]
        return f"{report['problem_type']} task; saved model: {report['saved_model']}\n" + "\n".join(lines)


def network_and_kmer_logits(classifier: Classifier, sequences: list[str], batch_size: int,
            reader=None) -> tuple[np.ndarray, np.ndarray | None]:
    """The classifier's logits (N, C) (multi-class: log-probabilities), and with ``reader`` (a k-mer
    component bound to its tokenizer) the k-mer model's logits (N, C) of the same token rows (else None)."""
    network, kmer = [], []
    for first in range(0, len(sequences), batch_size):
        encoded = classifier.encode(sequences[first:first + batch_size])
        network.append(classifier.token_logits(encoded).cpu().numpy().astype(np.float64))
        if reader is not None:
            kmer.append(reader.combine(reader.token_scores(encoded["input_ids"])))
    logits = np.concatenate(network)
    if classifier.model.config.problem_type == MODEL_PROBLEM_TYPE["multiclass"]:
        logits = np.log(activate("multiclass", logits))
    return logits, np.concatenate(kmer) if kmer else None


def _scores(problem: str, logits: dict[str, np.ndarray], rows: dict, splits: list[str],
            reverse: dict[str, np.ndarray] | None = None) -> dict:
    """Metrics per split of one model's logits (N, C) (binary: at valid's F1-best threshold); with
    ``reverse`` (the reverse complements' logits) of both strands' mean outputs."""
    def outputs(name: str) -> np.ndarray:
        return _outputs(problem, logits[name], None if reverse is None else reverse[name])

    valid = task_metrics(problem, rows["valid"][1], outputs("valid"))
    result = {"valid": valid}
    if "test" in splits:
        result["test"] = task_metrics(problem, rows["test"][1], outputs("test"), valid.get("threshold"))
    return result


def _outputs(problem: str, logits: np.ndarray, reverse: np.ndarray | None) -> np.ndarray:
    """The outputs (N, C) of logits (N, C), averaged with those of ``reverse`` logits when given."""
    forward = activate(problem, logits)
    return forward if reverse is None else average_strands(np.concatenate([forward, activate(problem, reverse)]))


LABELLED = register_task(LabelledTask())
