"""``genolong promoter predict`` (and its shortcut ``genolong predict-promoter``) and ``genolong chromatin
predict``: score the records of a FASTA file (:mod:`genolong.inference.predict.fasta`); the task groups add
the parsers with :func:`add_promoter_parser` and :func:`add_chromatin_parser`. Bad input is as
:data:`BAD_INPUT` says; rows written to standard output (no ``--out``) cannot be taken back."""

from __future__ import annotations

import sys
from pathlib import Path

from genolong.classifier.task_info import default_promoter_description
from genolong.cli.arguments import (
    add_classifier_argument,
    add_device_arguments,
    add_strands_argument,
    from_arguments,
    positive_int,
)
from genolong.cli.commands.scan import report_called
from genolong.cli.outputs import declare

#: How the scoring commands treat bad input, at the end of their descriptions.
BAD_INPUT = (
    " Records shorter than --min-length, and records whose every window is more than half N, get a row "
    "with the reason in the error column and the run goes on; a file that is not valid FASTA (empty, no header, characters outside the IUPAC codes) "
    "stops the run with exit status 2 and no output file (files are renamed into place when complete).")


def add_record_arguments(parser) -> None:
    """The arguments of every command that scores the records of an input in windows (its positional
    input aside): ``--stride``, ``--rc``, ``--batch-size``, ``--min-length``, ``--device`` and the devices."""
    parser.add_argument("--stride", type=positive_int, default=None,
                        help="bp between scanning windows on records longer than the model window "
                        "(default: half the window; chromatin 200)")
    add_strands_argument(parser, "average each window's probabilities with its reverse complement's")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="windows per model call (default: 32)")
    parser.add_argument(
        "--min-length", type=positive_int, default=None,
        help="shortest record to score, in bp (default: the model's minimum, see its genolong_task.json)")
    parser.add_argument("--device", default="auto",
                        help="device of a one-process run: auto (GPU when present), cpu, cuda, cuda:1, ...")
    add_device_arguments(parser)


#: ``--out`` of a prediction table (:class:`genolong.inference.predict.writers.Table`).
TABLE_OUT = "table to write: CSV when its name ends in .csv, else tab-separated"


def _add_common(parser) -> None:
    parser.add_argument("fasta", type=Path, help="FASTA file (plain, gzip or bgzip)")
    add_record_arguments(parser)


def register(subparsers) -> None:
    """``genolong predict-promoter``, the shortcut of ``genolong promoter predict``."""
    add_promoter_parser(subparsers, "predict-promoter")


def add_promoter_parser(subparsers, name: str) -> None:
    """Add the promoter prediction command as ``name``."""
    promoter = subparsers.add_parser(
        name, help="promoter probability of every FASTA record (scanned in windows)",
        description="One row per record: record (its 1-based position in the FASTA), id, length, windows "
        "scored, probability (the best window's), label (1 when the probability reaches the model's record "
        "threshold, chosen on validation with promoters and non-promoters weighing the same: records are "
        "candidates; `genolong scan` uses the model's scan threshold, set for genomic background), error. "
        "On stderr, the fraction of the bp called (and a line of caution when that is much of a species the "
        "model never saw, see --species). The first line of each output is a '#' comment naming the model, "
        "its threshold and its training data. Without --model, the promoter model shipped with genolong ("
        + default_promoter_description() + "; see genolong/resources/models/promoter/README.md)." + BAD_INPUT,
    )
    _add_common(promoter)
    add_classifier_argument(promoter, "promoter classifier")
    promoter.add_argument("--out", type=Path, default=None, help=f"{TABLE_OUT} (default: TSV on stdout)")
    promoter.add_argument("--windows", type=Path, default=None,
                          help=f"also write one row per scored window: {TABLE_OUT}")
    promoter.add_argument(
        "--bed", type=Path, default=None,
        help="BED of predicted promoter regions (windows at or above the threshold, merged)")
    promoter.add_argument(
        "--species", default=None,
        help="species of the records (e.g. 'Homo sapiens' or human): a model that calls more than 5%% of a "
        "species its card does not list adds a line of caution")
    declare(promoter, run_promoter, inputs=["fasta", "model"], files=["out", "windows", "bed"])


def add_chromatin_parser(commands) -> None:
    """Add ``predict`` to the sub-commands of the chromatin group."""
    chromatin = commands.add_parser(
        "predict", help="919 chromatin-profile probabilities for every FASTA record (or window)",
        description="One row per window (a record no longer than the model window is one window): record "
        "(its 1-based position in the FASTA), id, length, windows (of the record), start, end, then one "
        "column per DeepSEA profile (Cell|Assay|Treatment), then error." + BAD_INPUT,
    )
    _add_common(chromatin)
    add_classifier_argument(chromatin, "chromatin classifier", required=True, promoter=False)
    chromatin.add_argument("--out", type=Path, required=True, help=TABLE_OUT)
    declare(chromatin, run_chromatin, inputs=["fasta", "model"], files=["out"])


def prediction(args, fasta: Path, records=None):
    """The :class:`~genolong.inference.predict.fasta.FastaPrediction` of the arguments, of the input ``fasta``
    (``records``: its reader)."""
    from genolong.inference.predict.fasta import FastaPrediction  # Lightning: imported when a command runs

    return from_arguments(FastaPrediction, args, fasta=fasta, records=records)


def run_promoter(args) -> None:
    from genolong.inference.predict.fasta import predict_promoters

    result = predict_promoters(prediction(args, args.fasta), windows=args.windows, bed=args.bed)
    if result is not None:
        counts, info = result
        print(f"{counts.records:,} records, {counts.windows:,} windows scored, {counts.promoters:,} predicted "
              f"promoters (threshold {info.threshold:.4g}), {counts.skipped:,} too short to score", file=sys.stderr)
        report_called(info, args.species, counts.called_bp, counts.scored_bp, info.threshold, "record threshold")


def run_chromatin(args) -> None:
    from genolong.inference.predict.fasta import predict_chromatin

    counts = predict_chromatin(prediction(args, args.fasta))
    if counts is not None:
        print(f"{counts.records:,} records, {counts.windows:,} windows scored, {counts.skipped:,} too short "
              "to score", file=sys.stderr)
