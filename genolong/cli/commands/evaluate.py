"""``genolong chromatin eval``: per-profile AUCs of a chromatin classifier on a prepared split; the chromatin
group (:mod:`genolong.cli.commands.chromatin`) adds the parser with :func:`add_parser`."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import (
    add_classifier_argument,
    add_precision_argument,
    add_strands_argument,
    positive_int,
)
from genolong.cli.outputs import declare


def add_parser(commands) -> None:
    """Add ``eval`` to the sub-commands of the chromatin group."""
    chromatin = commands.add_parser(
        "eval", help="per-profile ROC/PR AUC of a chromatin classifier, medians per class",
        description="Scores every row of a split of a `genolong chromatin prepare` directory, writes the "
        "per-profile ROC AUC and PR AUC (average precision) table, and prints the median ROC AUC "
        "per class (TF, DHS, HM) next to the published DeepSEA and BigBird rows. Profiles "
        "without both positives and negatives in the evaluated rows have no AUC (empty cells).")
    add_classifier_argument(chromatin, "chromatin classifier", required=True, promoter=False)
    chromatin.add_argument("--data", type=Path, required=True, help="prepared chromatin directory")
    chromatin.add_argument("--out", type=Path, required=True, help="aucs.csv to write")
    chromatin.add_argument("--split", default="test", help="split to evaluate (default: test)")
    add_strands_argument(chromatin, "average each row's probabilities with its reverse complement's")
    chromatin.add_argument("--rows", type=positive_int, default=None,
                           help="evaluate N evenly spaced rows (default: all)")
    chromatin.add_argument("--batch-size", type=positive_int, default=16, help="rows per model call (default: 16)")
    chromatin.add_argument("--device", default="auto", help="auto (GPU when present), cpu, cuda, ...")
    add_precision_argument(chromatin)
    declare(chromatin, run_chromatin, inputs=["model", "data"], files=["out"])


def run_chromatin(args) -> None:
    from genolong.evaluation.chromatin_model import evaluate_chromatin_model
    from genolong.evaluation.metrics import format_chromatin_medians

    result = evaluate_chromatin_model(args.model, args.data, args.split, args.out, rc=args.rc, limit=args.rows,
                                      batch_size=args.batch_size, device=args.device,
                                      precision=args.precision)
    aucs = result.aucs
    print(f"{result.rows:,} rows of {args.data} [{args.split}]; {int(aucs.defined.sum())} of {len(aucs.roc_auc)} "
          f"profiles have both labels -> {args.out}")
    print("median ROC AUC (%):")
    name = f"{args.model.name}{' (both strands)' if result.both_strands else ''}"
    print(format_chromatin_medians({name: result.medians}))
