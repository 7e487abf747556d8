"""``genolong task prepare`` with coverage tracks: a genome FASTA, bigWig tracks (a targets table,
:mod:`genolong.prep.track_targets`, or ``--bigwig`` files) and windows (centred on BED regions, or tiled
over every contig) into a prepared track dataset (:mod:`genolong.datasets.tracks`).

Windows are streamed: the regions are read twice (once to check them and learn their contigs, once to
write), and each window's bases and bins are written before the next is read, so memory holds one
window whatever the number of windows. Every input is checked before the first window is written; the
output directory appears (renamed from a temporary one) only when the whole dataset is written.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError, UserError
from genolong.core.files import atomic_path, sha256_file, work_path
from genolong.datasets.task_inputs import bed_regions
from genolong.datasets.tracks import SPLITS
from genolong.dna.genome import Genome, canonical_chrom
from genolong.dna.sequence import BASE_CODES, open_text_or_gzip
from genolong.prep.task_builder import SPLIT_NAMES
from genolong.prep.track_targets import BigWigTracks, read_targets_table, specs_from_bigwigs
from genolong.prep.tracks_store import TrackWriter, write_manifest


@dataclass(frozen=True)
class Geometry:
    """Window geometry: ``input_bp`` bases per window, targets over the central ``target_bp`` in bins of
    ``bin_bp``. ConfigError-free: :meth:`check` raises a UserError naming the option."""

    input_bp: int = 131072
    bin_bp: int = 32
    target_bp: int = 65536

    @property
    def target_offset_bp(self) -> int:
        return (self.input_bp - self.target_bp) // 2

    @property
    def target_bins(self) -> int:
        return self.target_bp // self.bin_bp

    def check(self) -> Geometry:
        if not 0 < self.target_bp <= self.input_bp:
            raise UserError(f"--target-bp {self.target_bp} must be between 1 and --input-bp {self.input_bp}")
        if self.target_bp % self.bin_bp:
            raise UserError(f"--target-bp {self.target_bp} is not a multiple of --bin-bp {self.bin_bp}")
        if (self.input_bp - self.target_bp) % 2:
            raise UserError(f"--input-bp {self.input_bp} minus --target-bp {self.target_bp} must be even "
                            "(the targets are centred)")
        return self


@dataclass(frozen=True)
class SplitRule:
    """Which split a window goes to: ``column`` (1-based BED column naming it), ``chromosome``
    (``valid_chroms`` / ``test_chroms`` held out, the rest train) or ``random`` (``fractions``, ``seed``)."""

    method: str
    column: int | None = None
    valid_chroms: tuple[str, ...] = ()
    test_chroms: tuple[str, ...] = ()
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1)
    seed: int = 0

    def assigner(self):
        """A function ``(contig, bed fields or None, where) -> split`` (a seeded draw for ``random``)."""
        if self.method == "column":
            def by_column(contig, fields, where):
                if fields is None or len(fields) < self.column:
                    raise InputError(where[0], f"no column {self.column} (--split-column)", line=where[1])
                split = SPLIT_NAMES.get(fields[self.column - 1].strip().lower())
                if split is None:
                    raise InputError(where[0], f"column {self.column} is {fields[self.column - 1]!r}, not a split",
                                     line=where[1], hint="train, valid (or dev, validation) or test")
                return split
            return by_column
        if self.method == "chromosome":
            valid, test = ({canonical_chrom(c) for c in names} for names in (self.valid_chroms, self.test_chroms))
            return lambda contig, fields, where: ("test" if canonical_chrom(contig) in test else
                                                  "valid" if canonical_chrom(contig) in valid else "train")
        rng = np.random.default_rng(self.seed)
        cumulative = np.cumsum(np.asarray(self.fractions, dtype=float) / sum(self.fractions))
        return lambda contig, fields, where: SPLITS[min(int(np.searchsorted(cumulative, rng.random(), "right")), 2)]


@dataclass(frozen=True)
class Window:
    contig: str
    start: int
    split: str


def _region_windows(path: Path, genome: Genome, geometry: Geometry, rule: SplitRule) -> Iterator[Window]:
    assign = rule.assigner()
    for region in bed_regions(path, genome):
        yield Window(region.chrom, region.centre - geometry.input_bp // 2,
                     assign(region.chrom, region.fields, (path, region.line)))


def _tiled_windows(genome: Genome, geometry: Geometry, rule: SplitRule) -> Iterator[Window]:
    """Windows whose targets tile each contig end to end from its first base (the last one's run past
    its end, padded), every window starting ``target_offset_bp`` before its targets."""
    assign = rule.assigner()
    for contig, length in genome.chromosomes.items():
        for k in range(math.ceil(length / geometry.target_bp)):
            yield Window(contig, k * geometry.target_bp - geometry.target_offset_bp, assign(contig, None, None))


def _codes(genome: Genome, window: Window, length: int, input_bp: int) -> np.ndarray:
    start, end = window.start, window.start + input_bp
    codes = np.full(input_bp, 4, dtype=np.uint8)
    inside = genome.fetch(window.contig, max(start, 0), min(end, length))
    codes[max(-start, 0):max(-start, 0) + len(inside)] = BASE_CODES[np.frombuffer(inside.encode("ascii"), np.uint8)]
    return codes


@contextlib.contextmanager
def _readable_genome(path: Path, out: Path) -> Iterator[Path]:
    """``path`` if it can be read at random (plain or bgzip), else a plain copy streamed into a temporary
    folder beside ``out`` (indexed there) and removed afterwards."""
    if Genome(path).random_access:
        yield path
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=work_path(out, "genome").name, dir=out.parent) as folder:
        copy = Path(folder) / "genome.fa"
        with open_text_or_gzip(path) as source, open(copy, "wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
        import pyfaidx

        pyfaidx.Faidx(str(copy)).close()
        yield copy


def _describe(path: Path) -> dict:
    return {"path": str(path), "sha256": sha256_file(path), "size": path.stat().st_size}


def prepare_tracks(out: Path, *, genome_path: Path, specs, windows_of, geometry: Geometry, max_n_fraction: float,
                   inputs: list[Path], options: dict) -> dict:
    """Write the prepared track dataset ``out`` (atomically) and return its manifest.

    Args:
        genome_path: the FASTA (plain, gzip or bgzip; gzip is first decompressed beside ``out``).
        specs: the :class:`~genolong.prep.track_targets.TrackSpec` of each track, in column order.
        windows_of: ``genome -> iterator of Window``; called twice (a check pass, then the writing pass)
            and must yield the same windows both times.
        max_n_fraction: windows with a larger fraction of N bases are dropped (and counted).
        inputs: files recorded with their sha256 in the manifest; ``options``: recorded as given.
    """
    geometry.check()
    with _readable_genome(Path(genome_path), Path(out)) as readable, Genome(readable) as genome:
        sizes = genome.chromosomes
        contigs = {}
        for window in windows_of(genome):
            contigs.setdefault(window.contig, sizes[window.contig])
        if not contigs:
            raise UserError("no windows: the regions file is empty or the genome has no contigs")
        tracks = BigWigTracks(specs, contigs)
        counts = {"padded": 0, "too_many_n": 0}
        zero_bins, all_bins = dict.fromkeys(SPLITS, 0), dict.fromkeys(SPLITS, 0)
        try:
            with atomic_path(out, directory=True) as tmp:
                writer = TrackWriter(tmp, input_bp=geometry.input_bp, target_bins=geometry.target_bins,
                                     tracks=len(specs))
                try:
                    for window in windows_of(genome):
                        length = sizes[window.contig]
                        codes = _codes(genome, window, length, geometry.input_bp)
                        if np.count_nonzero(codes == 4) > max_n_fraction * geometry.input_bp:
                            counts["too_many_n"] += 1
                            continue
                        counts["padded"] += window.start < 0 or window.start + geometry.input_bp > length
                        first = window.start + geometry.target_offset_bp
                        targets = tracks.window(window.contig, first, first + geometry.target_bp, length,
                                                geometry.bin_bp)
                        writer.add(window.split, codes, targets, window.contig, window.start)
                        zero_bins[window.split] += int(np.count_nonzero(targets == 0))
                        all_bins[window.split] += targets.size
                finally:
                    writer.close()
                if not any(writer.counts.values()):
                    raise UserError(f"no window kept: all {counts['too_many_n']:,} have more than "
                                    f"{max_n_fraction:g} N", hint="raise --max-n-fraction")
                summary = {
                    "tracks": len(specs), "bins_per_window": geometry.target_bins,
                    "windows": dict(writer.counts), "windows_padded_with_n": counts["padded"],
                    "windows_dropped": {"too_many_n": counts["too_many_n"]},
                    "zero_bin_fraction": {s: zero_bins[s] / all_bins[s] for s in SPLITS if all_bins[s]},
                    "bases_without_value": {spec.identifier: int(n) for spec, n in zip(specs, tracks.missing,
                                                                                       strict=True) if n}}
                manifest = write_manifest(
                    tmp, kind="coverage", input_bp=geometry.input_bp, bin_bp=geometry.bin_bp,
                    target_offset_bp=geometry.target_offset_bp, target_bins=geometry.target_bins,
                    tracks=[spec.entry() for spec in specs], splits=writer.counts, summary=summary,
                    inputs=[_describe(Path(p)) for p in inputs], options=options)
        finally:
            tracks.close()
    return manifest


def prepare_tracks_from_arguments(args) -> dict:
    """``genolong task prepare`` with ``--tracks`` or ``--bigwig``: the tracks, windows and splits the
    arguments ``args`` give, written to ``args.out``; returns the manifest."""
    if args.genome is None:
        raise UserError("tracks need --genome FASTA (the sequence under the tracks)")
    if bool(args.regions) == bool(args.tile):
        raise UserError("tracks need windows: --regions BED (a window centred on each) or --tile (every contig)")
    if args.tracks:
        specs = read_targets_table(args.tracks, [b.path for b in args.bigwig] if args.bigwig else None)
    else:
        specs = specs_from_bigwigs(args.bigwig)
    if args.crop is not None and args.target_bp is not None:
        raise UserError("give --target-bp or --crop, not both")
    target_bp = (args.input_bp - 2 * args.crop if args.crop is not None else
                 args.target_bp if args.target_bp is not None else args.input_bp // 2)
    geometry = Geometry(args.input_bp, args.bin_bp, target_bp).check()
    rule = _split_rule(args)
    if args.regions:
        def windows_of(genome):
            return _region_windows(args.regions, genome, geometry, rule)
    else:
        def windows_of(genome):
            return _tiled_windows(genome, geometry, rule)
    inputs = [args.genome, *([args.regions] if args.regions else []), *([args.tracks] if args.tracks else []),
              *(spec.file for spec in specs)]
    options = {"input_bp": geometry.input_bp, "bin_bp": geometry.bin_bp, "target_bp": geometry.target_bp,
               "windows": "regions" if args.regions else "tile", "split": rule.method,
               "split_column": rule.column, "valid_chroms": list(rule.valid_chroms),
               "test_chroms": list(rule.test_chroms), "seed": args.seed, "max_n_fraction": args.max_n_fraction}
    return prepare_tracks(args.out, genome_path=args.genome, specs=specs, windows_of=windows_of, geometry=geometry,
                          max_n_fraction=args.max_n_fraction, inputs=inputs, options=options)


def _split_rule(args) -> SplitRule:
    if args.split_column is not None:
        if args.split not in (None, "given"):
            raise UserError(f"--split-column gives the splits: leave out --split {args.split}")
        if not args.regions:
            raise UserError("--split-column reads the --regions BED file; tiled windows need --split chromosome")
        return SplitRule("column", column=args.split_column)
    if args.split == "chromosome":
        if not args.valid_chroms:
            raise UserError("--split chromosome needs --valid-chroms (and usually --test-chroms)")
        return SplitRule("chromosome", valid_chroms=tuple(args.valid_chroms), test_chroms=tuple(args.test_chroms))
    if args.split == "random":
        return SplitRule("random", fractions=tuple(args.fractions), seed=args.seed)
    raise UserError("tracks need splits: --split-column COL (of the BED file), --split chromosome --valid-chroms "
                    "... --test-chroms ..., or --split random")


def summary_lines(manifest: dict, out: Path) -> list[str]:
    """The lines ``genolong task prepare`` prints about the track dataset written from ``manifest``."""
    summary = manifest["summary"]
    windows = ", ".join(f"{name} {count:,}" for name, count in summary["windows"].items())
    zeros = ", ".join(f"{name} {fraction:.1%}" for name, fraction in summary["zero_bin_fraction"].items())
    lines = [f"wrote {out}: {summary['tracks']} tracks, {summary['bins_per_window']:,} bins of "
             f"{manifest['bin_bp']} bp per {manifest['input_bp']:,}-bp window (targets from bp "
             f"{manifest['target_offset_bp']:,}); windows {windows}",
             f"zero bins: {zeros}",
             f"windows padded with N past a contig end: {summary['windows_padded_with_n']:,}; dropped for more "
             f"than {manifest['options']['max_n_fraction']:g} N: {summary['windows_dropped']['too_many_n']:,}"]
    missing = summary["bases_without_value"]
    if missing:
        shown = ", ".join(f"{name} {count:,}" for name, count in list(missing.items())[:5])
        lines.append(f"bases with no bigWig value (read as 0): {shown}{', ...' if len(missing) > 5 else ''}")
    return lines
