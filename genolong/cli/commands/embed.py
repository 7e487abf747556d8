"""``genolong embed``: embeddings of FASTA or CSV/TSV records or BED regions from any genolong model
directory, streamed to an HDF5 file (:mod:`genolong.inference.embed`)."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import (
    add_deprecated_option,
    add_model_argument,
    add_precision_argument,
    positive_int,
)
from genolong.cli.outputs import declare


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "embed", help="per-sequence or per-base embeddings of FASTA/CSV records or BED regions, to HDF5",
        description="Embeddings from a model directory's encoder (an MLM model or a fine-tuned classifier). "
        "The HDF5 file holds 'ids' (N,) and 'embeddings' (N, n_layers, H) float32, or with --per-base a group "
        "'per_base' of one (n_layers, L, H) dataset per record (named by its 0-based position, attribute 'id'): "
        "each base gets the vector of the token that covers it. A CSV/TSV table needs a 'sequence' column "
        "('id' optional). BED/narrowPeak regions (--regions with --genome) are read as `task prepare` reads them: "
        "with --length N, N bp centred on each region (its narrowPeak summit when given), else the region itself; "
        "ids from the name column, else chrom:start-end. A record longer than the model's input, or a character outside the IUPAC codes, "
        "stops the run with exit status 2 and no output file.",
    )
    parser.add_argument("sequences", type=Path, nargs="?", help="FASTA file (plain or gzip), or .csv/.tsv table")
    parser.add_argument("--regions", type=Path, help="BED or narrowPeak regions instead of SEQUENCES (with --genome)")
    add_deprecated_option(parser, "--bed", "--regions", type=Path)
    parser.add_argument("--genome", type=Path, help="FASTA genome of the --regions (plain or bgzip)")
    parser.add_argument("--length", type=positive_int, metavar="N",
                        help="with --regions: N bp centred on each region (default: the region itself)")
    add_model_argument(parser, "model")
    parser.add_argument("--out", type=Path, required=True, help="HDF5 file to write")
    parser.add_argument("--layers", type=int, nargs="+", default=[-1], metavar="I",
                        help="hidden layers: 0 the token embeddings, i block i's output, -1 the last (default: -1)")
    parser.add_argument("--pooling", choices=["mean", "cls"], default="mean",
                        help="mean over the real tokens (default) or the [CLS] vector")
    parser.add_argument("--per-base", action="store_true", help="one vector per base instead of one per record")
    parser.add_argument("--both-strands", action="store_true",
                        help="average with the reverse complement's embedding (strand-invariant)")
    parser.add_argument("--batch-size", type=positive_int, default=16, help="records per model call (default: 16)")
    parser.add_argument("--device", default="auto", help="auto (GPU when present), cpu, cuda, ...")
    add_precision_argument(parser)
    declare(parser, run, inputs=["sequences", "regions", "genome", "model"], files=["out"])


def run(args) -> None:
    import sys

    from genolong.classifier.embedder import Embedder
    from genolong.core.errors import UserError
    from genolong.inference.embed import read_sequences, write_embeddings

    if (args.sequences is None) == (args.regions is None) or (args.regions is None) != (args.genome is None):
        raise UserError("give SEQUENCES (FASTA or CSV/TSV), or --regions with --genome")
    if args.length is not None and args.regions is None:
        raise UserError("--length goes with --regions")
    if args.regions is not None:
        from genolong.datasets.task_inputs import bed_records

        records, source = bed_records(args.regions, args.genome, args.length), args.regions
    else:
        records, source = read_sequences(args.sequences), args.sequences
    embedder = Embedder.load(args.model, layers=tuple(args.layers), pooling=args.pooling, device=args.device,
                             precision=args.precision)
    count = write_embeddings(embedder, records, args.out, batch_size=args.batch_size,
                             per_base=args.per_base, both_strands=args.both_strands, source=source)
    print(f"{count} records embedded into {args.out}", file=sys.stderr)
