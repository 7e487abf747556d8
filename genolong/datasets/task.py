"""A prepared task dataset (``genolong task prepare``, :mod:`genolong.prep.task_dataset`)::

    manifest.json     format, problem type, outputs, classes (and the positive one), label columns,
                      inputs (sha256), options, rows per split, the copies found within and removed
                      across splits (``duplicates``, leakage)
    <split>.tsv       header ``id  sequence  <target columns>``, one row per input

The targets by problem type (:data:`PROBLEM_TYPES`): ``binary`` one 0/1 column (1 = ``outputs[0]``,
the positive class); ``multiclass`` one column ``class``, the index into ``classes`` (= ``outputs``);
``multilabel`` one 0/1 column per output; ``regression`` one float column per output."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError
from genolong.core.files import csv_field_limit

#: Format tag written to (and required in) manifest.json.
FORMAT = "genolong.task/1"
#: The problem types a task dataset can hold.
PROBLEM_TYPES = ("binary", "multiclass", "multilabel", "regression")
#: What ``task prepare --duplicates`` may do with copies within a split (manifest ``duplicates.rule``).
DUPLICATE_RULES = ("keep", "drop", "error")
#: The splits, in the order leakage is removed (a later split loses rows an earlier one holds).
SPLITS = ("train", "valid", "test")

_REPREPARE = "prepare it again with `genolong task prepare`"


@dataclass
class TaskSplit:
    """One split: ``ids`` and ``sequences`` (N) and ``values`` (N, K) float64 as stored."""

    ids: list[str]
    sequences: list[str]
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.sequences)

    def targets(self) -> np.ndarray:
        """(N, K) float32 targets: K = 1 (binary 0/1, multiclass class index) or K = outputs."""
        return self.values.astype(np.float32)


def write_split(path: Path, ids: list[str], sequences: list[str], columns: list[str], values: np.ndarray,
                integer: bool) -> None:
    """Write one split's TSV (``values`` (N, K) as integers when ``integer``, else shortest round-trip floats)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "sequence", *columns])
        for record, sequence, row in zip(ids, sequences, values, strict=True):
            writer.writerow([record, sequence, *(str(int(v)) if integer else repr(float(v)) for v in row)])


class PreparedTask:
    """A ``genolong task prepare`` directory: its manifest and splits (read whole on first use)."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        path = self.directory / "manifest.json"
        try:
            self.manifest = json.loads(path.read_text())
        except FileNotFoundError:
            raise InputError(path, "missing: not a prepared task directory", hint=_REPREPARE) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(path, f"not valid JSON ({err})", hint=_REPREPARE) from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != FORMAT:
            raise InputError(path, f"format is not {FORMAT}", hint=_REPREPARE)
        self._splits: dict[str, TaskSplit] = {}

    @property
    def problem_type(self) -> str:
        return self.manifest["problem_type"]

    @property
    def outputs(self) -> list[str]:
        """The model's output names: the positive class (binary), the classes (multiclass), the labels or scores."""
        return list(self.manifest["outputs"])

    @property
    def splits(self) -> list[str]:
        """The splits present, in :data:`SPLITS` order."""
        return [name for name in SPLITS if name in self.manifest["rows"]]

    def __getitem__(self, name: str) -> TaskSplit:
        if name not in self._splits:
            self._splits[name] = self._read(name)
        return self._splits[name]

    def _read(self, name: str) -> TaskSplit:
        path = self.directory / f"{name}.tsv"
        columns = self.manifest["target_columns"]
        try:
            with open(path, newline="") as handle, csv_field_limit(path.stat().st_size):
                rows = list(csv.reader(handle, delimiter="\t"))
        except FileNotFoundError:
            raise InputError(path, "missing from the prepared task", hint=_REPREPARE) from None
        if not rows or rows[0] != ["id", "sequence", *columns]:
            raise InputError(path, "header is not id, sequence and the manifest's target columns", line=1,
                             hint=_REPREPARE)
        body = rows[1:]
        if len(body) != self.manifest["rows"][name]:
            raise InputError(path, f"{len(body)} rows where the manifest says {self.manifest['rows'][name]}",
                             hint=_REPREPARE)
        try:
            values = np.array([[float(v) for v in row[2:]] for row in body], dtype=np.float64).reshape(len(body),
                                                                                                      len(columns))
        except ValueError as err:
            raise InputError(path, f"a target is not a number ({err})", hint=_REPREPARE) from None
        return TaskSplit([row[0] for row in body], [row[1] for row in body], values)
