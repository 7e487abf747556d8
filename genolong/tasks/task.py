"""What a fine-tuning task is: :class:`FinetuneTask` (its data, validation metric, test report and
summary), the run config :class:`FinetuneConfig`, and the registry of tasks.

A task puts C outputs on the pooled sequence, trained with the loss of the model's ``problem_type``;
the generic run (:func:`genolong.training.finetune.run_finetune`) does the rest. Adding a task is one
module that subclasses :class:`FinetuneTask` and registers an instance with :func:`register_task`;
its command group adds ``genolong NAME finetune`` with :func:`genolong.cli.commands.finetune.add_parser`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from genolong.classifier.directory import Classifier
from genolong.classifier.task_info import InferenceSpec
from genolong.config import from_dict
from genolong.config.presets import apply_overrides, read_preset
from genolong.configs import preset_path
from genolong.core.errors import ConfigError, UserError
from genolong.core.registry import Registry
from genolong.dna.tokenizer import TokenizerTrainConfig
from genolong.model.section import ModelSection
from genolong.tasks.settings import LoraSettings, TrainConfig, check_mode


class LabelledSequences(Protocol):
    """One split: ``sequence(i)`` is the model input (str), ``labels(i)`` its (C,) float32 targets."""

    def __len__(self) -> int: ...

    def sequence(self, index: int) -> str: ...

    def labels(self, index: int) -> np.ndarray: ...

    def all_labels(self, rows: np.ndarray) -> np.ndarray: ...


class SequenceRows:
    """A split held in memory: ``sequences`` (N) and their ``targets`` (N, C) float32 (or (N,): C = 1)."""

    def __init__(self, sequences: list[str], targets: np.ndarray):
        targets = np.asarray(targets, dtype=np.float32)
        self.sequences = sequences
        self.targets = targets[:, None] if targets.ndim == 1 else targets

    def __len__(self) -> int:
        return len(self.sequences)

    def sequence(self, index: int) -> str:
        return self.sequences[index]

    def labels(self, index: int) -> np.ndarray:
        return self.targets[index]

    def all_labels(self, rows: np.ndarray) -> np.ndarray:
        return self.targets[rows]


@dataclass
class TaskData:
    """A task's splits (``train``, ``valid``, optionally ``test``) and what the classifier directory
    records of them: label names (C), window and shortest input in bp, provenance (``source["data"]``:
    its path) and transformers' ``problem_type``."""

    task: str
    splits: dict[str, LabelledSequences]
    label_names: list[str]
    window_bp: int
    min_bp: int
    source: dict[str, Any]
    problem_type: str = "multi_label_classification"


