"""The 919 DeepSEA chromatin profiles (BigBird App. F.3): 919 sigmoids, binary cross-entropy with
``model.positive_label_weight`` (8 in the presets, as BigBird), on a ``genolong chromatin prepare``
directory; the test report has per-profile AUCs (``OUT/aucs.csv``) and their medians per class.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from genolong.classifier.directory import Classifier, strand_reader
from genolong.classifier.task_info import InferenceSpec
from genolong.core.errors import ConfigError, UserError
from genolong.datasets.chromatin import ChromatinSplit, PreparedChromatin
from genolong.evaluation.chromatin import evaluate_chromatin, write_auc_table
from genolong.evaluation.metrics import format_chromatin_medians, median_auc_by_class, per_profile_auc
from genolong.evaluation.profiles import chromatin_profiles, profile_classes
from genolong.tasks.task import FinetuneConfig, FinetuneTask, TaskData, register_task

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ChromatinRows:
    """A prepared chromatin split (memory-mapped): labels (919,)."""

    split: ChromatinSplit

    def __len__(self) -> int:
        return len(self.split)

    def sequence(self, index: int) -> str:
        return self.split.sequence(index)

    def labels(self, index: int) -> np.ndarray:
        return self.split.labels[index].astype(np.float32)

    def all_labels(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self.split.labels[rows], dtype=np.float32)


class ChromatinTask(FinetuneTask):
    """The 919 profiles of a ``genolong chromatin prepare`` dataset; early stopping on the validation mean ROC AUC."""

    name = "chromatin"
    monitor = "val/mean_auc"

    def inference_spec(self, window_bp: int, problem_type: str | None) -> InferenceSpec:
        """DeepSEA's 200-bp scan bins."""
        return replace(super().inference_spec(window_bp, problem_type), scan_stride=200)

    def check_config(self, config: FinetuneConfig) -> None:
        """The inputs are fixed windows around each DeepSEA row's centre: no crops."""
        if config.crop_min_bp is not None:
            raise ConfigError(f"crop_min_bp applies to promoters, not to chromatin windows, got {config.crop_min_bp}")

    def load_data(self, data_dir: Path) -> TaskData:
        """The prepared train and valid splits (and test, when there is one)."""
        prepared = PreparedChromatin(data_dir)
        split_names = ("train", "valid", *(["test"] if "test" in prepared.splits else []))
        splits = {name: ChromatinRows(prepared[name]) for name in split_names}
        manifest = prepared.manifest
        source = {"data": str(data_dir.resolve()), "context": manifest["context"],
                  "input_length": manifest["input_length"],
                  "rows": {name: entry["rows"] for name, entry in manifest["splits"].items()}}
        profile_names = [profile.name for profile in chromatin_profiles()]
        return TaskData(self.name, splits, profile_names, manifest["context"], manifest["input_length"], source)

    def validation_metrics(self, labels: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
        """``val/mean_auc`` over the profiles with both labels, and ``val/profiles``, their number."""
        auc = per_profile_auc(labels.astype(np.uint8), probabilities).roc_auc
        defined = ~np.isnan(auc)
        if not defined.any():
            raise UserError(f"no profile has both positive and negative labels among the {len(labels)} "
                            "validation rows, so the validation AUC is undefined",
                            hint="raise train.val_windows")
        return {"val/mean_auc": float(auc[defined].mean()), "val/profiles": float(defined.sum())}

    def test_report(self, classifier: Classifier, data: TaskData, config: FinetuneConfig, out: Path) -> dict:
        """Per-profile AUCs on the test split (``out/aucs.csv``) and their class medians."""
        if "test" not in data.splits:
            log.warning("%s has no test split: no test AUCs", data.source["data"])
            return {}
        aucs, rows = evaluate_chromatin(strand_reader(classifier), data.splits["test"].split,
                                        batch_size=config.batch_size_eval, limit=config.test_rows)
        write_auc_table(out / "aucs.csv", aucs)
        return {"test": {"rows": len(rows), "profiles_with_auc": int(aucs.defined.sum()),
                         "median_roc_auc": median_auc_by_class(aucs.roc_auc, profile_classes()),
                         "median_pr_auc": median_auc_by_class(aucs.pr_auc, profile_classes()),
                         "aucs": str(out / "aucs.csv")}}

    def summary(self, report: dict) -> str:
        """Test rows and profiles, and the median ROC AUC per class next to DeepSEA and BigBird."""
        if "test" not in report:
            return "no test split: no test AUCs"
        test = report["test"]
        return (f"test: {test['rows']:,} rows, {test['profiles_with_auc']} profiles with an AUC "
                f"-> {test['aucs']}\n"
                + format_chromatin_medians({f"genolong {report['backbone']}": test["median_roc_auc"]}))


CHROMATIN = register_task(ChromatinTask())
