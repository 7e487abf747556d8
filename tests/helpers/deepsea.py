"""Fixtures for the DeepSEA tests, built from the 100 real DeepSEA test rows in tests/data.

``gena_lm_deepsea_test.dataset.csv.gz`` has one row per line: an 8,000-bp hg19 sequence
and 919 labels; the DeepSEA 1,000-bp input is ``sequence[3500:4500]``.

The .mat writers here use h5py and scipy directly, independently of the package's
readers, with the layouts of the real bundle: v7.3 with MATLAB's reversed axes and a
MATLAB header in the HDF5 user block, v5 with rows first.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from genolong.dna.sequence import reverse_complement

CSV = Path("chromatin") / "gena_lm_deepsea_test.dataset.csv.gz"
WINDOW, INPUT = 8000, 1000
CENTRE = slice(3500, 4500)


def real_rows(real_data: Path) -> tuple[list[str], np.ndarray]:
    """The 100 real rows: 8,000-bp sequences and ``(100, 919)`` uint8 labels."""
    sequences, labels = [], []
    with gzip.open(real_data / CSV, "rt") as handle:
        for line in handle:
            fields = line.rstrip("\n").split(",")
            sequences.append(fields[0])
            labels.append([int(value) for value in fields[1:]])
    return sequences, np.array(labels, dtype=np.uint8)


def as_array(sequences: list[str]) -> np.ndarray:
    """Strings -> ``(rows, length)`` uint8 ASCII."""
    return np.array([np.frombuffer(seq.encode(), np.uint8) for seq in sequences])


def deepsea_rows(real_data: Path) -> tuple[np.ndarray, np.ndarray]:
    """A DeepSEA-style file body: the 100 inputs, then their reverse complements (the "halves" layout).

    Returns:
        ``(200, 1000)`` uint8 ASCII and ``(200, 919)`` uint8 labels.
    """
    windows, labels = real_rows(real_data)
    inputs = [window[CENTRE] for window in windows]
    return as_array(inputs + [reverse_complement(seq) for seq in inputs]), np.concatenate([labels, labels])


def one_hot_agct(sequences: np.ndarray) -> np.ndarray:
    """``(rows, length)`` ASCII -> ``(rows, 4, length)`` uint8 one-hot, channels A, G, C, T; N = all zero."""
    return np.stack([sequences == ord(base) for base in "AGCT"], axis=1).astype(np.uint8)


MATLAB_HEADER = (
    b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan 12 10:00:00 2015 HDF5 schema 1.00 ."
)


def write_mat_v73(path: Path, split: str, sequences: np.ndarray, labels: np.ndarray, *, hdf5_chunk_rows=16):
    """Write a MATLAB v7.3 (HDF5) file like DeepSEA's train.mat: ``(1000, 4, rows)`` and ``(919, rows)``."""
    import h5py

    one_hot = one_hot_agct(sequences)  # (rows, 4, length)
    with h5py.File(path, "w", userblock_size=512) as handle:
        handle.create_dataset(
            f"{split}xdata",
            data=one_hot.transpose(2, 1, 0),
            chunks=(one_hot.shape[2], 4, hdf5_chunk_rows),
            compression="gzip",
        )
        handle.create_dataset(f"{split}data", data=labels.T)
    with open(path, "r+b") as handle:  # MATLAB's 128-byte header inside the 512-byte user block
        handle.write(MATLAB_HEADER.ljust(116) + bytes(8) + b"\x00\x02IM")


def write_mat_v5(path: Path, split: str, sequences: np.ndarray, labels: np.ndarray) -> None:
    """Write a MATLAB v5 file like DeepSEA's valid/test.mat: ``(rows, 4, 1000)`` and ``(rows, 919)``."""
    import scipy.io

    scipy.io.savemat(path, {f"{split}xdata": one_hot_agct(sequences), f"{split}data": labels}, format="5")


def write_bundle(directory: Path, sequences: np.ndarray, labels: np.ndarray) -> Path:
    """A DeepSEA bundle directory: train.mat (v7.3), valid.mat and test.mat (v5), all the same rows."""
    directory.mkdir(parents=True, exist_ok=True)
    write_mat_v73(directory / "train.mat", "train", sequences, labels)
    write_mat_v5(directory / "valid.mat", "valid", sequences, labels)
    write_mat_v5(directory / "test.mat", "test", sequences, labels)
    return directory


def assemble_contigs(windows: list[str], min_overlap: int = INPUT) -> list[tuple[str, list[tuple[int, int]]]]:
    """Merge consecutive overlapping windows (neighbouring DeepSEA bins) back into genome segments.

    Returns:
        ``[(contig, [(row, offset of the row's window in the contig), ...]), ...]``.
    """
    contigs: list[tuple[str, list[tuple[int, int]]]] = []
    for row, window in enumerate(windows):
        if contigs:
            contig, members = contigs[-1]
            last_row, last_offset = members[-1]
            previous = windows[last_row]
            shift = next(
                (
                    s
                    for s in range(1, len(window) - min_overlap + 1)
                    if previous[s:] == window[: len(window) - s]
                ),
                None,
            )
            if shift is not None:
                offset = last_offset + shift
                contig += window[len(contig) - offset :]
                assert contig[offset : offset + len(window)] == window
                contigs[-1] = (contig, members + [(row, offset)])
                continue
        contigs.append((window, [(row, 0)]))
    return contigs


def synthetic_genome(windows: list[str], seed: int = 0):
    """A two-chromosome genome embedding every window once, every other contig reverse-complemented.

    Contigs are separated by random spacers of 500-3,000 bp.

    Returns:
        ``records`` ``[(name, sequence)]`` and ``expected`` ``{row: (chrom index, start of
        the central 1,000 bp on the plus strand, strand)}``.
    """
    rng = np.random.default_rng(seed)
    contigs = assemble_contigs(windows)
    chromosomes: list[list[str]] = [[], []]
    lengths = [0, 0]
    expected = {}
    for number, (contig, members) in enumerate(contigs):
        chrom = number % 2
        spacer = "".join(rng.choice(list("ACGT"), int(rng.integers(500, 3000))))
        start = lengths[chrom] + len(spacer)
        minus = (number // 2) % 2 == 1
        chromosomes[chrom] += [spacer, reverse_complement(contig) if minus else contig]
        lengths[chrom] = start + len(contig)
        for row, offset in members:
            centre = offset + CENTRE.start
            expected[row] = (
                (chrom, start + len(contig) - centre - INPUT, -1) if minus else (chrom, start + centre, 1)
            )
    tail = "".join(rng.choice(list("ACGT"), 1000))
    records = [(f"chrSynth{index + 1}", "".join(pieces) + tail) for index, pieces in enumerate(chromosomes)]
    return records, expected
