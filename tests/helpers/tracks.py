"""Synthetic prepared track datasets with a learnable signal, written in the layout of
``genolong task prepare`` (manifest.json + tracks.h5) by the same writer.

Tracks (``T`` = ``tracks``, at least 1):
- ``motif+`` / ``motif-`` (a strand pair, CAGE-like): per bin, the number of ``MOTIF`` occurrences whose
  first base is in the bin / of its reverse complement whose last base is (the motif's first base on
  the minus strand), so reverse-complementing a window swaps the two exactly;
- ``gc`` (unstranded, DNase-like): per bin, the fraction of G or C;
- further tracks: ``gc`` scaled by the track's number;
- with ``long_range_bp=D`` one more, ``distal`` (unstranded): 1 in a bin whose start has ``LONG_MOTIF``
  starting ``D`` bases before it (planted in about a third of the bins), else 0: only a model that sees
  ``D`` bases upstream of the bin can predict it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from genolong.dna.sequence import BASE_CODES, reverse_complement
from genolong.prep.tracks_store import TrackWriter, track_entry, write_manifest

MOTIF = "TATAAA"
LONG_MOTIF = "CACGTGAC"


def _count_motifs(codes: np.ndarray, motif: str, bin_bp: int, offset: int, bins: int, *,
                  last_base: bool = False) -> np.ndarray:
    """Occurrences of ``motif`` per bin, each counted in the bin of its first base (``last_base``: its last)."""
    pattern = BASE_CODES[np.frombuffer(motif.encode(), np.uint8)]
    hits = np.all(np.lib.stride_tricks.sliding_window_view(codes, len(pattern)) == pattern, axis=1)
    anchors = np.zeros(len(codes), dtype=np.float32)
    lead = len(pattern) - 1 if last_base else 0
    anchors[lead:lead + len(hits)] = hits
    return anchors[offset:offset + bins * bin_bp].reshape(bins, bin_bp).sum(axis=1)


def synthetic_targets(codes: np.ndarray, *, bin_bp: int, target_offset_bp: int, target_bins: int,
                      tracks: int, long_range_bp: int | None = None) -> np.ndarray:
    """The fixture's ``(target_bins, T)`` float32 targets of one window's ``codes`` (see the module doc)."""
    region = codes[target_offset_bp:target_offset_bp + target_bins * bin_bp].reshape(target_bins, bin_bp)
    gc = np.isin(region, (1, 2)).mean(axis=1, dtype=np.float32)
    columns = [_count_motifs(codes, MOTIF, bin_bp, target_offset_bp, target_bins),
               _count_motifs(codes, reverse_complement(MOTIF), bin_bp, target_offset_bp, target_bins,
                             last_base=True), gc]
    columns += [gc * (index + 1) for index in range(3, tracks)]
    columns = columns[:tracks]
    if long_range_bp is not None:
        pattern = BASE_CODES[np.frombuffer(LONG_MOTIF.encode(), np.uint8)]
        bin_starts = target_offset_bp + np.arange(target_bins) * bin_bp - long_range_bp
        columns.append(np.array([float(np.array_equal(codes[s:s + len(pattern)], pattern)) for s in bin_starts],
                                dtype=np.float32))
    return np.stack(columns, axis=1)


def synthetic_window(rng: np.random.Generator, *, input_bp: int, bin_bp: int, target_offset_bp: int,
                     target_bins: int, long_range_bp: int | None = None) -> np.ndarray:
    """Random ``(input_bp,)`` codes with ``MOTIF`` planted about once per 4 bins on either strand and, with
    ``long_range_bp``, ``LONG_MOTIF`` planted ``long_range_bp`` before about a third of the bin starts."""
    codes = rng.integers(0, 4, input_bp, dtype=np.uint8)
    plus, minus = (BASE_CODES[np.frombuffer(m.encode(), np.uint8)] for m in (MOTIF, reverse_complement(MOTIF)))
    for start in rng.integers(0, input_bp - len(MOTIF), max(1, input_bp // (4 * bin_bp))):
        codes[start:start + len(MOTIF)] = plus if rng.random() < 0.5 else minus
    if long_range_bp is not None:
        pattern = BASE_CODES[np.frombuffer(LONG_MOTIF.encode(), np.uint8)]
        for b in np.flatnonzero(rng.random(target_bins) < 1 / 3):
            start = target_offset_bp + b * bin_bp - long_range_bp
            if 0 <= start <= input_bp - len(pattern):
                codes[start:start + len(pattern)] = pattern
    return codes


def write_synthetic_tracks(directory, *, windows: tuple[int, int, int] | int = (8, 4, 4), input_bp: int = 1024,
                           bin_bp: int = 32, target_bp: int | None = None, tracks: int = 3, seed: int = 0,
                           long_range_bp: int | None = None, n_fraction: float = 0.0) -> Path:
    """Write a prepared track dataset to ``directory`` (created) and return it.

    Args:
        windows: train / valid / test window counts (an int: that many train windows, a quarter each of
            valid and test, at least 1).
        input_bp, bin_bp: window length and bin size; ``target_bp`` (default half the window, centred) must
            be a multiple of ``bin_bp``.
        tracks: local tracks (see the module doc); ``long_range_bp`` adds the ``distal`` track.
        seed: of the sequences.
        n_fraction: the fraction of each window's bases set to N (code 4) at random.
    """
    if isinstance(windows, int):
        windows = (windows, max(1, windows // 4), max(1, windows // 4))
    target_bp = input_bp // 2 if target_bp is None else target_bp
    target_offset_bp, target_bins = (input_bp - target_bp) // 2, target_bp // bin_bp
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    names = [("motif+", "CAGE:motif plus", 1), ("motif-", "CAGE:motif minus", 0), ("gc", "DNase:gc", None)]
    names += [(f"gc{index}", f"RNA:gc times {index + 1}", None) for index in range(3, tracks)]
    entries = [track_entry(index, identifier, description=description, strand_pair=pair)
               for index, (identifier, description, pair) in enumerate(names[:tracks])]
    if long_range_bp is not None:
        entries.append(track_entry(len(entries), "distal", description=f"DISTAL:motif {long_range_bp} bp upstream"))
    geometry = {"input_bp": input_bp, "bin_bp": bin_bp, "target_offset_bp": target_offset_bp,
                "target_bins": target_bins}
    rng = np.random.default_rng(seed)
    writer = TrackWriter(directory, input_bp=input_bp, target_bins=target_bins, tracks=len(entries))
    try:
        for split, count in zip(("train", "valid", "test"), windows, strict=True):
            for row in range(count):
                codes = synthetic_window(rng, long_range_bp=long_range_bp, **geometry)
                codes[rng.random(input_bp) < n_fraction] = 4
                targets = synthetic_targets(codes, bin_bp=bin_bp, target_offset_bp=target_offset_bp,
                                            target_bins=target_bins, tracks=tracks, long_range_bp=long_range_bp)
                writer.add(split, codes, targets, f"synthetic_{split}_{row}", 0)
    finally:
        writer.close()
    write_manifest(directory, kind="coverage", tracks=entries, splits=writer.counts,
                   summary={"synthetic": True}, inputs=[], options={"seed": seed, "long_range_bp": long_range_bp},
                   **geometry)
    return directory


def write_bigwig(path, coverage: dict[str, np.ndarray], lengths: dict[str, int] | None = None) -> Path:
    """A bigWig with a value per base: ``coverage`` maps a chromosome to ``(length,)`` float values (NaN: no
    value there); ``lengths`` overrides the chromosome lengths the header declares."""
    import pyBigWig

    path = Path(path)
    handle = pyBigWig.open(str(path), "w")
    handle.addHeader([(name, (lengths or {}).get(name, len(values))) for name, values in coverage.items()])
    for name, values in coverage.items():
        kept = np.flatnonzero(~np.isnan(values))
        if len(kept):
            handle.addEntries([name] * len(kept), kept.tolist(), ends=(kept + 1).tolist(),
                              values=np.asarray(values, dtype=np.float64)[kept].tolist())
    handle.close()
    return path


def prepare_mm10_tiny(shared_data, directory) -> Path:
    """``genolong task prepare`` of ``tracks/mm10_tiny`` (windows FASTA + regions BED + bigWigs) into
    ``directory/prepared``. Its bigWigs hold the producer's final per-bin values (a value every 32 bp), so
    the table given reads each back unchanged (``mean`` of a bin, scale 1, no clip), keeping the
    producer's identifiers, descriptions and strand pairs."""
    import csv

    from genolong.cli.main import main

    source = Path(shared_data) / "tracks" / "mm10_tiny"
    directory = Path(directory)
    files = sorted((source / "tracks").glob("*.bw"))
    with open(source / "targets.tsv", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    lines = ["identifier\tfile\tdescription\tstrand_pair\tsum_stat\tscale"]
    lines += [f"{row['identifier']}\t{file}\t{row['description']}\t{row['strand_pair']}\tmean\t1"
              for row, file in zip(rows, files, strict=True)]
    (directory / "targets.tsv").write_text("\n".join(lines) + "\n")
    out = directory / "prepared"
    code = main(["task", "prepare", "--genome", str(source / "windows.fa.gz"), "--tracks", str(directory / "targets.tsv"),
                 "--regions", str(source / "regions.bed"), "--split-column", "7", "--out", str(out)])
    assert code == 0
    return out
