"""A prepared genome-track dataset (``genolong task prepare`` with track inputs,
:mod:`genolong.prep.tracks_builder`)::

    manifest.json   format, kind, geometry (input_bp, bin_bp, target_offset_bp, target_bins), tracks,
                    splits, summary, inputs (path, sha256), options
    tracks.h5       per split S: /S/sequence (N, input_bp) uint8 codes A0 C1 G2 T3 N4,
                    /S/targets (N, target_bins, T) float16 (annotation: uint8 0/1),
                    /S/contig (N,) str, /S/start, /S/end (N,) int64: 0-based half-open window coordinates

Each window's targets cover ``[target_offset_bp, target_offset_bp + target_bins * bin_bp)`` of it; both
arrays are chunked one window per chunk, so a reader holds one window at a time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError
from genolong.dna.sequence import ALPHABET

#: Format tag written to (and required in) manifest.json.
FORMAT = "genolong.tracks/1"
#: The prepared splits, in order.
SPLITS = ("train", "valid", "test")
#: The file names inside a prepared directory.
MANIFEST = "manifest.json"
ARRAYS = "tracks.h5"
#: Code -> complementary code over A0 C1 G2 T3 N4.
COMPLEMENT_CODES = np.array([3, 2, 1, 0, 4], dtype=np.uint8)
_ALPHABET_BYTES = np.frombuffer(ALPHABET.encode(), np.uint8)
_GEOMETRY = ("input_bp", "bin_bp", "target_offset_bp", "target_bins")


def _require_h5py():
    import h5py  # a heavy import: only where a track file is opened

    return h5py


class TrackSplit:
    """One split of a prepared track dataset: windows read one at a time from ``tracks.h5``.

    Picklable and torch-free: the HDF5 file is opened lazily on first read in each process (a
    DataLoader worker reopens it), never shared across a fork.
    """

    def __init__(self, path: str | os.PathLike, name: str, size: int):
        self.path = Path(path)
        self.name = name
        self._size = size
        self._file = None
        self._pid = None

    def __len__(self) -> int:
        return self._size

    def __getstate__(self) -> dict:
        return {"path": self.path, "name": self.name, "_size": self._size, "_file": None, "_pid": None}

    def _group(self):
        if self._file is None or self._pid != os.getpid():
            self._file = _require_h5py().File(self.path, "r")
            self._pid = os.getpid()
        return self._file[self.name]

    def _index(self, i: int) -> int:
        if not -self._size <= i < self._size:
            raise IndexError(f"window {i} of a {self.name} split of {self._size}")
        return i % self._size

    def codes(self, i: int) -> np.ndarray:
        """The window's bases as ``(input_bp,)`` uint8 codes A0 C1 G2 T3 N4."""
        return self._group()["sequence"][self._index(i)]

    def sequence(self, i: int) -> str:
        """The window's bases as an ACGTN string of ``input_bp`` characters."""
        return _ALPHABET_BYTES[self.codes(i)].tobytes().decode("ascii")

    def targets(self, i: int) -> np.ndarray:
        """The window's targets, ``(target_bins, T)`` float32 (annotation: 0/1)."""
        return self._group()["targets"][self._index(i)].astype(np.float32)

    def region(self, i: int) -> tuple[str, int, int]:
        """The window's ``(contig, start, end)``, 0-based half-open; beyond a contig's end it holds N."""
        group, i = self._group(), self._index(i)
        contig = group["contig"][i]
        return (contig.decode() if isinstance(contig, bytes) else str(contig),
                int(group["start"][i]), int(group["end"][i]))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class TrackDataset:
    """A prepared track directory (``manifest.json`` + ``tracks.h5``); :class:`InputError` (one line) if
    either is missing or the manifest is not a ``genolong.tracks/1`` manifest. A context manager."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        manifest_path = self.directory / MANIFEST
        if not manifest_path.is_file():
            raise InputError(self.directory, "not a prepared track dataset (no manifest.json)",
                             hint="make one with `genolong task prepare --genome FASTA --tracks TABLE ...`")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(manifest_path, f"not JSON: {err}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise InputError(manifest_path, f"not a {FORMAT} manifest",
                             hint="prepare the directory again with `genolong task prepare`")
        missing = [key for key in (*_GEOMETRY, "kind", "tracks", "splits") if key not in manifest]
        if missing:
            raise InputError(manifest_path, f"manifest lacks {', '.join(missing)}")
        if not (self.directory / ARRAYS).is_file():
            raise InputError(self.directory, f"{ARRAYS} is missing", hint="prepare the directory again")
        self.manifest = manifest
        self.kind: str = manifest["kind"]
        self.input_bp, self.bin_bp, self.target_offset_bp, self.target_bins = (
            int(manifest[key]) for key in _GEOMETRY)
        self.tracks: list[dict] = manifest["tracks"]
        self.strand_pair = np.array([int(track["strand_pair"]) for track in self.tracks], dtype=np.int64)
        self.groups: list[str] = [str(track["group"]) for track in self.tracks]
        self.splits: list[str] = [name for name in SPLITS if manifest["splits"].get(name, 0) > 0]
        self._open: dict[str, TrackSplit] = {}

    def split(self, name: str) -> TrackSplit:
        """The split ``name``; :class:`InputError` naming the present splits if it has no windows."""
        if name not in self.splits:
            raise InputError(self.directory, f"no {name} windows (splits here: {', '.join(self.splits)})")
        if name not in self._open:
            self._open[name] = TrackSplit(self.directory / ARRAYS, name, int(self.manifest["splits"][name]))
        return self._open[name]

    def close(self) -> None:
        for split in self._open.values():
            split.close()

    def __enter__(self) -> TrackDataset:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def reverse_complement_window(codes: np.ndarray, targets: np.ndarray,
                              strand_pair: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The window read on the other strand.

    Args:
        codes: ``(..., input_bp)`` uint8 codes A0 C1 G2 T3 N4.
        targets: ``(..., bins, T)``.
        strand_pair: ``(T,)``: the index of each track's other-strand track (itself if unstranded).

    Returns:
        Codes reversed and complemented (N stays N), and targets with bins reversed and columns
        swapped with their strand pair: ``out[..., b, t] = targets[..., bins - 1 - b, strand_pair[t]]``.
    """
    flipped = COMPLEMENT_CODES[np.asarray(codes)[..., ::-1]]
    return flipped, np.ascontiguousarray(np.asarray(targets)[..., ::-1, :][..., np.asarray(strand_pair)])


def shift_window(codes: np.ndarray, shift: int) -> np.ndarray:
    """``codes`` (``(..., L)`` uint8) moved ``shift`` bases right (left if negative) along the last axis,
    the bases shifted in being N (4): ``out[..., i] = codes[..., i - shift]``. Targets stay put."""
    codes = np.asarray(codes)
    out = np.full_like(codes, 4)
    length = codes.shape[-1]
    if abs(shift) >= length:
        return out
    if shift >= 0:
        out[..., shift:] = codes[..., :length - shift]
    else:
        out[..., :shift] = codes[..., -shift:]
    return out
