"""The task builder behind ``genolong task prepare``: labelled rows (:mod:`genolong.datasets.task_inputs`)
-> a prepared task directory (:mod:`genolong.datasets.task`), written whole once every check passed.

The problem type is stated or inferred (:func:`infer_problem_type`): one column of two classes
(names, or codes such as 0/1 or -1/+1, the larger positive) is ``binary``; one column of names, or of
integers 0..K-1 with 3 <= K <= :data:`MAX_INTEGER_CLASSES`, ``multiclass``; several 0/1 columns
``multilabel``; other numbers ``regression``. Then copies (:mod:`genolong.prep.task_duplicates`),
the splits (:class:`SplitPlan`) and leakage between them (:func:`remove_leakage`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from genolong.core.errors import ConfigError, InputError, UserError
from genolong.core.files import atomic_path, atomic_write_text, sha256_file
from genolong.datasets.task import FORMAT, PROBLEM_TYPES, SPLITS, write_split
from genolong.datasets.task_inputs import Row
from genolong.evaluation.leakage import copy_kind
from genolong.prep.splits import check_fractions, stratified_draw
from genolong.prep.task_duplicates import resolve_duplicates

#: The most classes integer labels may have to be read as multi-class (more: regression).
MAX_INTEGER_CLASSES = 20


@dataclass
class SplitPlan:
    """How rows are split: ``given`` (without a valid split, ``fractions[1]`` of each class of train, drawn
    with ``seed``, becomes valid), ``random`` (``fractions``, ``seed``) or ``chromosome``."""

    method: str = "random"
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    seed: int = 0
    valid_chroms: list[str] = field(default_factory=list)
    test_chroms: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.method not in ("given", "random", "chromosome"):
            raise ConfigError(f"split must be given, random or chromosome, got {self.method!r}")
        self.fractions = check_fractions(self.fractions)
        if self.method == "chromosome" and not self.valid_chroms:
            raise ConfigError("a chromosome split needs --valid-chroms")


@dataclass
class Targets:
    """The problem type, output names, classes (binary/multiclass), stored columns and (N, K) values."""

    problem_type: str
    outputs: list[str]
    classes: list[str] | None
    columns: list[str]
    values: np.ndarray

    @property
    def positive(self) -> str | None:
        """The positive class of a binary task (the last of ``classes``), else None."""
        return self.classes[-1] if self.problem_type == "binary" else None

    def take(self, indices: np.ndarray) -> Targets:
        return Targets(self.problem_type, self.outputs, self.classes, self.columns, self.values[indices])


def _number(value) -> float | None:
    """``value`` as a float, or None when it is not a number (bools are 0/1)."""
    if isinstance(value, bool | int | float):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _column_values(rows: list[Row], index: int, name: str) -> tuple[list, bool]:
    """The raw values of label column ``index`` and whether they are numbers; an InputError for an empty
    value, a non-finite number, or a column mixing names and numbers (at the first row that differs)."""
    values = [row.labels[index] for row in rows]
    for row, value in zip(rows, values, strict=True):
        if value is None or str(value).strip() == "":
            raise InputError(row.where[0], f"column {name!r} is empty", line=row.where[1])
    numeric = [_number(v) for v in values]
    first = numeric[0] is not None
    for row, value, number in zip(rows, values, numeric, strict=True):
        if (number is not None) != first:
            kind = "a name" if first else "a number"
            raise InputError(row.where[0], f"column {name!r} mixes types: {value!r} is {kind}, the first row's is not",
                             line=row.where[1])
        if number is not None and not math.isfinite(number):
            raise InputError(row.where[0], f"column {name!r} holds {value!r}, not a finite number", line=row.where[1])
    return (numeric if first else [str(v).strip() for v in values]), first


def infer_problem_type(columns: list[tuple[list, bool]]) -> str:
    """The problem type of label ``columns`` (``(values, numeric)`` each), by the module docstring's rule."""
    if len(columns) == 1:
        values, numeric = columns[0]
        distinct = set(values)
        if len(distinct) <= 2 and (not numeric or all(float(v).is_integer() for v in distinct)):
            return "binary"
        if not numeric:
            return "multiclass"
        if distinct == set(map(float, range(len(distinct)))) and len(distinct) <= MAX_INTEGER_CLASSES:
            return "multiclass"
        return "regression"
    if all(numeric and set(values) <= {0.0, 1.0} for values, numeric in columns):
        return "multilabel"
    return "regression"


def build_targets(rows: list[Row], label_columns: list[str], problem_type: str | None = None,
                  positive: str | None = None, class_order: list[str] | None = None) -> Targets:
    """The targets of ``rows``: the stated or inferred problem type, checked against the labels.

    The ``positive`` class of a binary task defaults to the first of ``class_order`` (the classes in
    the order given, else sorted), else the last sorted class (``1`` for 0/1 and -1/+1)."""
    columns = [_column_values(rows, i, name) for i, name in enumerate(label_columns)]
    problem_type = problem_type or infer_problem_type(columns)
    if problem_type not in PROBLEM_TYPES:
        raise ConfigError(f"problem type must be one of {', '.join(PROBLEM_TYPES)}, got {problem_type!r}")
    where = rows[0].where[0]
    if problem_type in ("binary", "multiclass"):
        if len(columns) != 1:
            raise InputError(where, f"a {problem_type} task has one label column, got {label_columns}")
        values, numeric = columns[0]
        names = [format(v, "g") if numeric else v for v in values]
        present = set(names)
        classes = [c for c in class_order if c in present] if class_order else sorted(present, key=float if numeric else None)
        if problem_type == "binary":
            if len(classes) != 2:
                raise InputError(where, f"a binary task needs two classes, column {label_columns[0]!r} has {classes}")
            positive = positive or (class_order[0] if class_order else classes[-1])
            if numeric and _number(positive) is not None:
                positive = format(_number(positive), "g")
            if positive not in classes:
                raise ConfigError(f"positive class {positive!r} is not one of {classes}")
            classes = [c for c in classes if c != positive] + [positive]
        index = {name: i for i, name in enumerate(classes)}
        codes = np.array([[index[n]] for n in names], dtype=np.float64)
        if problem_type == "binary":
            outputs = [label_columns[0] if numeric else classes[1]]
            return Targets("binary", outputs, classes, outputs, codes)
        return Targets("multiclass", classes, classes, ["class"], codes)
    for name, (_, numeric) in zip(label_columns, columns, strict=True):
        if not numeric:
            raise InputError(where, f"a {problem_type} task needs numbers, column {name!r} holds names")
    values = np.array([values for values, _ in columns], dtype=np.float64).T
    if problem_type == "multilabel" and not np.isin(values, (0.0, 1.0)).all():
        raise InputError(where, "a multilabel task needs 0/1 labels in every label column")
    return Targets(problem_type, list(label_columns), None, list(label_columns), values)


def _check_class_sizes(rows: list[Row], targets: Targets) -> None:
    """An InputError naming the row of a class that has a single example."""
    if targets.classes is None:
        return
    codes = targets.values[:, 0].astype(int)
    counts = np.bincount(codes, minlength=len(targets.classes))
    for row, code in zip(rows, codes, strict=True):
        if counts[code] == 1:
            raise InputError(row.where[0], f"class {targets.classes[code]!r} has a single example", line=row.where[1],
                             hint="a class needs examples to train and to evaluate on")


def split_rows(rows: list[Row], targets: Targets, plan: SplitPlan) -> dict[str, np.ndarray]:
    """Row indices per split (sorted), by ``plan``."""
    if plan.method == "random":
        return _draw(np.arange(len(rows)), targets, plan.fractions[1:], np.random.default_rng(plan.seed))
    if plan.method == "given":
        missing = [row for row in rows if row.split is None]
        if missing:
            raise InputError(missing[0].where[0], "--split given needs inputs per split (--table SPLIT=PATH, "
                             "--class SPLIT:NAME=FASTA)")
        names = [row.split for row in rows]
    else:
        if any(row.chrom is None for row in rows):
            raise UserError("a chromosome split needs genomic rows (BED input)", hint="use --split random")
        present = {row.chrom for row in rows}
        missing = [c for c in [*plan.valid_chroms, *plan.test_chroms] if c not in present]
        if missing:
            raise UserError(f"held-out chromosomes {missing} hold no row (rows are on {sorted(present)})")
        where = {**{c: "valid" for c in plan.valid_chroms}, **{c: "test" for c in plan.test_chroms}}
        names = [where.get(row.chrom, "train") for row in rows]
    found = {name: np.array([i for i, split in enumerate(names) if split == name], dtype=np.int64) for name in SPLITS}
    if plan.method == "given" and not len(found["valid"]):
        drawn = _draw(found["train"], targets, (plan.fractions[1], 0.0), np.random.default_rng(plan.seed))
        found["train"], found["valid"] = drawn["train"], drawn["valid"]
    return {name: indices for name, indices in found.items() if len(indices) or name != "test"}


