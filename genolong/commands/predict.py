"""``genolong predict-promoter`` and ``genolong predict-chromatin``: score the records of a FASTA file.

Both stream the FASTA (plain, gzip or bgzip) one record at a time, batch the model inputs,
show progress on a terminal and use a GPU when there is one. A record longer than the
model's window is scanned in windows (``--stride``); ``--rc`` averages each window's
probabilities with those of its reverse complement.

Bad input, by design:

* a record shorter than the model's minimum gets a row whose ``error`` column says so,
  and the run continues (one short contig must not stop a genome-wide scan);
* a file that is not valid FASTA (empty, no header, a character outside the IUPAC codes)
  stops the run with exit status 2 and one line naming the file, line and record;
* output files are written under temporary names and renamed when complete, so a run that
  stops leaves none behind. Rows written to standard output (no ``--out``) cannot be
  taken back: use ``--out`` when a partial table would do harm.

``--devices N`` / ``--num-nodes M`` score the windows on several ranks and merge them into the
same files (:mod:`genolong.inference.record_loop`).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from genolong.commands.arguments import add_device_arguments, positive_int
from genolong.inference.classifier import default_promoter_description
from genolong.outputs import declare

PROMOTER_COLUMNS = ("id", "length", "windows", "probability", "label", "error")
WINDOW_COLUMNS = ("id", "start", "end", "probability", "label")
CHROMATIN_FIXED_COLUMNS = ("id", "length", "start", "end")
BAD_INPUT = (
    " Records shorter than --min-length get a row with the reason in the error column and the run "
    "goes on; a file that is not valid FASTA (empty, no header, characters outside the IUPAC codes) "
    "stops the run with exit status 2 and no output file (files are renamed into place when complete)."
)


def _add_common(parser) -> None:
    parser.add_argument("fasta", type=Path, help="FASTA file (plain, gzip or bgzip)")
    parser.add_argument(
        "--stride",
        type=positive_int,
        default=None,
        help="bp between scanning windows on records longer than the model window "
        "(default: promoter half the window, chromatin 200)",
    )
    parser.add_argument(
        "--rc", action="store_true", help="average each window's probabilities with its reverse complement's"
    )
    parser.add_argument("--batch-size", type=positive_int, default=32, help="windows per model call (default: 32)")
    parser.add_argument(
        "--min-length",
        type=positive_int,
        default=None,
        help="shortest record to score, in bp (default: the model's minimum, see its genolong_task.json)",
    )
    parser.add_argument("--device", default="auto",
                        help="device of a one-process run: auto (GPU when present), cpu, cuda, cuda:1, ...")
    add_device_arguments(parser)


def register(subparsers) -> None:
    promoter = subparsers.add_parser(
        "predict-promoter",
        help="promoter probability of every FASTA record (scanned in windows)",
        description="One row per record: id, length, windows scored, probability (the best window's), label "
        "(1 when the probability reaches the model's threshold, chosen on validation), error. The first "
        "line of each output is a '#' comment naming the model, its threshold and its training data. "
        "Without --model, the promoter model shipped with genolong ("
        + default_promoter_description()
        + "; see genolong/resources/models/promoter/README.md)."
        + BAD_INPUT,
    )
    _add_common(promoter)
    promoter.add_argument(
        "--model", type=Path, default=None, help="promoter classifier directory (default: the shipped model)"
    )
    promoter.add_argument(
        "--out", type=Path, default=None, help="TSV of one row per record (default: stdout)"
    )
    promoter.add_argument(
        "--windows", type=Path, default=None, help="also write one TSV row per scored window"
    )
    promoter.add_argument(
        "--bed",
        type=Path,
        default=None,
        help="BED of predicted promoter regions (windows at or above the threshold, merged)",
    )
    promoter.set_defaults(func=run_promoter)
    declare(promoter, inputs=["fasta", "model"], files=["out", "windows", "bed"])

    chromatin = subparsers.add_parser(
        "predict-chromatin",
        help="919 chromatin-profile probabilities for every FASTA record (or window)",
        description="One row per window (a record no longer than the model window is one window): id, "
        "length, start, end, then one column per DeepSEA profile (Cell|Assay|Treatment), then error."
        + BAD_INPUT,
    )
    _add_common(chromatin)
    chromatin.add_argument("--model", type=Path, required=True, help="chromatin classifier directory")
    chromatin.add_argument("--out", type=Path, required=True, help="TSV to write")
    chromatin.set_defaults(func=run_chromatin)
    declare(chromatin, inputs=["fasta", "model"], files=["out"])


@contextlib.contextmanager
def _outputs(*paths: Path | None):
    """Open each path for writing atomically; None means standard output."""
    from genolong.files import atomic_path

    with contextlib.ExitStack() as stack:
        handles = []
        for path in paths:
            if path is None or str(path) == "-":
                handles.append(sys.stdout)
            else:
                tmp = stack.enter_context(atomic_path(path))
                handles.append(stack.enter_context(open(tmp, "w")))
        yield handles


def _load(args, path: Path, task: str):
    """The classifier, on this rank's device, and the Trainer of a run on several ranks (None for one)."""
    from genolong.errors import UserError
    from genolong.inference.classifier import Classifier
    from genolong.inference.record_loop import ranks_trainer

    trainer = ranks_trainer(args.accelerator, args.devices, args.num_nodes)
    if trainer is not None and args.out is None:
        raise UserError("--devices/--num-nodes above 1 need --out (the ranks' parts are kept beside it)")
    device = args.device if trainer is None else str(trainer.strategy.root_device)
    return Classifier.load(path, task=task, device=device), trainer


