"""``genolong task prepare|predict|finetune``: your own labelled sequences, of any problem type (binary,
multi-class, multi-label or regression), as a task dataset, a fine-tuned model and its predictions."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from genolong.cli.arguments import (
    add_classifier_argument,
    add_deprecated_option,
    non_negative_int,
    positive_int,
)
from genolong.cli.commands import finetune, task_tracks
from genolong.cli.commands.predict import BAD_INPUT, TABLE_OUT, add_record_arguments, prediction
from genolong.cli.outputs import OutputDirectory, declare
from genolong.datasets.task import DUPLICATE_RULES, PROBLEM_TYPES


class NamedPath(os.PathLike):
    """``NAME=PATH`` on the command line: ``label`` (None for a bare PATH) and ``path``; a path-like, so that
    the output policy sees the file."""

    def __init__(self, text: str):
        label, sep, path = text.partition("=")
        self.label, self.path = (label, Path(path)) if sep else (None, Path(text))
        if sep and not (label and path):
            raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")

    def __fspath__(self) -> str:
        return str(self.path)


def _fractions(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three numbers like 0.8,0.1,0.1, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


def register(subparsers) -> None:
    group = subparsers.add_parser("task", help="your own labelled sequences: prepare a task dataset, fine-tune")
    commands = group.add_subparsers(dest="task_command", metavar="SUBCOMMAND", required=True)
    prepare = commands.add_parser(
        "prepare", help="labelled sequences (FASTA per class, CSV/TSV/Parquet, BED + genome) into a task dataset",
        description="Read labelled sequences, infer (or check) the problem type, resolve copies within a "
        "split (--duplicates), split them (given splits are kept, never pooled), remove sequences of "
        "valid/test that are in an earlier split (exactly or as reverse complement) and write OUT: "
        "manifest.json and train/valid/test.tsv. Give exactly one kind of input.")
    inputs = prepare.add_argument_group("inputs (one kind)")
    inputs.add_argument("--class", dest="classes", type=NamedPath, action="append", metavar="[SPLIT:]NAME=FASTA",
                        help="a FASTA file of one class (repeat per class; for binary the first is positive); "
                        "SPLIT:NAME=FASTA per split (train, valid or dev, test) keeps the given splits")
    inputs.add_argument("--table", dest="tables", type=NamedPath, action="append", metavar="[SPLIT=]PATH",
                        help="CSV/TSV (plain or gzip), Parquet, or a `datasets` save_to_disk directory; "
                        "SPLIT=PATH per split (train, valid or dev, test) keeps the given splits")
    inputs.add_argument("--regions", type=Path, help="BED or narrowPeak regions (with --genome and --window)")
    add_deprecated_option(inputs, "--bed", "--regions", type=Path)
    columns = prepare.add_argument_group("columns")
    columns.add_argument("--sequence-column", help="table: the sequence column (default: sequence, seq, ...)")
    columns.add_argument("--label-column", dest="label_columns", action="append",
                         help="a label column (repeat; tables default: all but sequence and id; BED: a "
                         "column number >= 4 or name, score, signalValue, pValue, qValue)")
    columns.add_argument("--id-column", help="table: the record id column (default: id or name if present)")
    columns.add_argument("--no-header", action="store_true",
                         help="CSV/TSV without a header: columns are 0, 1, ...; the sequence is column 0")
    regions = prepare.add_argument_group("regions")
    regions.add_argument("--genome", type=Path, help="FASTA genome of the regions")
    regions.add_argument("--window", type=positive_int, help="window length in bp, centred on each region")
    regions.add_argument("--background", type=non_negative_int, default=0,
                         help="background windows per region, drawn from the genome (default 0)")
    regions.add_argument("--background-distance", type=non_negative_int, default=0,
                         help="minimum distance in bp from every region to a background window's centre")
    problem = prepare.add_argument_group("problem and splits")
    problem.add_argument("--problem-type", choices=PROBLEM_TYPES, help="default: inferred from the labels")
    problem.add_argument("--positive", help="binary: the positive class (default: the first --class, else the "
                         "last name in sorted order, the larger of two integer codes)")
    problem.add_argument("--duplicates", choices=DUPLICATE_RULES, default="drop",
                         help="rows of one split whose sequence (or its reverse complement) repeats: drop "
                         "(default) keeps the first of same-label copies and drops every copy whose labels "
                         "conflict; keep keeps them; error stops at the first")
    problem.add_argument("--split", choices=["given", "random", "chromosome"],
                         help="default: given for inputs per split (never re-split), else random "
                         "(stratified by class)")
    problem.add_argument("--fractions", type=_fractions, default=(0.8, 0.1, 0.1),
                         help="random split: train,valid,test fractions (default 0.8,0.1,0.1); given "
                         "splits without valid: valid is this valid fraction of train")
    problem.add_argument("--valid-chroms", type=_names, default=[], help="chromosome split: held out for valid")
    problem.add_argument("--test-chroms", type=_names, default=[], help="chromosome split: held out for test")
    problem.add_argument("--seed", type=int, default=0, help="random split and background windows (default 0)")
    task_tracks.add_track_arguments(prepare, NamedPath)
    prepare.add_argument("--out", type=Path, required=True, help="task dataset directory to create")
    declare(prepare, run_prepare, inputs=["classes", "tables", "regions", "genome", "tracks", "bigwig"],
            directories={"out": OutputDirectory("task-data", atomic=True)})
    predict = commands.add_parser(
        "predict", help="score the records of a FASTA file or a table with a fine-tuned model of any task",
        description="One row per record: record (its 1-based position in the input), id, length, windows "
        "(scored), one column per model output (a probability, or a value for regression), error. A record "
        "longer than the model's window is read in windows of it every --stride bp and gets each output's "
        "best window's value, as fine-tuning validation scores it." + BAD_INPUT)
    predict.add_argument("inputs", type=Path, help="FASTA (plain, gzip, bgzip) or CSV/TSV/Parquet with a sequence column")
    add_classifier_argument(predict, required=True)
    predict.add_argument("--out", type=Path, required=True, help=TABLE_OUT)
    predict.add_argument("--sequence-column", help="table: the sequence column (default: sequence, seq, ...)")
    add_record_arguments(predict)
    declare(predict, run_predict, inputs=["inputs", "model"], files=["out"])
    finetune.add_parser(
        commands, "labelled", "fine-tune a model on a `genolong task prepare` dataset of any problem type",
        "the loss and metrics follow the problem type (binary, multiclass, multilabel, regression); the k-mer "
        "model of the problem type is fitted on the training split and stacked with the network on the "
        "validation split, and the report shows the network alone, the k-mer model alone and the stack.")


def run_prepare(args) -> None:
    if args.tracks or args.bigwig:
        return task_tracks.run(args)
    from genolong.prep.task_builder import prepare_from_arguments, summary

    print("\n".join(summary(prepare_from_arguments(args), args.out)))


def run_predict(args) -> None:
    from genolong.datasets.task_inputs import read_records
    from genolong.dna.sequence import FastaRecord
    from genolong.inference.predict.fasta import predict_records

    def records():
        return (FastaRecord(name, sequence.upper(), "") for name, sequence in
                read_records(args.inputs, args.sequence_column))

    result = predict_records(prediction(args, args.inputs, records))
    if result is not None:
        counts, info = result
        print(f"wrote {args.out}: {counts.records:,} records, {counts.windows:,} windows of {info.window_bp:,} bp "
              f"scored, {counts.skipped:,} not scored (see the error column)", file=sys.stderr)
