"""``genolong corpus build``: the document-style MLM corpus (BigBird App. F.1)."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import fraction, non_negative_int, positive_int
from genolong.cli.outputs import OutputDirectory, declare


def register(subparsers) -> None:
    group = subparsers.add_parser("corpus", help="build document-style MLM corpora")
    commands = group.add_subparsers(dest="corpus_command", metavar="SUBCOMMAND", required=True)
    build = commands.add_parser(
        "build", help="cut chromosomes into documents of sentences, tokenize, write memory-mapped shards")
    build.add_argument("--genome", required=True, type=Path, help="FASTA (plain, gzip or bgzip)")
    build.add_argument("--tokenizer", required=True, type=Path, help="tokenizer directory")
    build.add_argument("--out", required=True, type=Path, help="corpus directory (resumed if it exists)")
    build.add_argument("--config", type=Path, default=None, help="YAML with CorpusConfig fields")
    build.add_argument("--passes", type=positive_int, default=None, help="passes per chromosome (default 10)")
    build.add_argument("--seed", type=non_negative_int, default=None)
    build.add_argument("--valid-chromosomes", default=None, help="comma-separated (default chr7)")
    build.add_argument("--test-chromosomes", default=None, help="comma-separated (default chr8,chr9)")
    build.add_argument("--valid-tail-fraction", type=fraction, default=None,
                       help="also hold out this final fraction of every other chromosome for validation")
    build.add_argument("--test-tail-fraction", type=fraction, default=None)
    build.add_argument("--workers", type=positive_int, default=None,
                       help="processes building chromosomes at once (default: the CPU cores available); "
                       "the files are the same for any number")
    declare(build, run_build, inputs=["genome", "tokenizer", "config"],
            directories={"out": OutputDirectory("corpus")})


def corpus_config_from_args(args):
    """CorpusConfig from ``--config`` YAML, overridden by explicit flags."""
    from genolong.config import from_dict, load_yaml, to_dict
    from genolong.datasets.corpus_build import CorpusConfig

    config = load_yaml(args.config, CorpusConfig) if args.config else CorpusConfig()
    flags = ("passes", "seed", "valid_chromosomes", "test_chromosomes", "valid_tail_fraction",
             "test_tail_fraction")
    overrides = {name: getattr(args, name) for name in flags if getattr(args, name) is not None}
    for name in {"valid_chromosomes", "test_chromosomes"} & overrides.keys():
        overrides[name] = overrides[name].split(",")
    return from_dict(CorpusConfig, to_dict(config) | overrides, source="corpus options")


def run_build(args) -> None:
    from genolong.datasets.corpus_build import build_corpus

    manifest = build_corpus(args.genome, args.tokenizer, args.out, corpus_config_from_args(args), workers=args.workers)
    print(f"{'split':<6} {'documents':>10} {'sentences':>10} {'tokens':>12} {'bp':>14}")
    for split, totals in manifest["totals"].items():
        print(f"{split:<6} {totals['documents']:>10,} {totals['sentences']:>10,} {totals['tokens']:>12,} "
              f"{totals['sentence_bp']:>14,}")
    build = manifest["build"]
    if build["mbp_per_s"]:
        print(f"built {build['built_mbp']:.1f} Mbp (all passes) in {build['seconds']:.1f} s: "
              f"{build['mbp_per_s']:.2f} Mbp/s")
