"""``genolong chromatin prepare|finetune|predict|eval``: the 919 DeepSEA chromatin profiles (BigBird App. F.3)."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import from_arguments, positive_int
from genolong.cli.commands import evaluate, finetune, predict
from genolong.cli.outputs import OutputDirectory, declare


def register(subparsers) -> None:
    group = subparsers.add_parser(
        "chromatin", help="919 DeepSEA chromatin profiles: prepare the data, fine-tune, predict, evaluate")
    commands = group.add_subparsers(dest="chromatin_command", metavar="SUBCOMMAND", required=True)

    prepare = commands.add_parser(
        "prepare",
        help="convert DeepSEA train/valid/test.mat into memory-mapped arrays, optionally with genome context",
        description="Decode the DeepSEA .mat files into memory-mapped arrays plus manifest.json. With "
        "--genome, each 1,000-bp input is located in the genome (exact match, either strand) and replaced "
        "by the --context window centred on it. Resumable: rerun the same command after an interruption.")
    prepare.add_argument("--mat-dir", type=Path, required=True,
                         help="directory with train.mat, valid.mat and/or test.mat (deepsea_train_bundle)")
    prepare.add_argument("--out", type=Path, required=True, help="prepared directory to create")
    prepare.add_argument(
        "--genome", type=Path,
        help="FASTA (plain, gzip or bgzip) of the genome of the inputs: GRCh37/hg19 for DeepSEA")
    prepare.add_argument("--context", type=positive_int, help="window length with --genome (default 8000, as BigBird)")
    prepare.add_argument("--unlocated", choices=["keep", "drop"], default="keep",
                         help="rows whose input is not located exactly once: keep them at their original "
                         "length, or drop them (default keep)")
    prepare.add_argument("--chunk-rows", type=positive_int, default=16384, help="rows per chunk (default 16384)")
    prepare.add_argument("--probe-windows", type=positive_int, default=8,
                         help="probe windows counted per input when locating (default 8)")
    prepare.add_argument("--max-candidates", type=positive_int, default=20_000,
                         help="inputs with more candidate hits than this are left unlocated (default 20000)")
    declare(prepare, run_prepare, inputs=["mat_dir", "genome"],
            directories={"out": OutputDirectory("chromatin-data", atomic=True)})
    finetune.add_parser(
        commands, "chromatin", "fine-tune the 919-profile chromatin classifier on a `genolong chromatin prepare` "
        "dataset", "BCE with positive weight (8 in the presets, as BigBird), early stopping on the validation mean "
        "ROC AUC; per-profile test AUCs go to OUT/aucs.csv, class medians are printed next to DeepSEA and BigBird.")
    predict.add_chromatin_parser(commands)
    evaluate.add_parser(commands)


def run_prepare(args) -> None:
    from genolong.prep.chromatin_dataset import prepare_chromatin

    manifest = from_arguments(prepare_chromatin, args)
    print(f"wrote {args.out} (context {manifest['context']} bp)")
    for split, entry in manifest["splits"].items():
        line = f"  {split}: {entry['rows']:,} rows of {entry['rows_in']:,}, strand pairs: {entry['strand_pairs']['layout']}"
        if "locate" in entry:
            line += (
                f", located {entry['locate']['located']:,} ({100 * entry['locate']['located_fraction']:.2f}%)"
            )
        print(line)
