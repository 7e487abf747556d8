"""``genolong scan``: genome-wide (or region) tracks of a classifier's scores
(:mod:`genolong.inference.scan.run`)."""

from __future__ import annotations

import sys
from pathlib import Path

from genolong.classifier.records import MAX_N_FRACTION
from genolong.cli.arguments import (
    add_classifier_argument,
    add_device_arguments,
    add_strands_argument,
    fraction,
    from_arguments,
    non_negative_int,
    positive_int,
)
from genolong.cli.outputs import declare

DESCRIPTION = (
    "Slide the model's window over a genome (or BED regions) and write tracks. Positions are cut into "
    "bins of --stride bp from the start of each chromosome or region; each bin gets the score of the "
    "window of the model's length centred on it (moved inside the chromosome at its ends, reading the "
    "flanking genome at region edges). Windows with more than --max-n-fraction N are skipped: their bins "
    "have no value (--skipped lists them). Output formats by suffix: .bw/.bigwig (bigWig), .bedGraph/.bg, "
    ".h5 (HDF5 matrix bins x outputs with coordinates). Each output is a track: a probability (sigmoid "
    "outputs, or each class of a softmax) or a value (regression); a model of several outputs writes one "
    "bigWig/bedGraph per output, or per --profiles entry beyond 8 outputs (FILE.OUTPUT.bw when several). BED regions: sorted, and "
    "overlapping or touching regions merged; a region on an unknown chromosome or outside it stops the "
    "run (exit 2, file and line named). The genome must be plain FASTA or bgzip (a plain .gz cannot be "
    "read at random: run `genolong genome prepare`). Resumable: an interrupted run leaves a work "
    "directory .OUT.scan-*/ next to the first output; rerunning the same command skips the chromosomes "
    "it finished. Outputs appear only when complete.")


def register(subparsers) -> None:
    parser = subparsers.add_parser("scan", help="score windows along a genome into bigWig/bedGraph/HDF5 tracks",
                                   description=DESCRIPTION)
    add_classifier_argument(parser)
    parser.add_argument("--genome", type=Path, required=True, help="FASTA: plain (indexed on first use) or bgzip")
    parser.add_argument("--out", type=Path, nargs="+", required=True,
                        help="one or more tracks: .bw, .bedGraph, .h5 (all from one pass)")
    parser.add_argument("--regions", type=Path, default=None, help="BED of regions to scan (default: everything)")
    parser.add_argument("--chromosomes", nargs="+", default=None, help="only these chromosomes (chr1 == 1)")
    parser.add_argument("--stride", type=positive_int, default=None,
                        help="bin size and window step in bp, at most the window (default: the model's inference "
                        "spec: promoter 50, chromatin 200, else half the window)")
    add_strands_argument(parser, "average each window with its reverse complement")
    parser.add_argument("--profiles", nargs="+", default=None,
                        help="outputs to write: names (chromatin: Cell|Assay|Treatment) or column numbers")
    parser.add_argument("--bed", type=Path, default=None,
                        help="BED of called regions (windows at or above --threshold, merged; models whose "
                        "threshold cuts a probability)")
    parser.add_argument("--threshold", type=fraction, default=None,
                        help="promoter: probability at which a window is called (default: the model's scan "
                        "threshold, set for genomic background; see its README)")
    parser.add_argument("--species", default=None,
                        help="species of the genome (e.g. 'Homo sapiens' or human): a promoter model that calls "
                        "more than 5%% of a species its card does not list adds a line of caution")
    parser.add_argument("--skipped", type=Path, default=None, help="BED of the bins left without a score, and why")
    parser.add_argument("--max-n-fraction", type=fraction, default=MAX_N_FRACTION,
                        help=f"skip windows with a larger fraction of N (default: {MAX_N_FRACTION}, as every "
                        "prediction command)")
    parser.add_argument("--batch-size", type=positive_int, default=128, help="windows per model call (default: 128)")
    parser.add_argument("--workers", type=non_negative_int, default=1,
                        help="DataLoader processes reading and tokenising (default: 1)")
    add_device_arguments(parser)
    declare(parser, run, inputs=["genome", "model", "regions"], files=["out", "bed", "skipped"])


def run(args) -> None:
    from genolong.inference.scan.run import ScanConfig, run_scan

    summary = run_scan(from_arguments(ScanConfig, args))
    if summary is not None:
        rate = summary["target_bp"] / max(summary["seconds"], 1e-9)
        print(f"{summary['target_bp']:,} bp on {summary['chromosomes']:,} chromosomes ({summary['resumed']} resumed), "
              f"{summary['scored_bins']:,} of {summary['bins']:,} bins scored ({summary['bins'] - summary['scored_bins']:,}"
              f" skipped), window {summary['window']} bp, stride {summary['stride']} bp, {summary['ranks']} rank(s), "
              f"{summary['seconds']:.1f} s ({rate / 1000:,.1f} kbp/s)", file=sys.stderr)
        if "called_bp" in summary:
            report_called(summary["info"], args.species, summary["called_bp"], summary["target_bp"],
                          summary["threshold"], "threshold" if args.threshold is not None else "scan threshold")


def report_called(info, species: str | None, called_bp: int, scored_bp: int, threshold: float, which: str) -> None:
    """The called-fraction line on stderr, and the caution line when the model is out of its depth."""
    from genolong.inference.called import called_line, caution_line

    print(called_line(called_bp, scored_bp, threshold, which), file=sys.stderr)
    caution = caution_line(info, species, called_bp, scored_bp)
    if caution:
        print(caution, file=sys.stderr)
