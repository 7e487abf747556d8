"""``genolong eval chromatin``: per-profile AUCs of a chromatin classifier on a prepared split."""

from __future__ import annotations

import sys
from pathlib import Path

from genolong.commands.arguments import positive_int
from genolong.outputs import declare


def register(subparsers) -> None:
    group = subparsers.add_parser("eval", help="evaluate a fine-tuned classifier on a dataset")
    tasks = group.add_subparsers(dest="eval_task", metavar="TASK", required=True)
    chromatin = tasks.add_parser(
        "chromatin",
        help="per-profile ROC/PR AUC of a chromatin classifier, medians per class",
        description="Scores every row of a split of a `genolong chromatin prepare` directory, writes the "
        "per-profile ROC AUC and PR AUC (average precision) table, and prints the median ROC AUC "
        "per class (TF, DHS, HM) next to the published DeepSEA and BigBird rows. Profiles "
        "without both positives and negatives in the evaluated rows have no AUC (empty cells).",
    )
    chromatin.add_argument("--model", type=Path, required=True, help="chromatin classifier directory")
    chromatin.add_argument("--data", type=Path, required=True, help="prepared chromatin directory")
    chromatin.add_argument("--out", type=Path, required=True, help="aucs.csv to write")
    chromatin.add_argument("--split", default="test", help="split to evaluate (default: test)")
    chromatin.add_argument(
        "--rc", action="store_true", help="average each row's probabilities with its reverse complement's"
    )
    chromatin.add_argument(
        "--rows", type=positive_int, default=None, help="evaluate N evenly spaced rows (default: all)"
    )
    chromatin.add_argument("--batch-size", type=positive_int, default=16, help="rows per model call (default: 16)")
    chromatin.add_argument("--device", default="auto", help="auto (GPU when present), cpu, cuda, ...")
    chromatin.set_defaults(func=run_chromatin)
    declare(chromatin, inputs=["model", "data"], files=["out"])


def run_chromatin(args) -> int:
    import logging

    from tqdm import tqdm

    from genolong.datasets.chromatin import PreparedChromatin
    from genolong.evaluation.chromatin import evaluate_chromatin, write_auc_table
    from genolong.evaluation.metrics import format_chromatin_medians, median_auc_by_class
    from genolong.evaluation.profiles import profile_classes
    from genolong.inference.classifier import Classifier, StrandAveraged

    classifier = Classifier.load(args.model, task="chromatin", device=args.device)
    split = PreparedChromatin(args.data)[args.split]
    if split.context != classifier.info.window_bp:
        logging.getLogger(__name__).warning(
            "the model was trained on %d-bp windows, %s holds %d-bp windows",
            classifier.info.window_bp,
            args.data,
            split.context,
        )
    scorer = StrandAveraged(classifier) if args.rc else classifier
    with tqdm(unit=" rows", disable=None, file=sys.stderr, desc=args.split) as progress:
        aucs, rows = evaluate_chromatin(
            scorer, split, batch_size=args.batch_size, limit=args.rows, progress=progress
        )
    write_auc_table(args.out, aucs)
    name = f"{args.model.name}{' (both strands)' if args.rc else ''}"
    print(
        f"{len(rows):,} rows of {args.data} [{args.split}]; {int(aucs.defined.sum())} of {len(aucs.roc_auc)} "
        f"profiles have both labels -> {args.out}"
    )
    print("median ROC AUC (%):")
    print(format_chromatin_medians({name: median_auc_by_class(aucs.roc_auc, profile_classes())}))
    return 0