def _draw(indices: np.ndarray, targets: Targets, fractions: tuple[float, float],
          rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``indices`` split at random into train, valid and test (the ``fractions`` of valid and test),
    stratified by class for binary and multiclass; each split's indices sorted."""
    classified = targets.problem_type in ("binary", "multiclass")
    stratum = targets.values[indices, 0] if classified else np.zeros(len(indices))
    parts = stratified_draw(stratum.tolist(), fractions, rng)
    return {name: np.sort(indices[parts == part]).astype(np.int64) for part, name in enumerate(SPLITS)}


def remove_leakage(rows: list[Row], splits: dict[str, np.ndarray],
                   drop: bool = True) -> tuple[dict[str, np.ndarray], dict]:
    """Drop rows of a later split whose sequence (``exact``) or reverse complement (``reverse_complement``)
    is in an earlier one (:data:`SPLITS` order); returns the kept indices and the manifest's leakage entry.
    With ``drop`` False they are counted and kept (a benchmark keeps a published split as it is)."""
    seen: set[str] = set()
    kept, removed = {}, {}
    for name in [name for name in SPLITS if name in splits]:
        kinds = [copy_kind(rows[i].sequence, seen) for i in splits[name]]
        seen.update(rows[i].sequence.upper() for i in splits[name])
        kept[name] = np.array([i for i, kind in zip(splits[name], kinds, strict=True) if not kind or not drop],
                              dtype=np.int64)
        if name != "train":
            removed[name] = {kind: kinds.count(kind) for kind in ("exact", "reverse_complement")}
    total = {kind: sum(c[kind] for c in removed.values()) for kind in ("exact", "reverse_complement")}
    line = (f"{'removed' if drop else 'kept'} {sum(total.values())} rows of later splits whose sequence was in an "
            "earlier split "
            f"({total['exact']} exact, {total['reverse_complement']} as reverse complement)")
    return kept, {"removed": removed, "line": line}


def prepare_task(rows: list[Row], label_columns: list[str], out: str | Path, *, inputs: list[Path],
                 plan: SplitPlan, problem_type: str | None = None, positive: str | None = None,
                 class_order: list[str] | None = None, options: dict | None = None,
                 duplicates: str = "drop", drop_leakage: bool = True, label_lists: dict[str, int] | None = None) -> dict:
    """Write the prepared task directory ``out`` from ``rows``; returns its manifest. ``duplicates``:
    the rule for copies within a split; ``label_lists``: ``{column: length}`` of the list columns read
    as a label per element. Bad labels, a copy (under ``error``), a class with a single example, an
    empty split or a training split lacking a class are an InputError or UserError; nothing written."""
    if not rows:
        raise UserError("no labelled rows in the inputs")
    targets = build_targets(rows, label_columns, problem_type, positive, class_order)
    kept, copies = resolve_duplicates(rows, targets.values, duplicates)
    if not len(kept):
        raise UserError(f"no rows left: {copies['line']}", hint="check the inputs' labels, or use --duplicates keep")
    rows, targets = [rows[i] for i in kept], targets.take(kept)
    _check_class_sizes(rows, targets)
    given_valid = any(row.split == "valid" for row in rows)
    splits, leakage = remove_leakage(rows, split_rows(rows, targets, plan), drop_leakage)
    for name in ("train", "valid"):
        if len(splits.get(name, ())) == 0:
            carved = name == "valid" and plan.method == "given" and not given_valid
            raise UserError(f"the {name} split is empty" + (f" ({plan.fractions[1]:g} of each class of the train "
                                                            "split rounds to no row)" if carved else ""),
                            hint="give a valid split (--table valid=PATH, --class valid:NAME=FASTA) or more rows"
                            if carved else "give more rows or change the split")
    if targets.classes is not None:
        present = set(targets.values[splits["train"], 0].astype(int))
        absent = [c for i, c in enumerate(targets.classes) if i not in present]
        if absent:
            raise UserError(f"the train split has no example of class(es) {absent}")
    lengths = [len(rows[i].sequence) for indices in splits.values() for i in indices]
    manifest = {
        "format": FORMAT, "problem_type": targets.problem_type,
        "problem_type_from": "--problem-type" if problem_type else "labels",
        "outputs": targets.outputs, "classes": targets.classes, "positive": targets.positive,
        "label_lists": dict(label_lists or {}), "label_columns": list(label_columns),
        "target_columns": targets.columns, "inputs": [_describe(Path(p)) for p in inputs],
        "options": options or {},
        "split": {"method": plan.method, **({"fractions": list(plan.fractions), "seed": plan.seed}
                                             if plan.method == "random" else {}),
                  **({"valid_chroms": plan.valid_chroms, "test_chroms": plan.test_chroms}
                     if plan.method == "chromosome" else {}),
                  **({"valid_from_train": {"fraction": plan.fractions[1], "seed": plan.seed}}
                     if plan.method == "given" and not given_valid else {})},
        "rows": {name: len(indices) for name, indices in splits.items()}, "duplicates": copies,
        "leakage": leakage, "min_sequence_length": min(lengths), "max_sequence_length": max(lengths),
    }
    if targets.classes is not None:
        manifest["class_counts"] = {
            name: {c: int((targets.values[indices, 0] == i).sum()) for i, c in enumerate(targets.classes)}
            for name, indices in splits.items()}
    with atomic_path(out, directory=True) as tmp:
        for name, indices in splits.items():
            write_split(tmp / f"{name}.tsv", [rows[i].id for i in indices], [rows[i].sequence for i in indices],
                        targets.columns, targets.values[indices], integer=targets.problem_type != "regression")
        atomic_write_text(tmp / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    return manifest


def _describe(path: Path) -> dict:
    """An input's path, and the sha256 and size of it (or of each file in it, for a directory)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return {"path": str(path), "files": [{"name": str(f.relative_to(path)) if path.is_dir() else f.name,
                                          "sha256": sha256_file(f), "size": f.stat().st_size} for f in files]}
