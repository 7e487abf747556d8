"""Variant scores out: a long TSV (one row per variant x output) or a wide HDF5 matrix, each written as
numbered *parts* (one per chunk, atomically, in the run's partial directory) and assembled at the end.

* TSV (``.tsv``, ``.tsv.gz``): ``##key=value`` provenance lines, then the columns
  ``chrom pos id ref alt flags profile class <scores>``; a ``.gz`` is a series of gzip members (one per
  part) with mtime 0 and no file name, so equal content gives equal bytes.
* HDF5 (``.h5``, ``.hdf5``): datasets ``chrom pos id ref alt flags`` (N,), one (N, P) float32 dataset per
  score, ``profiles`` (P,), and the provenance as JSON in the root attribute ``provenance``.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from genolong.core.errors import UserError
from genolong.core.files import atomic_path
from genolong.inference.variants.windows import VariantWindows

METADATA = ("chrom", "pos", "id", "ref", "alt", "flags")


def metadata_columns(windows: list[VariantWindows]) -> dict[str, list]:
    """The row metadata of ``windows``: name -> (n,) values; flags joined by ``,`` (``.`` for none)."""
    return {**{name: [getattr(w.variant, name) for w in windows] for name in METADATA[:-1]},
            "flags": [",".join(w.flags) or "." for w in windows]}


@dataclass
class _Output:
    """The output file, the reported outputs' names and classes, and the score names."""

    out: Path
    labels: list[str]
    classes: list[str]
    score_names: tuple[str, ...]


@dataclass
class LongTsv(_Output):
    """One row per variant x output (for a few outputs: 919 rows per variant otherwise)."""

    def __post_init__(self) -> None:
        self.compressed = self.out.name.endswith(".gz")
        self.part_suffix = ".tsv.gz" if self.compressed else ".tsv"

    def _text(self, raw) -> io.TextIOWrapper:
        """Text into the binary file ``raw``, gzip-compressed for ``.gz`` (mtime 0, no name in the header)."""
        if self.compressed:
            raw = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=4, mtime=0)
        return io.TextIOWrapper(raw, encoding="utf-8")

    def write_part(self, path: Path, windows: list[VariantWindows], scores: dict[str, np.ndarray]) -> None:
        meta = metadata_columns(windows)
        with atomic_path(path) as tmp, open(tmp, "wb") as raw, self._text(raw) as out:
            for row in range(len(windows)):
                fixed = "\t".join(str(meta[name][row]) for name in METADATA)
                for column, (label, label_class) in enumerate(zip(self.labels, self.classes, strict=True)):
                    values = "\t".join(f"{scores[name][row, column]:.6g}" for name in self.score_names)
                    out.write(f"{fixed}\t{label}\t{label_class}\t{values}\n")

    def assemble(self, parts: list[Path], provenance: dict) -> None:
        header = "".join(f"##{key}={json.dumps(value)}\n" for key, value in provenance.items())
        header += "\t".join((*METADATA, "profile", "class", *self.score_names)) + "\n"
        with atomic_path(self.out) as tmp, open(tmp, "wb") as out:
            out.write(gzip.compress(header.encode(), mtime=0) if self.compressed else header.encode())
            for part in parts:
                with open(part, "rb") as handle:
                    shutil.copyfileobj(handle, out)


class WideHdf5(_Output):
    """One row per variant, one (N, P) matrix per score: the format for all 919 profiles."""

    part_suffix = ".npz"

    def write_part(self, path: Path, windows: list[VariantWindows], scores: dict[str, np.ndarray]) -> None:
        meta = {name: np.asarray(values) for name, values in metadata_columns(windows).items()}
        with atomic_path(path) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, **{f"meta_{k}": v for k, v in meta.items()}, **{f"score_{k}": scores[k] for k in self.score_names})

    def assemble(self, parts: list[Path], provenance: dict) -> None:
        strings = h5py.string_dtype()
        width = len(self.labels)
        with atomic_path(self.out) as tmp, h5py.File(tmp, "w") as h5:
            h5.attrs["provenance"] = json.dumps(provenance)
            h5.create_dataset("profiles", data=np.array(self.labels, dtype=object), dtype=strings)
            h5.create_dataset("classes", data=np.array(self.classes, dtype=object), dtype=strings)
            for name in METADATA:
                dtype = np.int64 if name == "pos" else strings
                h5.create_dataset(name, shape=(0,), maxshape=(None,), dtype=dtype, chunks=(4096,))
            for name in self.score_names:
                h5.create_dataset(name, shape=(0, width), maxshape=(None, width), dtype=np.float32,
                                  chunks=(max(1, min(1024, 262_144 // width)), width), compression="gzip",
                                  compression_opts=1)
            for part in parts:
                self._append(h5, np.load(part))

    def _append(self, h5, part) -> None:
        rows = len(part["meta_pos"])
        start = h5["pos"].shape[0]
        for name in METADATA:
            h5[name].resize((start + rows,))
            values = part[f"meta_{name}"]
            h5[name][start:] = values if name == "pos" else values.astype(object)
        for name in self.score_names:
            h5[name].resize((start + rows, len(self.labels)))
            h5[name][start:] = part[f"score_{name}"]


def writer_for(out: Path, labels: list[str], classes: list[str], score_names: tuple[str, ...]):
    """The writer of ``out``'s format, chosen by its suffix."""
    name = out.name.lower()
    if name.endswith((".tsv", ".tsv.gz", ".txt", ".txt.gz")):
        return LongTsv(out, labels, classes, score_names)
    if name.endswith((".h5", ".hdf5")):
        return WideHdf5(out, labels, classes, score_names)
    raise UserError(f"--out {out}: name it .tsv or .tsv.gz (long table) or .h5 (wide matrix of all outputs)")
