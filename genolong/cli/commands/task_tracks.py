"""The track options of ``genolong task prepare``: a genome FASTA and coverage tracks (a Basenji-style
targets table or bigWig files) over BED regions or tiled contigs, into a prepared track dataset
(:mod:`genolong.prep.tracks_builder`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from genolong.cli.arguments import positive_int


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, got {text!r}")
    return value


def add_track_arguments(prepare, named_path) -> None:
    """Add the track options to the ``task prepare`` parser (``named_path``: the ``[ID=]FILE`` type)."""
    tracks = prepare.add_argument_group(
        "coverage tracks (with --genome; windows from --regions or --tile; writes manifest.json + tracks.h5)")
    tracks.add_argument("--tracks", type=Path, metavar="TABLE",
                        help="Basenji-style targets table (TSV: identifier, file, description, strand_pair, "
                        "sum_stat sum/mean/sum_sqrt/..., clip, clip_soft, scale, group); a relative file is "
                        "read from the table's directory")
    tracks.add_argument("--bigwig", type=named_path, action="append", metavar="[ID=]FILE",
                        help="a bigWig track (repeat; with --tracks: the files of its rows, in order; alone: "
                        "one unstranded sum track each)")
    tracks.add_argument("--tile", action="store_true",
                        help="windows whose targets tile every contig of --genome (instead of --regions)")
    tracks.add_argument("--input-bp", type=positive_int, default=131072, help="bases per window (default 131072)")
    tracks.add_argument("--bin-bp", type=positive_int, default=32, help="bases per target bin (default 32)")
    tracks.add_argument("--target-bp", type=positive_int,
                        help="bases under the targets, centred in the window (default: half of --input-bp)")
    tracks.add_argument("--crop", type=int, help="bases cut from each end of the window for the targets "
                        "(Basenji's crop_bp; instead of --target-bp)")
    tracks.add_argument("--split-column", type=positive_int, metavar="COL",
                        help="the BED column (1-based) naming each region's split: train, valid (dev) or test")
    tracks.add_argument("--max-n-fraction", type=_fraction, default=0.5,
                        help="windows with more N than this fraction are dropped and counted (default 0.5)")


def run(args) -> None:
    from genolong.prep.tracks_builder import prepare_tracks_from_arguments, summary_lines

    print("\n".join(summary_lines(prepare_tracks_from_arguments(args), args.out)))
