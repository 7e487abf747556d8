"""A benchmark suite: tasks x models x fine-tuning modes x seeds, validated from YAML.

The format (layouts, ``scratch:BACKBONE`` models, ``reference:``, ``root`` and ``missing: skip``)
is documented with examples in ``docs/guide/compare-benchmark.md``. Paths are relative to ``root``
when the suite sets one (from ``--set``: relative to the working directory), else to the suite
file, with ``~`` and ``$VARIABLES`` expanded; :mod:`genolong.prep.benchmark_layouts` reads the
layouts. Every setting, defaults included, is pinned into the output directory (:func:`pinned`).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genolong.config import from_dict, read_yaml, to_dict
from genolong.config.presets import apply_overrides, merge_preset, resolve_preset
from genolong.core.errors import ConfigError
from genolong.evaluation.leakage import LeakageSettings
from genolong.evaluation.task_metrics import CLASSIFICATION
from genolong.model.loading import read_model_config
from genolong.tasks.settings import check_mode
from genolong.tasks.task import FinetuneConfig

#: Dataset layouts -> the metric the suite's papers report (GUE: MCC, as DNABERT-2's maintainers
#: state; Genomic Benchmarks: accuracy; NT downstream tasks: MCC, with F1 beside it).
LAYOUTS = {"gue": "mcc", "nt": "mcc", "genomic_benchmarks": "accuracy", "genomic_benchmarks_csv": "accuracy",
           "fasta": "mcc", "csv": "mcc"}
#: A model trained from scratch: ``scratch:BACKBONE``.
SCRATCH = "scratch:"
#: What a suite does with a task whose path does not exist: refuse it, or leave it out.
MISSING = ("refuse", "skip")


@dataclass
class Reference:
    """Numbers others published on a task (``values``: who -> the number), shown beside ours but
    never mixed into what we measured. ``source`` (paper and table) is required; ``metric`` must be
    the task's headline metric (default: that one); ``percent``: ``71.59`` is ``0.7159`` on our scale."""

    values: dict[str, float] = field(default_factory=dict)
    source: str = ""
    metric: str | None = None
    percent: bool = False


@dataclass
class TaskEntry:
    """One dataset of the suite: ``name`` (letters, digits, ``_ - .``), ``layout`` (:data:`LAYOUTS`)
    and the layout's files (``path``, or ``fasta``'s ``classes``, ``genomic_benchmarks_csv``'s ``genome``).
    A binary task's ``positive`` class defaults to ``positive`` when present, else the last class in
    sorted order (``fasta``: the first class). ``fractions`` (``fasta``, ``csv``: a stratified random
    split), ``valid_fraction`` (held out of each training class where a layout has no validation
    split) and ``max_rows`` (per split, after splitting) draw with ``split_seed``, the same for every
    model and seed. ``metric`` defaults to the layout's."""

    name: str
    layout: str
    path: str | None = None
    classes: dict[str, str] = field(default_factory=dict)
    genome: str | None = None
    positive: str | None = None
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    valid_fraction: float = 0.1
    split_seed: int = 0
    max_rows: dict[str, int] = field(default_factory=dict)
    metric: str | None = None
    reference: Reference | None = None

    def __post_init__(self) -> None:
        _check_name(self.name, "task")
        if self.layout not in LAYOUTS:
            close = difflib.get_close_matches(self.layout, list(LAYOUTS), n=1)
            raise ConfigError(f"task {self.name}: unknown layout {self.layout!r}"
                              + (f" (did you mean {close[0]}?)" if close else "") + f"; known: {', '.join(LAYOUTS)}")
        if self.layout == "fasta":
            if len(self.classes) < 2 or self.path is not None:
                raise ConfigError(f"task {self.name}: layout fasta takes classes (NAME: FASTA, two or more), no path")
        elif self.path is None or self.classes:
            raise ConfigError(f"task {self.name}: layout {self.layout} takes a path (and no classes)")
        if (self.layout == "genomic_benchmarks_csv") != (self.genome is not None):
            raise ConfigError(f"task {self.name}: a genome goes with layout genomic_benchmarks_csv, and only there")
        if set(self.max_rows) - {"train", "valid", "test"} or any(v < 1 for v in self.max_rows.values()):
            raise ConfigError(f"task {self.name}: max_rows takes train, valid, test counts >= 1, got {self.max_rows}")
        if not 0 < self.valid_fraction < 1:
            raise ConfigError(f"task {self.name}: valid_fraction must be in (0, 1), got {self.valid_fraction}")
        if self.metric is None:
            self.metric = LAYOUTS[self.layout]
        if self.metric not in ("accuracy", "f1", "mcc", "auroc"):
            raise ConfigError(f"task {self.name}: metric must be accuracy, f1, mcc or auroc, got {self.metric!r}")
        if (reference := self.reference) is None:
            return
        if not reference.source.strip():
            raise ConfigError(f"task {self.name}: the reference has no source; add source: the paper and table "
                              "its numbers come from")
        if not reference.values:
            raise ConfigError(f"task {self.name}: the reference has no values (values: {{MODEL: NUMBER}})")
        if reference.metric is None:
            reference.metric = self.metric
        if reference.metric != self.metric:
            raise ConfigError(f"task {self.name}: the reference reports {reference.metric} but the task's metric is "
                              f"{self.metric}; set the task's metric to {reference.metric}")
        for name in reference.values:
            _check_name(name, "reference")

    def resolve(self, root: Path) -> None:
        """Make the paths absolute, relative to ``root``."""
        absolute = lambda p: str((root / expanded(p)).resolve())  # noqa: E731
        self.path = None if self.path is None else absolute(self.path)
        self.genome = None if self.genome is None else absolute(self.genome)
        self.classes = {name: absolute(p) for name, p in self.classes.items()}


