"""A prepared chromatin dataset (``chromatin prepare``, :mod:`genolong.prep.chromatin_dataset`), per split::

    manifest.json              inputs (sha256, size), options, counts, located fraction
    <split>.sequences.npy      (rows, context) uint8 ASCII over ACGTN
    <split>.labels.npy         (rows, 919) uint8 0/1 in DeepSEA column order
    <split>.loci.npy           (rows,) LOCI_DTYPE records (only with a genome)

A kept row whose DeepSEA input was not located exactly once in the genome is stored in the
centre of an N-padded row; :meth:`ChromatinSplit.sequence` returns only its original input."""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError, UserError

#: Format tag written to (and required in) manifest.json.
FORMAT = "genolong.chromatin/1"


class LocateStatus(enum.IntEnum):
    """Outcome of locating one query."""

    LOCATED = 0  #: exactly one exact occurrence
    NOT_FOUND = 1  #: no exact occurrence on either strand
    AMBIGUOUS = 2  #: two or more exact occurrences
    TOO_MANY_N = 3  #: every probe window contains an N
    TOO_REPETITIVE = 4  #: even the best probe window has more than ``max_candidates`` candidates


#: On-disk record of one query's location (see :class:`Locations`).
LOCI_DTYPE = np.dtype([("status", "u1"), ("chrom", "i4"), ("start", "i8"), ("strand", "i1"), ("hits", "i4")])


@dataclass
class Locations:
    """Where each query was found, ``(queries,)`` arrays typed as :data:`LOCI_DTYPE`: ``chrom`` indexes
    :attr:`~genolong.prep.locate.GenomeIndex.names`, ``start`` is 0-based on the plus strand, ``strand``
    -1 for the reverse complement; AMBIGUOUS rows: the lowest occurrence; rows without one: -1 / -1 / 0."""

    status: np.ndarray
    chrom: np.ndarray
    start: np.ndarray
    strand: np.ndarray
    hits: np.ndarray

    def __len__(self) -> int:
        return len(self.status)

    @classmethod
    def empty(cls, rows: int) -> Locations:
        return cls(status=np.full(rows, LocateStatus.NOT_FOUND, np.uint8), chrom=np.full(rows, -1, np.int32),
                   start=np.full(rows, -1, np.int64), strand=np.zeros(rows, np.int8),
                   hits=np.zeros(rows, np.int32))

    def to_records(self) -> np.ndarray:
        """The locations as one structured array ``(queries,)`` of :data:`LOCI_DTYPE`."""
        records = np.empty(len(self), LOCI_DTYPE)
        for name in LOCI_DTYPE.names:
            records[name] = getattr(self, name)
        return records

    @classmethod
    def from_records(cls, records: np.ndarray) -> Locations:
        return cls(**{name: np.asarray(records[name]) for name in LOCI_DTYPE.names})

    def counts(self) -> dict[str, int]:
        """Number of queries per status, by lowercase status name."""
        tally = np.bincount(self.status, minlength=len(LocateStatus))
        return {status.name.lower(): int(tally[status]) for status in LocateStatus}


_REPREPARE = "prepare the dataset again with `genolong chromatin prepare`"


def _open_prepared(directory: Path, name: str) -> np.ndarray:
    """Memory-map the array ``name`` of a prepared directory, which must lie inside it (a manifest
    cannot point elsewhere) and be a complete ``.npy`` file."""
    if not isinstance(name, str) or not (directory / name).resolve().is_relative_to(directory.resolve()):
        raise InputError(directory / "manifest.json", f"file {name!r} lies outside the dataset directory")
    path = directory / name
    try:
        return np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise InputError(path, "missing from the prepared dataset", hint=_REPREPARE) from None
    except (ValueError, OSError, EOFError) as err:  # a truncated file cannot be mapped with its header's shape
        raise InputError(path, f"truncated or not a .npy array ({err})", hint=_REPREPARE) from None


class ChromatinSplit:
    """One split of a prepared directory, memory-mapped: ``sequences`` ``(rows, context)`` uint8 ASCII,
    ``labels`` ``(rows, 919)`` uint8, ``loci`` ``(rows,)`` :data:`LOCI_DTYPE` (None without a genome)
    and ``located`` ``(rows,)`` bool (all True without a genome: rows are the inputs themselves)."""

    def __init__(self, directory: Path, split: str, manifest: dict):
        files = manifest["splits"][split]["files"]
        self.name = split
        self.input_length, self.context = manifest["input_length"], manifest["context"]
        self.flank = (self.context - self.input_length) // 2
        self.sequences = _open_prepared(directory, files["sequences"])
        self.labels = _open_prepared(directory, files["labels"])
        self.loci = _open_prepared(directory, files["loci"]) if "loci" in files else None
        self.located = (np.ones(len(self.labels), bool) if self.loci is None
                        else np.asarray(self.loci["status"]) == LocateStatus.LOCATED)
        if self.sequences.shape != (len(self.labels), self.context):
            raise InputError(directory / files["sequences"], f"shape {self.sequences.shape} does not match "
                             f"the manifest ({len(self.labels)} rows of {self.context} bp)")

    def __len__(self) -> int:
        return len(self.labels)

    def central(self, row: int) -> str:
        """The original DeepSEA input of ``row`` (``input_length`` bp)."""
        return self.sequences[row, self.flank : self.flank + self.input_length].tobytes().decode("ascii")

    def sequence(self, row: int) -> str:
        """The model input of ``row``: the context window, or the original input for unlocated rows."""
        return self.sequences[row].tobytes().decode("ascii") if self.located[row] else self.central(row)


class PreparedChromatin:
    """A directory written by :func:`prepare_chromatin`; ``prepared["train"]`` is a :class:`ChromatinSplit`."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        manifest_path = self.directory / "manifest.json"
        if not manifest_path.is_file():
            raise InputError(self.directory, "not a prepared chromatin dataset (no manifest.json); "
                             "create one with `genolong chromatin prepare`")
        try:
            self.manifest = json.loads(manifest_path.read_text())
        except (UnicodeDecodeError, ValueError) as err:
            raise InputError(manifest_path, f"invalid JSON: {err}", hint=_REPREPARE) from None
        found = self.manifest.get("format") if isinstance(self.manifest, dict) else None
        if found != FORMAT:
            raise InputError(manifest_path, f"not a prepared chromatin manifest (format {found!r}, expected {FORMAT!r})")
        try:
            self.splits = {split: ChromatinSplit(self.directory, split, self.manifest)
                           for split in self.manifest["splits"]}
        except (KeyError, TypeError, AttributeError) as err:
            raise InputError(manifest_path, f"malformed manifest (no valid {err})", hint=_REPREPARE) from None

    def __getitem__(self, split: str) -> ChromatinSplit:
        if split not in self.splits:
            raise UserError(f"{self.directory} has no {split!r} split; it has {sorted(self.splits)}")
        return self.splits[split]
