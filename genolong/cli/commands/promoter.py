"""``genolong promoter prepare|prepare-sources|baseline|finetune|predict``: promoter datasets, the k-mer
baseline, fine-tuning and prediction."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from genolong.cli.arguments import fraction, from_arguments, non_negative_int, positive_int
from genolong.cli.commands import finetune, predict
from genolong.cli.outputs import OutputDirectory, declare


def register(subparsers) -> None:
    group = subparsers.add_parser(
        "promoter", help="promoters: datasets (windows, negatives, splits), k-mer baseline, fine-tune, predict"
    )
    commands = group.add_subparsers(dest="promoter_command", metavar="SUBCOMMAND", required=True)
    _add_prepare(commands)
    _add_prepare_sources(commands)
    _add_baseline(commands)
    finetune.add_parser(
        commands, "promoter", "fine-tune a promoter classifier on a `genolong promoter prepare` dataset",
        "early stopping on validation F1; the decision threshold is chosen on validation; test F1, precision, "
        "recall, MCC, AUROC and AUPRC are printed next to the k-mer baseline.")
    predict.add_promoter_parser(commands, "predict")


def _add_prepare(commands) -> None:
    prepare = commands.add_parser(
        "prepare", help="build a promoter dataset directory (train/valid/test TSV + manifest.json)",
        description="Build a promoter dataset from one positive source: --tss BED with --genome FASTA "
        "(windows around each TSS, reverse-complemented on the minus strand), --text (one "
        "sequence per line, DeePromoter format) or --fasta.")
    prepare.add_argument("--out", type=Path, required=True, help="dataset directory to write")
    source = prepare.add_argument_group("positives")
    source.add_argument("--tss", type=Path, help="TSS BED with strand (EPDnew: the TSS is thickStart)")
    source.add_argument("--genome", type=Path, help="genome FASTA (plain or bgzip) for --tss")
    source.add_argument(
        "--window", help="offsets around the TSS: deepromoter (-249..+50, 300 bp), bigbird (-5000..+2999, "
        "8000 bp) or START:END half-open, written --window=-249:51 (default: deepromoter)")
    source.add_argument("--text", type=Path, help="positives, one sequence per line (DeePromoter format)")
    source.add_argument("--fasta", type=Path, help="positives as FASTA")
    _add_negative_arguments(prepare.add_argument_group("negatives"))
    prepare.add_argument("--max-n-fraction", type=fraction, default=0.0,
                         help="skip sequences with a larger fraction of N (default: 0)")
    _add_split_arguments(prepare.add_argument_group("split"))
    prepare.add_argument("--seed", type=non_negative_int, default=42, help="seed of every random step (default: 42)")
    prepare.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    declare(prepare, run_prepare, inputs=["tss", "genome", "text", "fasta", "negative_fasta"],
            directories={"out": OutputDirectory("promoter-data", atomic=True)})


def _add_negative_arguments(negatives) -> None:
    negatives.add_argument(
        "--negatives", default="substitution", choices=["substitution", "shuffle", "genomic", "fasta"],
        help="substitution: DeePromoter (12 of 20 pieces random); shuffle: GENA-LM (12 of 20 "
        "pieces permuted); genomic: real windows far from every TSS; fasta: real "
        "non-promoters from --negative-fasta (default: substitution)")
    negatives.add_argument("--negative-fasta", type=Path, help="non-promoter FASTA for --negatives fasta")
    negatives.add_argument("--per-positive", type=positive_int,
                           help="negatives per positive for substitution/shuffle/genomic (default: 1)")
    negatives.add_argument("--min-tss-distance", type=non_negative_int,
                           help="bp between a genomic negative and the nearest TSS (default: 10000)")


def _add_split_arguments(split) -> None:
    split.add_argument("--split", choices=["random", "chromosome"], default="random",
                       help="random: stratified by label; chromosome: held-out chromosomes (default: random)")
    split.add_argument("--fractions", type=_numbers,
                       help="train,valid,test fractions for --split random (default: 0.8,0.1,0.1)")
    split.add_argument("--valid-chroms", type=_names, default=(),
                       help="comma-separated, for --split chromosome")
    split.add_argument("--test-chroms", type=_names, default=(),
                       help="comma-separated, for --split chromosome")


def _add_prepare_sources(commands) -> None:
    by_source = commands.add_parser(
        "prepare-sources",
        help="build a held-out-SOURCE promoter dataset (train on some data sets, test on others)",
        description="Build a promoter dataset from several sources named in a YAML spec (promoter FASTA or "
        "text files, real non-promoter FASTA files, genomes for random background windows), each "
        "with a role: train, valid or test. Identical sequences are removed across all sources "
        "before splitting; the train sources are also split at random into train and random_test "
        "(the in-source test); every split gets substitution and shuffle negatives made from its own "
        "promoters. `genolong promoter finetune` on it reports metrics per pair of sources on the "
        "held-out test sources and on random_test, next to the k-mer baseline.")
    by_source.add_argument("--spec", default="default",
                           help="YAML spec, or a shipped one by name (default: default, the default model's)")
    by_source.add_argument("--root", type=Path,
                           help="directory the spec's paths are relative to (default: the spec's)")
    by_source.add_argument("--out", type=Path, required=True, help="dataset directory to write")
    by_source.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    declare(by_source, run_prepare_sources, inputs=["spec", "root"],
            directories={"out": OutputDirectory("promoter-data", atomic=True)})


def _add_baseline(commands) -> None:
    baseline = commands.add_parser("baseline",
                                   help="k-mer frequency + logistic regression on a promoter dataset")
    baseline.add_argument("--data", type=Path, required=True,
                          help="dataset directory from `promoter prepare`")
    baseline.add_argument("--k-min", type=positive_int, default=4, help="smallest k-mer (default: 4)")
    baseline.add_argument("--k-max", type=positive_int, default=6, help="largest k-mer (default: 6)")
    baseline.add_argument("--C", type=_numbers, default=(1e-4, 1e-3, 1e-2, 1e-1, 1.0), dest="Cs",
                          help="inverse L2 strengths to try, the best on valid AUPRC is kept "
                          "(default: 0.0001,0.001,0.01,0.1,1)")
    baseline.add_argument("--out", type=Path, help="report JSON (default: DATA/kmer_baseline.json)")
    declare(baseline, run_baseline, inputs=["data"], files=["out"],
            defaults={"out": lambda args: args.data / "kmer_baseline.json"})


def _numbers(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def run_prepare(args) -> None:
    from genolong.prep.promoter_dataset import PromoterDatasetConfig, build_promoter_dataset
    from genolong.prep.promoters import TssWindow

    config = from_arguments(PromoterDatasetConfig, args, tss_bed=args.tss,
                            window=None if args.window is None else TssWindow.parse(args.window))
    manifest = build_promoter_dataset(config, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}: {manifest['sequence_length']} bp, "
          f"negatives: {manifest['negatives']['method']}, split: {manifest['split']['method']}")
    for name, counts in manifest["counts"].items():
        print(f"  {name:<5}  promoters {counts['1']:>7,}  non-promoters {counts['0']:>7,}")
    skipped = {**manifest["positives"].get("skipped", {}), **manifest["deduplication"]}
    if any(skipped.values()):
        print("  dropped: " + ", ".join(f"{key} {value:,}" for key, value in skipped.items() if value))


def run_prepare_sources(args) -> None:
    from genolong.prep.source_split import build_source_split_dataset, load_source_split_config

    config = load_source_split_config(args.spec, args.root)
    manifest = build_source_split_dataset(config, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}: {manifest['min_sequence_length']}-{manifest['sequence_length']} bp, split by source")
    for name, counts in manifest["counts_by_source"].items():
        print(f"  {name}")
        for source, count in counts.items():
            print(f"    {source:<60} {count:>7,}")
    if any(manifest["deduplication"].values()):
        print("  dropped: " + ", ".join(f"{k} {v:,}" for k, v in manifest["deduplication"].items() if v))


def run_baseline(args) -> None:
    from genolong.core.files import atomic_write_text
    from genolong.evaluation.kmer_baseline import KmerBaselineConfig, run_kmer_baseline
    from genolong.evaluation.metrics import format_metrics_table

    config = KmerBaselineConfig(k_min=args.k_min, k_max=args.k_max, Cs=args.Cs)
    report = run_kmer_baseline(args.data, config)
    atomic_write_text(args.out, json.dumps(report, indent=2) + "\n")
    name = f"kmer {config.k_min}-{config.k_max} (C={report['C']:g})"
    print(format_metrics_table({f"{name} valid": report["valid"], f"{name} test": report["test"]}))
    print(f"report: {args.out}")
