"""Coverage tracks in: the targets table, the bigWig files it names, and Basenji's binning.

The targets table is Basenji's ``targets.txt``: tab-separated with a header; ``identifier`` is
required, ``file`` unless the files are given on the command line; optional ``index``,
``description``, ``strand_pair`` (the index of the same assay on the other strand; default the
track itself), ``sum_stat`` (default ``sum``), ``clip``, ``clip_soft`` (empty or ``none``: no clip),
``scale`` (default 1) and ``group`` (default: the description's prefix before ``:``). A relative
``file`` is read relative to the table's directory.

A bin's value is computed from the per-base coverage ``x`` of its ``bin_bp`` bases as Borzoi's data
pipeline does (Linder et al. 2025, *Nature Genetics*, "Predicting RNA-seq coverage from DNA sequence
as a unifying model of gene regulation"; calico/baskerville ``hound_data_read``, current transform):
``x`` times ``scale``; the ``sum_stat`` over the bin: ``sum``, ``mean``, ``max``, ``median``,
``sum_sqrt`` = sqrt(1 + sum) - 1, ``mean_sqrt`` = sqrt(1 + mean) - 1, ``sum_exp75`` = (1 + sum)^0.75 - 1;
then above ``clip_soft`` a value ``v`` becomes ``clip_soft - 1 + sqrt(v - clip_soft + 1)``; then values
are clipped to ``[-clip, clip]`` and to float16's range and stored as float16. Bases with no value in
the bigWig (NaN) count as 0 (counted in the summary); per-base values are summed in float32 (the
reference pipeline rounds them to float16 first, which only loses precision).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError, UserError
from genolong.dna.genome import canonical_chrom
from genolong.prep.tracks_store import track_entry

#: bin value from the scaled per-base values ``(bins, bin_bp)``: see the module doc.
SUM_STATS = {
    "sum": lambda x: x.sum(axis=1, dtype=np.float32),
    "mean": lambda x: x.mean(axis=1, dtype=np.float32),
    "max": lambda x: x.max(axis=1),
    "median": lambda x: np.median(x, axis=1).astype(np.float32),
    "sum_sqrt": lambda x: np.sqrt(1 + x.sum(axis=1, dtype=np.float32)) - 1,
    "mean_sqrt": lambda x: np.sqrt(1 + x.mean(axis=1, dtype=np.float32)) - 1,
    "sum_exp75": lambda x: (1 + x.sum(axis=1, dtype=np.float32)) ** 0.75 - 1,
}
_FLOAT16_MAX = float(np.finfo(np.float16).max)


@dataclass(frozen=True)
class TrackSpec:
    """One row of the targets table: how one bigWig becomes one target column."""

    index: int
    identifier: str
    file: Path
    description: str = ""
    strand_pair: int | None = None
    sum_stat: str = "sum"
    clip: float | None = None
    clip_soft: float | None = None
    scale: float = 1.0
    group: str | None = None

    def entry(self) -> dict:
        """The manifest's record of this track (:func:`~genolong.prep.tracks_store.track_entry`)."""
        return track_entry(self.index, self.identifier, description=self.description, strand_pair=self.strand_pair,
                           sum_stat=self.sum_stat, clip=self.clip, clip_soft=self.clip_soft, scale=self.scale,
                           group=self.group, file=str(self.file))


def bin_coverage(values: np.ndarray, bin_bp: int, spec: TrackSpec) -> np.ndarray:
    """``(bins * bin_bp,)`` per-base coverage (NaN = no value = 0) into ``(bins,)`` float16 bin values."""
    scaled = np.nan_to_num(np.asarray(values, dtype=np.float32), nan=0.0) * np.float32(spec.scale)
    binned = SUM_STATS[spec.sum_stat](scaled.reshape(-1, bin_bp)).astype(np.float32)
    if spec.clip_soft is not None:
        over = binned > spec.clip_soft
        binned[over] = spec.clip_soft - 1 + np.sqrt(binned[over] - spec.clip_soft + 1)
    if spec.clip is not None:
        binned = np.clip(binned, -spec.clip, spec.clip)
    return np.clip(binned, -_FLOAT16_MAX, _FLOAT16_MAX).astype(np.float16)