@dataclass
class ModelEntry:
    """One model: ``source`` ``scratch:BACKBONE`` or a model directory; ``finetune`` its
    fine-tuning preset (the budget: steps, batch, learning rate, model size from scratch)."""

    name: str
    source: str
    finetune: dict[str, Any] = field(default_factory=lambda: {"extends": "labelled_tiny"})

    def __post_init__(self) -> None:
        _check_name(self.name, "model")
        if self.name == "k-mer":
            raise ConfigError("model name k-mer is the baseline's; choose another")

    @property
    def pretrained(self) -> Path | None:
        """The model directory, or None from scratch."""
        return None if self.source.startswith(SCRATCH) else Path(self.source)

    @property
    def asked(self) -> list[str]:
        """The ``model.`` keys the suite sets itself: the only ones that may change a pretrained model's attention."""
        return sorted(self.finetune.get("model", {}) or {})

    def finetune_config(self, mode: str, seed: int) -> FinetuneConfig:
        """The ``labelled`` fine-tuning config of one cell (``mode``, ``train.seed``, no k-mer baseline)."""
        data = resolve_preset("finetune", self.finetune)
        if self.pretrained is None:
            data = merge_preset(data, {"model": {"backbone": self.source.removeprefix(SCRATCH)}})
        data = merge_preset(data, {"task": "labelled", "mode": mode, "kmer_baseline": False, "train": {"seed": seed}})
        return from_dict(FinetuneConfig, data, source=f"suite model {self.name}")


