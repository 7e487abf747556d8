"""What a classifier directory was trained for (``genolong_task.json``) and where the shipped promoter
model lives, readable without torch. :class:`InferenceSpec` is declared by a task, saved by every
fine-tuning run, and derived from the task name for older directories
(:func:`genolong.tasks.task.load_classifier`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from genolong.config import from_dict
from genolong.core.errors import ConfigError, InputError, UserError
from genolong.resources import promoter_model

TASK_FILE = "genolong_task.json"
FORMAT = "genolong-classifier/1"
#: A task name (:func:`genolong.tasks.task.get_task`): ``promoter``, ``chromatin``, ``my_task``.
TASK_NAME = re.compile(r"[a-z][a-z0-9_]*")


#: An output activation -> the model's (transformers') ``problem_type`` it goes with.
ACTIVATIONS = {"sigmoid": "multi_label_classification", "softmax": "single_label_classification",
               "identity": "regression"}
#: What a decision threshold is: a cut on an output's probability, or nothing (no threshold applies).
THRESHOLDS = ("probability", "none")
#: Which outputs a variant effect compares: probabilities, logits, or values (regression).
EFFECTS = ("probability", "logit", "value")


@dataclass
class InferenceSpec:
    """What inference needs of a model beyond its output names.

    Attributes:
        activation: of the logits (B, C): ``sigmoid``, ``softmax`` or ``identity`` (regression).
        scan_stride: bp between windows (and bin size) of ``genolong scan`` by default.
        threshold: what ``TaskInfo.threshold`` cuts: ``probability`` or ``none``.
        variant_effect: what ``score-variants`` compares: ``probability``, ``logit`` or ``value``.
        called_fraction_caution: a scan that calls much of an unseen species gets a line of caution.
        both_strands: inference averages both strands unless ``--no-rc`` (a model trained on both).
    """

    activation: str
    scan_stride: int
    threshold: str
    variant_effect: str
    called_fraction_caution: bool = False
    both_strands: bool = False

    def __post_init__(self) -> None:
        for name, value, choices in (("activation", self.activation, ACTIVATIONS), ("threshold", self.threshold, THRESHOLDS),
                                     ("variant_effect", self.variant_effect, EFFECTS)):
            if value not in choices:
                raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        if self.scan_stride < 1:
            raise ConfigError(f"scan_stride must be positive, got {self.scan_stride}")

    @classmethod
    def for_problem_type(cls, problem_type: str | None, window_bp: int) -> InferenceSpec:
        """The spec of a model of transformers' ``problem_type`` (None: sigmoids) trained on windows
        of ``window_bp``; scans step half a window."""
        stride = max(1, window_bp // 2)
        if problem_type == ACTIVATIONS["softmax"]:
            return cls("softmax", stride, "none", "probability")
        if problem_type == ACTIVATIONS["identity"]:
            return cls("identity", stride, "none", "value")
        return cls("sigmoid", stride, "probability", "probability")


def reads_both_strands(rc: bool | None, info: TaskInfo) -> bool:
    """Whether to average both strands: ``--rc`` / ``--no-rc`` as given, else the model's own reading."""
    return rc if rc is not None else bool(info.inference and info.inference.both_strands)


def default_promoter_model() -> Path:
    """The promoter model shipped with the package (see its README for data and test F1)."""
    return promoter_model()


@dataclass
class TaskInfo:
    """What a classifier was trained for; saved as ``genolong_task.json``.

    Attributes:
        window_bp: input length it was trained on; longer records are scanned in windows of it.
        min_bp: the shortest input it scores (chromatin: DeepSEA's 1,000-bp input).
        max_len: tokens per input, [CLS] and [SEP] included.
        threshold: decision threshold on a record's probability (promoter: max F1 on balanced validation).
        provenance: data, configuration, metrics (free-form JSON).
        scan_threshold: threshold of genome scans, set to call a few percent of background genomes at
            most (None: ``threshold``).
        species: scientific name -> common name of the species trained or validated on.
        inference: what inference needs of it (None: not recorded, derived from ``task``).
    """

    task: str
    window_bp: int
    min_bp: int
    max_len: int
    label_names: list[str]
    threshold: float | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    scan_threshold: float | None = None
    species: dict[str, str] = field(default_factory=dict)
    inference: InferenceSpec | None = None

    def threshold_for_scans(self) -> float | None:
        """The threshold of genome scans: ``scan_threshold``, else ``threshold``."""
        return self.threshold if self.scan_threshold is None else self.scan_threshold

    def __post_init__(self) -> None:
        if not isinstance(self.task, str) or not TASK_NAME.fullmatch(self.task):
            raise UserError(f"task must be a task name like 'promoter', got {self.task!r}")

    @classmethod
    def read(cls, directory: Path) -> TaskInfo:
        path = directory / TASK_FILE
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.pop("format", None) != FORMAT:
                raise ValueError(f"format is not {FORMAT!r}")
            spec = data.pop("inference", None)  # read on its own, so that an error names its key
            info = from_dict(cls, data, source="")
            info.inference = None if spec is None else from_dict(InferenceSpec, spec, source="", prefix="inference.")
            return info
        except (ValueError, TypeError) as err:
            raise InputError(path, f"not a valid task description: {err}") from None

    def write(self, directory: Path) -> None:
        data = asdict(self)
        if data["inference"] is None:  # not recorded: left out, as before it was
            del data["inference"]
        elif not data["inference"]["both_strands"]:  # one strand, as before the key was
            del data["inference"]["both_strands"]
        (directory / TASK_FILE).write_text(json.dumps({"format": FORMAT, **data}, indent=2) + "\n")


def describe_model(path: str | Path, info: TaskInfo) -> str:
    """One line naming a classifier, its threshold and what it was trained on (for output headers)."""
    return f"model {path}; {_threshold_and_data(info)}"


def default_promoter_description() -> str:
    """The shipped promoter model's threshold, minimum length and training data, for ``--help``."""
    try:
        info = TaskInfo.read(default_promoter_model())
    except (OSError, UserError):
        return "missing from this installation"
    return f"{_threshold_and_data(info)}; scores records of {info.min_bp} bp or more"


def _threshold_and_data(info: TaskInfo) -> str:
    trained_on = info.provenance.get("trained_on")
    if trained_on is None:  # a fine-tuning run records the dataset it used
        trained_on = info.provenance.get("report", {}).get("data", {}).get("data", "unrecorded data")
    threshold = "none" if info.threshold is None else f"{info.threshold:.4f}"
    return f"threshold {threshold}; trained on {trained_on}"
