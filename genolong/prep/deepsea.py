"""Readers for the DeepSEA training bundle (Zhou & Troyanskaya 2015), as used by BigBird App. F.3.

``train.mat`` is MATLAB v7.3 (HDF5; column-major, so h5py sees ``trainxdata`` ``(1000, 4, rows)`` and
``traindata`` ``(919, rows)``), read in chunks of its 4.4M rows. ``valid.mat`` and ``test.mat`` are
MATLAB v5 (``(rows, 4, 1000)`` and ``(rows, 919)``), loaded whole when first read (no random access).
Sequences are one-hot in channel order A, G, C, T (all zero: N); labels 0/1 in DeepSEA column order
(DHS 0-124, TF 125-814, HM 815-918). Every sequence is there on both strands (:func:`strand_pair_layout`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError
from genolong.dna.sequence import reverse_complement_rows
from genolong.evaluation.profiles import N_PROFILES

#: The DeepSEA files, by split name.
SPLITS = ("train", "valid", "test")
#: One-hot channel order of the .mat files.
ONE_HOT_ORDER = "AGCT"
# one-hot channel index (or 4 for an all-zero column) -> ASCII base
_CHANNEL_TO_ASCII = np.frombuffer((ONE_HOT_ORDER + "N").encode(), np.uint8)
_V5_HEADER = b"MATLAB 5.0 MAT-file"
FORMAT_V73 = "MATLAB v7.3 (HDF5)"
FORMAT_V5 = "MATLAB v5"
_DAMAGED = "the file is truncated or damaged; download or unpack it again"


class DeepSEAMat:
    """One DeepSEA ``.mat`` file of either format (``{split}xdata``, ``{split}data``), read in chunks of
    rows; its ``format``, ``rows`` and sequence ``length`` are checked on opening (else an InputError)."""

    def __init__(self, path: str | os.PathLike, split: str):
        self.path = Path(path)
        self.split = split
        self.x_key, self.y_key = f"{split}xdata", f"{split}data"
        if not self.path.is_file():
            raise InputError(self.path, "no such file")
        import h5py

        self._h5 = None
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None  # v5 data, loaded on first read
        if h5py.is_hdf5(self.path):
            self.format = FORMAT_V73
            try:
                self._h5 = h5py.File(self.path, "r")
            except OSError as err:
                raise InputError(self.path, f"unreadable HDF5 (MATLAB v7.3) file: {err}", hint=_DAMAGED) from None
            self._require_keys([key for key, item in self._h5.items() if isinstance(item, h5py.Dataset)])
            stored = self._h5[self.x_key].shape, self._h5[self.y_key].shape
            # HDF5 sees MATLAB's (rows, 4, length) and (rows, 919) with the axes reversed.
            self.length, self.rows = self._check_shapes(*stored, stored[0][::-1], stored[1][::-1],
                                                        "(length, 4, rows)", f"({N_PROFILES}, rows)")
        else:
            self.format = FORMAT_V5
            stored = self._v5_shapes()
            self.length, self.rows = self._check_shapes(*stored, *stored, "(rows, 4, length)",
                                                        f"(rows, {N_PROFILES})")

    def _v5_shapes(self) -> tuple[tuple, tuple]:
        """Shapes of the two variables of a v5 file, from its headers."""
        import scipy.io

        with open(self.path, "rb") as handle:
            header = handle.read(len(_V5_HEADER))
        if header != _V5_HEADER:
            raise InputError(self.path,
                             "not a MATLAB v5 or v7.3 file (neither HDF5 nor a 'MATLAB 5.0 MAT-file' header)")
        try:
            shapes = {name: shape for name, shape, _ in scipy.io.whosmat(self.path)}
        except (scipy.io.matlab.MatReadError, ValueError, IndexError, OSError) as err:
            raise InputError(self.path, f"unreadable MATLAB v5 file ({err})") from None
        self._require_keys(list(shapes))
        return shapes[self.x_key], shapes[self.y_key]

    def _v5_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The v5 one-hot and label arrays; the format has no random access, so they load whole."""
        if self._arrays is None:
            import scipy.io

            try:
                mat = scipy.io.loadmat(self.path, variable_names=[self.x_key, self.y_key])
            except (scipy.io.matlab.MatReadError, ValueError, OSError) as err:
                raise InputError(self.path, f"unreadable MATLAB v5 file ({err})", hint=_DAMAGED) from None
            self._arrays = mat[self.x_key], mat[self.y_key]
        return self._arrays

    def _require_keys(self, keys: list[str]) -> None:
        missing = [key for key in (self.x_key, self.y_key) if key not in keys]
        if missing:
            raise InputError(self.path, f"expected variables '{self.x_key}' and '{self.y_key}' for the "
                             f"{self.split} split, missing {missing}; the file has {sorted(keys)}")

    def _check_shapes(self, stored_x, stored_y, x_shape, y_shape, x_layout: str, y_layout: str):
        """``(length, rows)`` of shapes valid as ``(rows, 4, length)`` / ``(rows, 919)``."""
        if len(x_shape) != 3 or x_shape[1] != 4:
            raise InputError(self.path, f"'{self.x_key}' has shape {stored_x}; expected {x_layout} "
                             f"one-hot sequences with 4 channels ({ONE_HOT_ORDER})")
        if len(y_shape) != 2 or y_shape[1] != N_PROFILES:
            columns = y_shape[1] if len(y_shape) == 2 else "?"
            raise InputError(self.path, f"'{self.y_key}' has shape {stored_y}: {columns} label columns, "
                             f"DeepSEA has {N_PROFILES}; expected {y_layout}")
        if x_shape[0] != y_shape[0]:
            raise InputError(
                self.path, f"'{self.x_key}' {stored_x} and '{self.y_key}' {stored_y} disagree on "
                f"the number of rows ({x_shape[0]} vs {y_shape[0]}); expected {x_layout} and {y_layout}")
        return int(x_shape[2]), int(x_shape[0])

    def chunks(self, rows_per_chunk: int, start: int = 0) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield ``(first_row, sequences (rows, length) uint8 ASCII, labels (rows, 919) uint8)`` from row
        ``start`` on, ``rows_per_chunk`` rows (rounded up to whole HDF5 chunks) at a time, checked."""
        step = rows_per_chunk
        if self._h5 is not None:
            one_hot_data, label_data = self._h5[self.x_key], self._h5[self.y_key]
            if one_hot_data.chunks:
                along_rows = one_hot_data.chunks[2]
                step = -(-rows_per_chunk // along_rows) * along_rows
        else:
            one_hot_data, label_data = self._v5_arrays()
        for begin in range(start, self.rows, step):
            end = min(begin + step, self.rows)
            if self._h5 is not None:
                try:
                    one_hot = np.transpose(one_hot_data[:, :, begin:end], (2, 1, 0))  # (rows, 4, length)
                    labels = np.transpose(label_data[:, begin:end])  # (rows, 919)
                except OSError as err:  # a truncated or damaged data block
                    raise InputError(self.path, f"cannot read rows {begin}-{end}: {err}", hint=_DAMAGED) from None
            else:
                one_hot, labels = one_hot_data[begin:end], label_data[begin:end]
            yield begin, decode_one_hot(one_hot, self.path, begin), check_labels(labels, self.path, begin)

    def close(self) -> None:
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None
        self._arrays = None

    def __enter__(self) -> DeepSEAMat:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def decode_one_hot(one_hot: np.ndarray, path, first_row: int = 0) -> np.ndarray:
    """One-hot ``(rows, 4, length)`` with channels A, G, C, T -> ``(rows, length)`` ASCII; all-zero = N.
    An InputError for a value other than 0/1, or a position with two or more bases set."""
    invalid = (one_hot != 0) & (one_hot != 1)
    if invalid.any():
        row, channel, position = np.argwhere(invalid)[0]
        raise InputError(path, f"row {first_row + row}, position {position}: one-hot value "
                         f"{one_hot[row, channel, position].item()!r}; expected 0 or 1")
    hot = one_hot.astype(np.uint8)
    total = hot.sum(axis=1, dtype=np.uint8)  # (rows, length)
    if (total > 1).any():
        row, position = np.argwhere(total > 1)[0]
        raise InputError(path, f"row {first_row + row}, position {position}: {total[row, position]} bases "
                         "set; a one-hot column has at most one 1 (all zeros mean N)")
    channel = hot[:, 1] + 2 * hot[:, 2] + 3 * hot[:, 3] + 4 * (total == 0)  # (rows, length)
    return _CHANNEL_TO_ASCII[channel]


def check_labels(labels: np.ndarray, path, first_row: int = 0) -> np.ndarray:
    """Validate 0/1 labels ``(rows, 919)`` and return them as uint8."""
    invalid = (labels != 0) & (labels != 1)
    if invalid.any():
        row, column = np.argwhere(invalid)[0]
        value = labels[row, column].item()
        raise InputError(path, f"row {first_row + row}, profile {column}: label {value!r}; expected 0 or 1")
    return labels.astype(np.uint8)


def strand_pair_layout(sequences: np.ndarray, labels: np.ndarray, chunk_rows: int = 65536) -> dict:
    """``{"layout": ..., "pair_fraction": {layout: fraction of pairs whose sequences match}}``: how the
    strand copies of ``sequences`` ``(rows, length)`` uint8 ASCII (memmaps are read in chunks) and
    ``labels`` ``(rows, 919)`` are arranged: ``halves`` (row ``i + rows/2`` reverse-complements row ``i``)
    or ``interleaved`` (row ``2i + 1`` of ``2i``) when every pair matches, labels too, else ``none``."""
    rows = len(sequences)
    fractions = {}
    layout = "none"
    if rows >= 2 and rows % 2 == 0:
        half = rows // 2
        pairings = {"halves": (np.arange(half), np.arange(half) + half),
                    "interleaved": (np.arange(0, rows, 2), np.arange(1, rows, 2))}
        for name, (first, second) in pairings.items():
            sequence_pairs = label_pairs = 0
            for begin in range(0, half, chunk_rows):
                a, b = first[begin : begin + chunk_rows], second[begin : begin + chunk_rows]
                same = (reverse_complement_rows(np.asarray(sequences[a])) == np.asarray(sequences[b])).all(
                    axis=1)
                sequence_pairs += int(same.sum())
                label_pairs += int(
                    (same & (np.asarray(labels[a]) == np.asarray(labels[b])).all(axis=1)).sum())
            fractions[name] = sequence_pairs / half
            if label_pairs == half and layout == "none":
                layout = name
    return {"layout": layout, "pair_fraction": fractions}
