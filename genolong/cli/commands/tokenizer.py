"""``genolong tokenizer train|stats``."""

from __future__ import annotations

import json
from pathlib import Path

from genolong.cli.arguments import from_arguments, non_negative_int, positive_int
from genolong.cli.outputs import OutputDirectory, declare


def register(subparsers) -> None:
    group = subparsers.add_parser("tokenizer", help="train and inspect the BPE DNA tokenizer")
    commands = group.add_subparsers(dest="tokenizer_command", metavar="SUBCOMMAND", required=True)

    from genolong.dna.tokenizer import TokenizerTrainConfig

    defaults = TokenizerTrainConfig()
    train = commands.add_parser("train", help="train a BPE tokenizer on a sample of a genome")
    train.add_argument("--genome", type=Path, default=None,
                       help="FASTA (plain, gzip or bgzip); default: the shipped 56 kbp hg19 sample")
    train.add_argument("--out", required=True, type=Path, help="output directory")
    train.add_argument("--vocab-size", type=positive_int, default=defaults.vocab_size)
    train.add_argument("--sample-bp", type=positive_int, default=defaults.sample_bp,
                       help="bases of training text to sample (bounds memory: ~70 bytes/base; default %(default)s)")
    train.add_argument("--chunk-bp", type=positive_int, default=defaults.chunk_bp, help="sampled chunk length")
    train.add_argument("--min-frequency", type=non_negative_int, default=defaults.min_frequency)
    train.add_argument("--seed", type=non_negative_int, default=defaults.seed)
    train.add_argument("--region", action="append", default=[], metavar="CHROM[:START-END]",
                       help="train only on these regions (0-based, half-open; repeatable)")
    train.add_argument("--force", action="store_true", help="replace an existing output directory")
    declare(train, run_train, inputs=["genome"],
            directories={"out": OutputDirectory("tokenizer", atomic=True)})

    stats = commands.add_parser("stats", help="bp/token, token lengths and encode throughput on a genome")
    stats.add_argument("--tokenizer", required=True, type=Path)
    stats.add_argument("--genome", required=True, type=Path)
    stats.add_argument("--region", action="append", default=[], metavar="CHROM[:START-END]")
    stats.add_argument("--max-bp", type=positive_int, default=None, help="stop after this many bases")
    stats.add_argument("--json", type=Path, default=None, help="also write the report here")
    declare(stats, run_stats, inputs=["tokenizer", "genome"], files=["json"])


def run_train(args) -> None:
    from genolong.dna.regions import Region
    from genolong.dna.tokenizer import TokenizerTrainConfig, train_tokenizer

    config = from_arguments(TokenizerTrainConfig, args)
    regions = [Region.parse(r) for r in args.region]
    genome = args.genome
    if genome is None:
        from genolong.resources import sample_genome

        genome = sample_genome()
        print(f"no --genome given: training on the shipped sample {genome.name} (hg19 chr17 fragment + chrM)")
    meta = train_tokenizer(genome, args.out, config, regions=regions, force=args.force)
    sample = meta["sample"]
    print(f"trained {meta['vocab_size']:,} tokens on {sample['sampled_bp']:,} bp sampled from "
          f"{sample['genome_bp']:,} bp in {sum(meta['seconds'].values()):.1f} s -> {args.out}")
    if meta["vocab_size"] < args.vocab_size:
        print(f"note: the sample supports only {meta['vocab_size']:,} of the {args.vocab_size:,} requested tokens "
              f"(no pair left with frequency >= {args.min_frequency}); train on more sequence for the full size")


def run_stats(args) -> None:
    from genolong.core.files import atomic_write_text
    from genolong.dna.regions import Region, iter_regions
    from genolong.dna.tokenizer import load_tokenizer, tokenizer_stats

    tokenizer = load_tokenizer(args.tokenizer)
    regions = [Region.parse(r) for r in args.region]
    report = tokenizer_stats(tokenizer, iter_regions(args.genome, regions), max_bp=args.max_bp)
    print(f"bases          {report['bp']:,}")
    print(f"tokens         {report['tokens']:,}")
    print(f"bp/token       {report['bp_per_token']:.3f}")
    print(f"encode         {report['encode_mbp_per_s']:.2f} Mbp/s (encode_batch)")
    print("token length (bp): count")
    histogram = report["token_length_histogram"]
    peak = max(histogram.values())
    for length, count in histogram.items():
        print(f"  {length:>5}: {count:>9,} {'#' * max(1, round(40 * count / peak))}")
    if args.json:
        atomic_write_text(args.json, json.dumps(report, indent=2) + "\n")