def _number(text: str, column: str, path: Path, line: int, *, optional: bool) -> float | None:
    if optional and text.strip().lower() in ("", "none", "nan", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(path, f"{column} must be a number{' or empty' if optional else ''}, got {text!r}",
                         line=line) from None
    if not math.isfinite(value) or (optional and value <= 0):
        raise InputError(path, f"{column} must be a finite {'positive ' if optional else ''}number, got {text!r}",
                         line=line)
    return value


def read_targets_table(path: str | Path, files: list[Path] | None = None) -> list[TrackSpec]:
    """The tracks of a targets table (see the module doc); ``files`` (one per row, in order) replace a
    missing ``file`` column. InputError (naming the line) for a missing column, an unknown ``sum_stat``, a
    bad number, an out-of-range or unpaired ``strand_pair``, a repeated identifier or a missing file."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    if not rows:
        raise InputError(path, "no tracks (a header line and one row per track expected)")
    header = set(rows[0])
    needed = {"identifier"} | (set() if files else {"file"})
    if needed - header:
        raise InputError(path, f"no {', '.join(sorted(needed - header))} column (columns: {', '.join(rows[0])})",
                         hint="Basenji's targets.txt columns: index, identifier, file, clip, clip_soft, scale, "
                         "sum_stat, strand_pair, description")
    if files and len(files) != len(rows):
        raise UserError(f"{path}: {len(rows)} tracks but {len(files)} --bigwig files; give one per row, in order")
    specs = []
    for row_number, row in enumerate(rows):
        line = row_number + 2
        sum_stat = (row.get("sum_stat") or "sum").strip()
        if sum_stat not in SUM_STATS:
            raise InputError(path, f"unknown sum_stat {sum_stat!r}", line=line,
                             hint=f"one of {', '.join(SUM_STATS)}")
        file = Path(files[row_number]) if files else Path(row["file"])
        file = file if files or file.is_absolute() else path.parent / file
        if not file.is_file():
            raise InputError(path, f"bigWig {file} does not exist", line=line)
        pair = row.get("strand_pair", "").strip()
        if pair and not pair.lstrip("-").isdigit():
            raise InputError(path, f"strand_pair must be a track index, got {pair!r}", line=line)
        specs.append(TrackSpec(
            index=row_number, identifier=row["identifier"].strip(), file=file,
            description=(row.get("description") or "").strip(), strand_pair=int(pair) if pair else None,
            sum_stat=sum_stat, clip=_number(row.get("clip") or "", "clip", path, line, optional=True),
            clip_soft=_number(row.get("clip_soft") or "", "clip_soft", path, line, optional=True),
            scale=_number(row.get("scale") or "1", "scale", path, line, optional=False),
            group=(row.get("group") or "").strip() or None))
    _check_pairs(specs, path)
    return specs


def _check_pairs(specs: list[TrackSpec], path: Path) -> None:
    seen: dict[str, int] = {}
    for spec in specs:
        if spec.identifier in seen:
            raise InputError(path, f"identifier {spec.identifier!r} repeats row {seen[spec.identifier] + 2}",
                             line=spec.index + 2)
        seen[spec.identifier] = spec.index
        pair = spec.index if spec.strand_pair is None else spec.strand_pair
        if not 0 <= pair < len(specs):
            raise InputError(path, f"strand_pair {pair} is not a track index (0..{len(specs) - 1})", line=spec.index + 2)
        partner = specs[pair].strand_pair
        if (pair if partner is None else partner) != spec.index:
            raise InputError(path, f"strand_pair {pair} does not pair back (track {pair}'s strand_pair is "
                             f"{partner})", line=spec.index + 2, hint="strand pairs are mutual: a -> b and b -> a")


def specs_from_bigwigs(bigwigs) -> list[TrackSpec]:
    """One unstranded ``sum`` track per ``--bigwig [ID=]FILE`` (identifier: ID, else the file's stem)."""
    specs = []
    for index, item in enumerate(bigwigs):
        path = Path(item.path)
        if not path.is_file():
            raise UserError(f"--bigwig {path}: no such file")
        specs.append(TrackSpec(index=index, identifier=item.label or path.name.split(".")[0], file=path))
    return specs


class BigWigTracks:
    """The bigWig file of each track, open, with each file's name for each genome contig.

    Args:
        specs: the tracks.
        contigs: genome contig name -> length, for the contigs windows are on.
    """

    def __init__(self, specs: list[TrackSpec], contigs: dict[str, int]):
        import pyBigWig

        self.specs = specs
        self.files, self.names = [], []
        try:
            for spec in specs:
                try:
                    handle = pyBigWig.open(str(spec.file))
                except RuntimeError:
                    handle = None
                if handle is None or not handle.isBigWig():
                    raise InputError(spec.file, "not a bigWig file", hint=f"track {spec.identifier}")
                self.files.append(handle)
                self.names.append(self._match(spec, handle.chroms(), contigs))
        except BaseException:
            self.close()
            raise
        self.missing = np.zeros(len(specs), dtype=np.int64)  # bases without a value, per track

    @staticmethod
    def _match(spec: TrackSpec, chroms: dict[str, int], contigs: dict[str, int]) -> dict[str, str]:
        by_alias = {canonical_chrom(name): name for name in chroms}
        names = {}
        for contig, length in contigs.items():
            name = contig if contig in chroms else by_alias.get(canonical_chrom(contig))
            if name is None:
                shown = ", ".join(list(chroms)[:4]) + (", ..." if len(chroms) > 4 else "")
                raise InputError(spec.file, f"has no chromosome {contig!r} of the genome (its chromosomes: {shown})",
                                 hint="the bigWig and the FASTA must be of the same assembly and naming")
            if chroms[name] < length:
                raise InputError(spec.file, f"chromosome {name} is {chroms[name]:,} bp, the genome's {contig} is "
                                 f"{length:,} bp: the track does not cover it", hint="same assembly needed")
            names[contig] = name
        return names

    def window(self, contig: str, start: int, end: int, length: int, bin_bp: int) -> np.ndarray:
        """``(bins, T)`` float16 bin values of ``contig[start:end)`` (a multiple of ``bin_bp``); positions
        outside ``[0, length)`` (the contig) are 0."""
        inside_start, inside_end = max(start, 0), min(end, length)
        out = np.empty(((end - start) // bin_bp, len(self.specs)), dtype=np.float16)
        for column, (spec, handle) in enumerate(zip(self.specs, self.files, strict=True)):
            values = np.zeros(end - start, dtype=np.float32)
            if inside_end > inside_start:
                read = np.asarray(handle.values(self.names[column][contig], inside_start, inside_end, numpy=True),
                                  dtype=np.float32)
                self.missing[column] += int(np.isnan(read).sum())
                values[inside_start - start:inside_end - start] = read
            out[:, column] = bin_coverage(values, bin_bp, spec)
        return out

    def close(self) -> None:
        for handle in self.files:
            handle.close()
        self.files = []