@dataclass
class SuiteConfig:
    """The suite; ``confidence`` is the level of the intervals over seeds; ``skipped`` names the tasks
    left out by ``missing: skip``."""

    tasks: list[TaskEntry]
    models: list[ModelEntry]
    modes: list[str] = field(default_factory=lambda: ["full"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    kmer_baseline: bool = True
    leakage: LeakageSettings = field(default_factory=LeakageSettings)
    confidence: float = 0.95
    root: str | None = None
    missing: str = "refuse"
    skipped: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.missing not in MISSING:
            raise ConfigError(f"missing must be {' or '.join(MISSING)}, got {self.missing!r}")
        for what, names in (("task", [t.name for t in self.tasks]), ("model", [m.name for m in self.models]),
                            ("mode", self.modes), ("seed", self.seeds)):
            if not names:
                raise ConfigError(f"the suite lists no {what}")
            repeated = sorted({str(n) for n in names if names.count(n) > 1})
            if repeated:
                raise ConfigError(f"{what}s must differ; repeated: {', '.join(repeated)}")
        for mode in self.modes:
            check_mode(mode)
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence must be in (0, 1), got {self.confidence}")

    def cells(self) -> list[tuple[TaskEntry, ModelEntry, str, int]]:
        """Every (task, model, mode, seed), in the order they run."""
        return [(t, m, mode, seed) for t in self.tasks for m in self.models for mode in self.modes for seed in self.seeds]

    def reference_rows(self) -> list[dict]:
        """One row per published number (``references.csv``): ``value`` on our scale, ``published`` as written."""
        return [{"task": t.name, "reference": name, "metric": t.reference.metric,
                 "value": value / 100 if t.reference.percent else value, "published": str(value),
                 "source": t.reference.source}
                for t in self.tasks if t.reference is not None for name, value in t.reference.values.items()]

    def check_problem_types(self, problem_types: dict[str, str]) -> None:
        """A ConfigError for a task that is not classification or a model that cannot serve it (weighted
    positive labels, a sigmoid's, on a multiclass task)."""
        for task in self.tasks:
            kind = problem_types[task.name]
            if kind not in CLASSIFICATION:
                raise ConfigError(f"task {task.name} is a {kind} task; a benchmark compares classifiers "
                                  f"({' or '.join(CLASSIFICATION)})")
            for model in self.models:
                settings = model.finetune_config("full", 0).model.settings
                if kind == "multiclass" and settings.get("positive_label_weight", 1.0) != 1.0:
                    raise ConfigError(f"model {model.name} cannot serve task {task.name} ({kind}): it "
                                      "weights positive labels (model.positive_label_weight), which only "
                                      "sigmoid outputs have; a multiclass task has a softmax")


def load_suite(path: str | Path, overrides: dict[str, Any] | None = None) -> SuiteConfig:
    """The suite YAML ``path`` with the dotted ``overrides`` of ``--set``, validated (every cell's
    fine-tuning config built, every model directory read) before any data is read or model trained:
    ConfigError for a bad suite, or ``missing: skip`` and no task's path there."""
    path = Path(path)
    overrides = dict(overrides or {})
    if isinstance(overrides.get("root"), str):
        overrides["root"] = str(expanded(overrides["root"]).resolve())
    suite = from_dict(SuiteConfig, apply_overrides(read_yaml(path), overrides, str(path)), source=str(path))
    if suite.root is not None:
        suite.root = str((path.parent / expanded(suite.root)).resolve())
    for task in suite.tasks:
        task.resolve(Path(suite.root) if suite.root is not None else path.parent)
    if suite.missing == "skip":
        suite.skipped = [t.name for t in suite.tasks if t.path is not None and not Path(t.path).exists()]
        suite.tasks = [t for t in suite.tasks if t.name not in suite.skipped]
        if not suite.tasks:
            raise ConfigError(f"{path}: none of the task folders is there"
                              + (f" under root {suite.root}" if suite.root else "")
                              + "; set root to the folder that holds them (--set root=DIR)")
    for model in suite.models:
        if model.pretrained is not None:
            model.source = str((path.parent / expanded(model.source)).resolve())
            read_model_config(Path(model.source))
        for mode in suite.modes:
            model.finetune_config(mode, suite.seeds[0])
    return suite


def pinned(suite: SuiteConfig) -> dict[str, Any]:
    """Every setting of ``suite``: its own (defaults included, paths absolute) and each model's
    full fine-tuning config (``mode`` and ``train.seed`` are set per cell)."""
    data = to_dict(suite)
    for entry, model in zip(data["models"], suite.models, strict=True):
        entry["resolved_finetune"] = to_dict(model.finetune_config(suite.modes[0], suite.seeds[0]))
    return data


def expanded(path: str) -> Path:
    """``path`` with ``~`` and environment variables (``$GENOLONG_SHARED_DATA/...``) expanded."""
    return Path(os.path.expandvars(os.path.expanduser(path)))


def _check_name(name: str, what: str) -> None:
    if not name or not all(c.isalnum() or c in "_-." for c in name) or name.startswith("."):
        raise ConfigError(f"{what} name {name!r}: use letters, digits, _ - . (it names a directory)")