def _scored_records(args, classifier, trainer, default_stride: int):
    """The records of ``args.fasta``, windowed, scored and grouped by record (see genolong.inference.records);
    None on a rank other than 0."""
    from tqdm import tqdm

    from genolong.inference.classifier import StrandAveraged
    from genolong.inference.record_loop import score_records

    info = classifier.info
    progress = None if trainer is not None else tqdm(unit=" windows", disable=None, file=sys.stderr,
                                                     desc=args.fasta.name)
    return score_records(
        args.fasta, StrandAveraged(classifier) if args.rc else classifier, window=info.window_bp,
        stride=default_stride if args.stride is None else args.stride,
        min_length=info.min_bp if args.min_length is None else args.min_length, batch_size=args.batch_size,
        trainer=trainer, parts=None if args.out is None else args.out.parent / f".{args.out.name}.parts",
        progress=progress,
    )


def _cell(value: float) -> str:
    return f"{value:.4f}"


def _write_regions(bed, name: str, regions: list[tuple[int, int, float]], strand: str) -> None:
    bed.writelines(
        f"{name}\t{start}\t{end}\tpromoter\t{round(1000 * score)}\t{strand}\n"
        for start, end, score in regions
    )


def run_promoter(args) -> int:
    from genolong.inference.classifier import default_promoter_model, describe_model
    from genolong.inference.records import RegionMerger, Skipped

    path = args.model or default_promoter_model()
    classifier, trainer = _load(args, path, "promoter")
    records = _scored_records(args, classifier, trainer, max(1, classifier.info.window_bp // 2))
    if records is None:
        return 0
    header = f"# {describe_model(path if args.model else f'{path} (default)', classifier.info)}\n"
    threshold = classifier.info.threshold
    strand = "." if args.rc else "+"
    counts = {"records": 0, "windows": 0, "promoters": 0, "skipped": 0}
    with _outputs(args.out, *[p for p in (args.windows, args.bed) if p is not None]) as handles:
        out = handles[0]
        windows_out = handles[1] if args.windows else None
        bed = handles[-1] if args.bed else None
        out.write(header + "\t".join(PROMOTER_COLUMNS) + "\n")
        if windows_out:
            windows_out.write(header + "\t".join(WINDOW_COLUMNS) + "\n")
        for first, pairs in records:
            counts["records"] += 1
            if isinstance(first, Skipped):
                counts["skipped"] += 1
                out.write(f"{first.name}\t{first.record_length}\t0\t\t\t{first.error}\n")
                continue
            windows, best, regions = 0, 0.0, RegionMerger(threshold)
            for window, probabilities in pairs:
                score = float(probabilities[0])
                windows, best = windows + 1, max(best, score)
                if windows_out:
                    windows_out.write(
                        f"{window.name}\t{window.start}\t{window.end}\t{_cell(score)}\t{int(score >= threshold)}\n"
                    )
                closed = regions.add(window.start, window.end, score)
                if bed:
                    _write_regions(bed, first.name, closed, strand)
            if bed:
                _write_regions(bed, first.name, regions.close(), strand)
            counts["windows"] += windows
            counts["promoters"] += best >= threshold
            out.write(
                f"{first.name}\t{first.record_length}\t{windows}\t{_cell(best)}\t{int(best >= threshold)}\t\n"
            )
    print(
        f"{counts['records']:,} records, {counts['windows']:,} windows scored, {counts['promoters']:,} "
        f"predicted promoters (threshold {threshold:.4g}), {counts['skipped']:,} too short to score",
        file=sys.stderr,
    )
    return 0


def run_chromatin(args) -> int:
    from genolong.inference.records import Skipped

    classifier, trainer = _load(args, args.model, "chromatin")
    records = _scored_records(args, classifier, trainer, 200)
    if records is None:
        return 0
    names = classifier.info.label_names
    counts = {"records": 0, "windows": 0, "skipped": 0}
    with _outputs(args.out) as (out,):
        out.write("\t".join((*CHROMATIN_FIXED_COLUMNS, *names, "error")) + "\n")
        empty = "\t" * len(names)
        for first, pairs in records:
            counts["records"] += 1
            if isinstance(first, Skipped):
                counts["skipped"] += 1
                out.write(f"{first.name}\t{first.record_length}\t\t\t{empty}{first.error}\n")
                continue
            for window, probabilities in pairs:
                counts["windows"] += 1
                cells = "\t".join(map(_cell, probabilities))
                out.write(f"{window.name}\t{window.record_length}\t{window.start}\t{window.end}\t{cells}\t\n")
    print(
        f"{counts['records']:,} records, {counts['windows']:,} windows scored, {counts['skipped']:,} too short "
        "to score",
        file=sys.stderr,
    )
    return 0
