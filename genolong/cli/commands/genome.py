"""``genolong genome region|prepare``: print a region of a reference genome; index a genome for random access."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import from_arguments, positive_int
from genolong.cli.outputs import declare


def register(subparsers) -> None:
    group = subparsers.add_parser("genome", help="inspect, slice and prepare reference genomes")
    commands = group.add_subparsers(dest="genome_command", metavar="SUBCOMMAND", required=True)

    region = commands.add_parser("region", help="print a region of an indexed genome as FASTA")
    region.add_argument("genome", type=Path, help="FASTA, plain or bgzip")
    region.add_argument("region", help="CHROM:START-END, 0-based half-open (chr1 and 1 are aliases)")
    region.add_argument("--strand", choices=["+", "-"], default="+")
    declare(region, run_region, inputs=["genome"])

    # `genome prepare` (data acquisition): the logic lives in genolong/prep/genome_prepare.py
    prepare = commands.add_parser(
        "prepare", help="write an indexed bgzip (or plain) copy of a FASTA with a per-chromosome table",
        description="Rewrite FASTA[.gz] as BGZF with .fai and .gzi indexes (or plain FASTA with .fai) so "
        "that it can be read at random, plus FASTA.chromosomes.tsv (length, N fraction, soft-masked "
        "fraction). Streams the input: memory holds one chromosome.")
    prepare.add_argument("fasta", type=Path, help="input FASTA: plain, gzip or bgzip")
    prepare.add_argument("--out", type=Path,
                         help="output FASTA (default: current directory, x.fa.gz -> x.fa.bgz)")
    prepare.add_argument("--plain", action="store_true",
                         help="write uncompressed FASTA + .fai instead of BGZF")
    prepare.add_argument("--names", choices=["keep", "ucsc", "ensembl"], default="keep",
                         help="chromosome names: keep, ucsc (chr1, chrM) or ensembl (1, MT) (default: keep)")
    prepare.add_argument("--primary", action="store_true",
                         help="keep only assembled chromosomes (drop unplaced contigs and haplotypes)")
    prepare.add_argument("--line-width", type=positive_int, default=60, help="bases per line (default 60)")
    # the indexes and the table written beside --out are outputs under the same policy as --out itself
    declare(prepare, run_prepare, inputs=["fasta"], files=["out", *COMPANIONS],
            defaults={"out": _default_output, **{name: _companion(name) for name in COMPANIONS}})


#: The files ``genome prepare`` writes beside its --out, as they are named in messages.
COMPANIONS = ("index", "block index", "table")


def _default_output(args) -> Path:
    from genolong.prep.genome_prepare import default_output

    return default_output(args.fasta, plain=args.plain)


def _companion(name: str):
    def path(args) -> Path | None:
        from genolong.prep.genome_prepare import index_paths

        if name == "block index" and args.plain:
            return None  # a plain FASTA has no .gzi
        return index_paths(args.out)[COMPANIONS.index(name)]

    return path


def run_region(args) -> None:
    from genolong.dna.genome import Genome
    from genolong.dna.regions import Region

    region = Region.parse(args.region)
    with Genome(args.genome) as genome:
        end = region.end if region.end is not None else genome.chromosomes[genome.resolve(region.chrom)]
        seq = genome.fetch(region.chrom, region.start, end, args.strand)
    print(f">{region.chrom}:{region.start}-{end}({args.strand})")
    for start in range(0, len(seq), 60):
        print(seq[start:start + 60])


def run_prepare(args) -> None:
    from genolong.prep.genome_prepare import prepare_genome

    prepared = from_arguments(prepare_genome, args)
    print(f"{prepared.path}: {len(prepared.chromosomes)} sequences, {prepared.length:,} bp; "
          f"indexes {prepared.fai.name}{', ' + prepared.gzi.name if prepared.gzi else ''}; "
          f"table {prepared.table.name}")