class FinetuneTask(ABC):
    """One fine-tuning task. Subclasses set the class attributes and implement the methods."""

    #: The registry name: ``task:`` in configs, ``genolong NAME finetune``.
    name: str
    #: The validation metric early stopping and the best checkpoint follow (higher is better).
    monitor: str
    #: Whether the task reads ``calibrate`` (Platt scaling on validation); other tasks refuse it.
    calibrates: bool = False

    @property
    def default_preset(self) -> str:
        """The preset ``genolong NAME finetune`` uses without ``--config`` (a shipped one for built-in tasks)."""
        return f"{self.name}_tiny"

    def check_config(self, config: FinetuneConfig) -> None:
        """Raise ConfigError for settings this task cannot use (by default, it can use all)."""
        return

    def inference_spec(self, window_bp: int, problem_type: str | None) -> InferenceSpec:
        """What inference needs of this task's models (by default :meth:`InferenceSpec.for_problem_type`)."""
        return InferenceSpec.for_problem_type(problem_type, window_bp)

    @abstractmethod
    def load_data(self, data_dir: Path) -> TaskData:
        """The task's dataset directory opened, or a UserError saying what is wrong with it."""

    @abstractmethod
    def validation_metrics(self, labels: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
        """``val/...`` metrics, :attr:`monitor` among them, from labels and probabilities, both (N, C)."""

    @abstractmethod
    def test_report(self, classifier: Classifier, data: TaskData, config: FinetuneConfig, out: Path) -> dict:
        """The report's task part from the best model (calibrated in place where the task does so); a
        ``threshold`` key is saved with the classifier."""

    @abstractmethod
    def summary(self, report: dict) -> str:
        """The test results of a finished run's report as printed text."""


#: The fine-tuning tasks by name; the built-in ones register when their modules are imported.
TASKS: Registry[FinetuneTask] = Registry(
    "task", lambda: ("genolong.tasks.promoter", "genolong.tasks.chromatin", "genolong.tasks.labelled"), identity=type)


def register_task(task: FinetuneTask) -> FinetuneTask:
    return TASKS.add(task.name, task)


def get_task(name: str) -> FinetuneTask:
    """The task registered under ``name`` (ConfigError if none)."""
    return TASKS.get(name)


def available_tasks() -> list[str]:
    return TASKS.names()


@dataclass
class FinetuneConfig:
    """A fine-tuning run; a YAML preset fills it (``configs/finetune/``).

    Attributes:
        max_len: tokens per input, [CLS] and [SEP] included (BigBird: 4096).
        model: ``GenolongConfig`` fields: all of them from scratch (``vocab_size`` from the tokenizer,
            ``max_position_embeddings`` defaults to max_len); with a pretrained model only dropout,
            pooling and ``positive_label_weight`` apply, unless the command line sets others (``--backbone``).
        tokenizer: trained on the training split (from scratch only).
        patience: validation rounds without improvement of the monitored metric before stopping.
        kmer_baseline: promoter: also fit the k-mer baseline on the same splits.
        crop_min_bp: train on random sub-windows of ``crop_min_bp`` bp up to full length; the classifier
            then scores records from ``crop_min_bp`` bp (None: whole sequences).
        augment_reverse_complement: train on the reverse complement half of the time (drawn per step).
        calibrate: promoter: Platt-scale the probability on validation (before the threshold is chosen).
        test_rows: evaluate this many evenly spaced test rows (None: all).
        batch_size_eval: inputs per model call when scoring validation and test after training.
        mode: which weights train: ``full``, ``lora`` (:attr:`lora`) or ``probe`` (the head only).
    """

    task: str = "promoter"
    max_len: int = 512
    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerTrainConfig = field(default_factory=lambda: TokenizerTrainConfig(vocab_size=256))
    patience: int = 5
    kmer_baseline: bool = True
    crop_min_bp: int | None = None
    augment_reverse_complement: bool = False
    calibrate: bool = False
    test_rows: int | None = None
    batch_size_eval: int = 64
    train: TrainConfig = field(default_factory=TrainConfig)
    mode: str = "full"
    lora: LoraSettings = field(default_factory=LoraSettings)

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.max_len < 3:
            raise ConfigError(f"max_len must be >= 3 ([CLS] token [SEP]), got {self.max_len}")
        if self.patience < 1 or self.batch_size_eval < 1:
            raise ConfigError("patience and batch_size_eval must be >= 1")
        if self.crop_min_bp is not None and self.crop_min_bp < 1:
            raise ConfigError(f"crop_min_bp must be >= 1 or null, got {self.crop_min_bp}")
        if self.test_rows is not None and self.test_rows < 1:
            raise ConfigError(f"test_rows must be >= 1 or null, got {self.test_rows}")
        task = get_task(self.task)
        if self.calibrate and not task.calibrates:
            raise ConfigError(f"calibrate applies to the promoter task; the {self.task} task does not read it "
                              "(remove calibrate: true)")
        task.check_config(self)


def load_finetune_config(task: str, preset: str | Path | None = None,
                         overrides: dict[str, Any] | None = None) -> FinetuneConfig:
    """A YAML file or shipped preset (default: the task's own; ``extends: other.yaml`` allowed) with
    dotted ``overrides`` (:func:`genolong.config.presets.apply_overrides`)."""
    source = preset_path("finetune", str(preset or get_task(task).default_preset))
    data = apply_overrides(read_preset(source), overrides or {}, str(source))
    if data.setdefault("task", task) != task:
        raise UserError(f"{source} is a {data['task']} preset, not a {task} one")
    return from_dict(FinetuneConfig, data, source=str(source))


def load_classifier(path: str | Path, **kwargs) -> Classifier:
    """A classifier directory loaded for inference (``kwargs``: :meth:`Classifier.load`'s), its
    ``info.inference`` the recorded spec or, where none is recorded, the one its task declares."""
    classifier = Classifier.load(path, **kwargs)
    info = classifier.info
    if info.inference is None:
        info.inference = get_task(info.task).inference_spec(info.window_bp, classifier.model.config.problem_type)
    return classifier


def report_summary(report: dict) -> str:
    """The printed test results of a finished fine-tuning ``report``, by its task."""
    return get_task(report["task"]).summary(report)
