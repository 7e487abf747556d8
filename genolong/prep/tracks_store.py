"""Writing a prepared track dataset (the layout :mod:`genolong.datasets.tracks` reads), one window at a
time: every array grows by one row per window, chunked one window per chunk, so memory never holds
more than the window being written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from genolong.datasets.tracks import ARRAYS, FORMAT, MANIFEST, SPLITS

#: Track fields of the manifest, in order (see :func:`track_entry`).
TRACK_FIELDS = ("index", "identifier", "description", "strand_pair", "sum_stat", "clip", "clip_soft", "scale",
                "group", "file")


def track_entry(index: int, identifier: str, *, description: str = "", strand_pair: int | None = None,
                sum_stat: str = "mean", clip: float | None = None, clip_soft: float | None = None,
                scale: float = 1.0, group: str | None = None, file: str | None = None) -> dict:
    """One manifest track. ``strand_pair`` defaults to the track itself (unstranded); ``group`` to the
    description's prefix before ``:`` (``"CAGE:heart"`` -> ``"CAGE"``), else the identifier."""
    if group is None:
        group = description.split(":", 1)[0].strip() if ":" in description else identifier
    return {"index": index, "identifier": identifier, "description": description,
            "strand_pair": index if strand_pair is None else int(strand_pair), "sum_stat": sum_stat,
            "clip": clip, "clip_soft": clip_soft, "scale": scale, "group": group, "file": file}


class TrackWriter:
    """Appends windows to ``tracks.h5`` under ``directory`` (which must exist).

    Args:
        directory: the (temporary) output directory.
        input_bp: bases per window.
        target_bins: bins per window.
        tracks: number of target columns ``T``.
        dtype: of the targets: ``float16`` (coverage) or ``uint8`` (annotation).
    """

    def __init__(self, directory: str | os.PathLike, *, input_bp: int, target_bins: int, tracks: int,
                 dtype: str = "float16"):
        import h5py

        self._h5py = h5py
        self.file = h5py.File(Path(directory) / ARRAYS, "w")
        self.input_bp, self.target_bins, self.tracks, self.dtype = input_bp, target_bins, tracks, dtype
        self.counts = dict.fromkeys(SPLITS, 0)

    def _datasets(self, split: str):
        if split in self.file:
            return self.file[split]
        group = self.file.create_group(split)
        compressed = {"compression": "gzip", "compression_opts": 1}
        group.create_dataset("sequence", (0, self.input_bp), np.uint8, maxshape=(None, self.input_bp),
                             chunks=(1, self.input_bp), **compressed)
        group.create_dataset("targets", (0, self.target_bins, self.tracks), self.dtype,
                             maxshape=(None, self.target_bins, self.tracks),
                             chunks=(1, self.target_bins, self.tracks), **compressed)
        group.create_dataset("contig", (0,), self._h5py.string_dtype(), maxshape=(None,), chunks=(1024,))
        for name in ("start", "end"):
            group.create_dataset(name, (0,), np.int64, maxshape=(None,), chunks=(1024,))
        return group

    def add(self, split: str, codes: np.ndarray, targets: np.ndarray, contig: str, start: int) -> None:
        """Append one window: ``codes`` ``(input_bp,)`` uint8, ``targets`` ``(target_bins, T)`` (cast to
        the writer's dtype), at ``contig[start:start + input_bp]``."""
        group = self._datasets(split)
        row = self.counts[split]
        for name in ("sequence", "targets", "contig", "start", "end"):
            group[name].resize(row + 1, axis=0)
        group["sequence"][row] = codes
        group["targets"][row] = targets
        group["contig"][row] = contig
        group["start"][row] = start
        group["end"][row] = start + self.input_bp
        self.counts[split] = row + 1

    def close(self) -> None:
        self.file.close()


def write_manifest(directory: str | os.PathLike, *, kind: str, input_bp: int, bin_bp: int,
                   target_offset_bp: int, target_bins: int, tracks: list[dict], splits: dict[str, int],
                   summary: dict, inputs: list[dict], options: dict) -> dict:
    """Write ``manifest.json`` in ``directory`` (the contract's fields, see :mod:`genolong.datasets.tracks`);
    returns the manifest."""
    manifest = {"format": FORMAT, "kind": kind, "input_bp": input_bp, "bin_bp": bin_bp,
                "target_offset_bp": target_offset_bp, "target_bins": target_bins, "tracks": tracks,
                "splits": {name: int(splits.get(name, 0)) for name in SPLITS}, "summary": summary,
                "inputs": inputs, "options": options}
    (Path(directory) / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest
