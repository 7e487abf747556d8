"""``genolong genome ...``: inspect and slice reference genomes."""

from __future__ import annotations

from pathlib import Path


def register(subparsers) -> None:
    group = subparsers.add_parser("genome", help="inspect, slice and prepare reference genomes")
    commands = group.add_subparsers(dest="genome_command", metavar="SUBCOMMAND", required=True)

    fetch = commands.add_parser("fetch", help="print a region of an indexed genome as FASTA")
    fetch.add_argument("genome", type=Path, help="FASTA, plain or bgzip")
    fetch.add_argument("region", help="CHROM:START-END, 0-based half-open (chr1 and 1 are aliases)")
    fetch.add_argument("--strand", choices=["+", "-"], default="+")
    fetch.set_defaults(func=run_fetch)


def run_fetch(args) -> int:
    from genolong.genome import Genome
    from genolong.tokenizer import Region

    region = Region.parse(args.region)
    with Genome(args.genome) as genome:
        end = region.end if region.end is not None else genome.chromosomes[genome.resolve(region.chrom)]
        seq = genome.fetch(region.chrom, region.start, end, args.strand)
    print(f">{region.chrom}:{region.start}-{end}({args.strand})")
    for start in range(0, len(seq), 60):
        print(seq[start:start + 60])
    return 0
