"""Track writers, fed ``add(name, bin_starts, bin_ends, scores)`` per chunk of bins in plan order.

NaN scores (skipped bins) are left out of bigWig and bedGraph and kept in HDF5; text writers write to a
file the caller opens and closes. :class:`RegionTrack` writes the called regions as BED6 (windows at or
above the threshold, merged as ``predict-promoter --bed``); :class:`CalledBases` counts the bp they cover.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

import h5py
import numpy as np
import pyBigWig

from genolong.classifier.records import RegionMerger

#: Output formats by file suffix.
FORMATS = {".bw": "bigwig", ".bigwig": "bigwig", ".bedgraph": "bedgraph", ".bg": "bedgraph", ".h5": "hdf5",
           ".hdf5": "hdf5"}


class BigWigTrack:
    def __init__(self, path: Path, chromosomes: list[tuple[str, int]]):
        self.file = pyBigWig.open(str(path), "w")
        self.file.addHeader(chromosomes, maxZooms=10)

    def add(self, name: str, starts: np.ndarray, ends: np.ndarray, scores: np.ndarray) -> None:
        keep = ~np.isnan(scores)
        if keep.any():
            self.file.addEntries([name] * int(keep.sum()), starts[keep].tolist(), ends=ends[keep].tolist(),
                                 values=scores[keep].astype(np.float64).tolist())

    def close(self) -> None:
        self.file.close()


class BedGraphTrack:
    def __init__(self, file: TextIO, description: str):
        self.file = file
        self.file.write(f'track type=bedGraph name="{description}"\n')

    def add(self, name: str, starts: np.ndarray, ends: np.ndarray, scores: np.ndarray) -> None:
        keep = np.flatnonzero(~np.isnan(scores))
        self.file.writelines(f"{name}\t{starts[i]}\t{ends[i]}\t{scores[i]:.6g}\n" for i in keep)

    def close(self) -> None:
        """The caller closes the text file."""


class MatrixTrack:
    """HDF5, appended in chunks (constant memory): ``scores`` (bins, P) float32, the coordinates ``chrom``
    (index into ``chromosomes``), ``start``, ``end`` (bins,), and ``profiles`` (P,)."""

    def __init__(self, path: Path, chromosomes: list[tuple[str, int]], profiles: list[str], attributes: dict):
        self.file = h5py.File(path, "w")
        text = h5py.string_dtype()  # UTF-8 (profile names are not all ASCII)
        self.file.create_dataset("chromosomes", data=[name for name, _ in chromosomes], dtype=text)
        self.file.create_dataset("chromosome_lengths", data=np.array([length for _, length in chromosomes]))
        self.file.create_dataset("profiles", data=profiles, dtype=text)
        columns = len(profiles)
        self.scores = self.file.create_dataset("scores", (0, columns), dtype="f4", maxshape=(None, columns),
                                               chunks=(max(1, 65536 // columns), columns), compression="gzip")
        self.coordinates = {key: self.file.create_dataset(key, (0,), dtype=dtype, maxshape=(None,), chunks=(65536,))
                            for key, dtype in (("chrom", "i4"), ("start", "i8"), ("end", "i8"))}
        self.file.attrs.update(attributes)
        self.index = {name: i for i, (name, _) in enumerate(chromosomes)}

    def add(self, name: str, starts: np.ndarray, ends: np.ndarray, scores: np.ndarray) -> None:
        size, new = self.scores.shape[0], len(starts)
        self.scores.resize(size + new, axis=0)
        self.scores[size:] = scores
        for key, values in (("chrom", np.full(new, self.index[name])), ("start", starts), ("end", ends)):
            self.coordinates[key].resize(size + new, axis=0)
            self.coordinates[key][size:] = values

    def close(self) -> None:
        self.file.close()


class RegionTrack:
    """Called regions from window scores: ``add(name, window_starts, window_ends, scores)``."""

    def __init__(self, file: TextIO, threshold: float, strand: str, label: str):
        self.file = file
        self.threshold, self.strand, self.label = threshold, strand, label
        self.name: str | None = None
        self.merger = RegionMerger(threshold)

    def add(self, name: str, starts: np.ndarray, ends: np.ndarray, scores: np.ndarray) -> None:
        if name != self.name:
            self._flush(self.merger.close())
            self.name = name
        for i in np.flatnonzero(scores >= self.threshold):  # NaN compares False: skipped windows drop out
            self._flush(self.merger.add(int(starts[i]), int(ends[i]), float(scores[i])))

    def _flush(self, regions) -> None:
        self.file.writelines(f"{self.name}\t{start}\t{end}\t{self.label}\t{round(1000 * score)}\t{self.strand}\n"
                             for start, end, score in regions)

    def close(self) -> None:
        self._flush(self.merger.close())


class CalledBases:
    """The bp of the scanned sequence covered by the windows scoring at least ``threshold`` (the union of
    :class:`RegionTrack`'s regions, cut to the scanned regions), in ``bp``; windows come in plan order."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.bp = 0
        self.name: str | None = None
        self.end = 0  # end of the last called window on chromosome ``name``

    def add(self, name: str, starts: np.ndarray, ends: np.ndarray, scores: np.ndarray,
            segments: np.ndarray | None = None) -> None:
        """Windows ``[starts, ends)`` (W,) with their ``scores`` (W,), cut to ``segments`` (S, 2), the scanned
        regions of the chromosome (None: all of it)."""
        if name != self.name:
            self.name, self.end = name, 0
        called = scores >= self.threshold  # NaN compares False: skipped windows drop out
        starts, ends = starts[called], ends[called]
        if segments is not None and len(starts):
            inside = np.searchsorted(segments[:, 0], (starts + ends) // 2, side="right") - 1
            starts, ends = np.maximum(starts, segments[inside, 0]), np.minimum(ends, segments[inside, 1])
        if len(starts):
            previous = np.concatenate([[self.end], ends[:-1]])
            self.bp += int(np.clip(ends - np.maximum(starts, previous), 0, None).sum())
            self.end = max(self.end, int(ends[-1]))


class SkippedTrack:
    """BED4 of the bins without a score, merged when they touch: ``mostly_N`` or ``shorter_than_window``."""

    def __init__(self, file: TextIO, window: int, lengths: dict[str, int]):
        self.file = file
        self.window, self.lengths = window, lengths
        self.open: list | None = None  # [name, start, end, reason] of the run being extended

    def add(self, name: str, starts: np.ndarray, ends: np.ndarray, scores: np.ndarray) -> None:
        reason = "shorter_than_window" if self.lengths[name] < self.window else "mostly_N"
        for i in np.flatnonzero(np.isnan(scores)):
            start, end = int(starts[i]), int(ends[i])
            if self.open is not None and self.open[0] == name and self.open[2] == start:
                self.open[2] = end
                continue
            self._flush()
            self.open = [name, start, end, reason]

    def _flush(self) -> None:
        if self.open is not None:
            self.file.write("\t".join(map(str, self.open)) + "\n")
            self.open = None

    def close(self) -> None:
        self._flush()
