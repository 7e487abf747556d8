"""``genolong explain``: in-silico mutagenesis and gradient attributions, as arrays and sequence logos."""

from __future__ import annotations

import sys
from pathlib import Path

from genolong.cli.arguments import (
    add_classifier_argument,
    add_deprecated_option,
    add_precision_argument,
    from_arguments,
    positive_int,
)
from genolong.cli.commands.variants import add_profiles
from genolong.cli.outputs import OutputDirectory, declare

DESCRIPTION = (
    "Attribute a classifier's outputs to the bases of each input: every base of the central --ism-window bp "
    "mutated to the 3 others (each mutant retokenised), and captum gradients on the token embeddings spread "
    "back to bases, of each chosen output (--output NAME): a sigmoid's logit, a softmax class's probability, "
    "a regression value. Inputs: the records of FASTA, or windows of the model's input length centred on the "
    "regions of --regions (BED) in --genome. Writes OUT/ohe.npz and, per output, ism.npz and gradients.npz "
    "((N, 4, L), channels A, C, G, T: the layout of modisco-lite) and a sequence-logo PNG per record.")


def register(subparsers) -> None:
    parser = subparsers.add_parser("explain", help="in-silico mutagenesis, gradient attributions and logos",
                                   description=DESCRIPTION)
    parser.add_argument("fasta", type=Path, nargs="?", default=None, help="FASTA of model inputs (or --regions)")
    add_deprecated_option(parser, "--fasta", "FASTA (the positional input)", dest="fasta_option", type=Path)
    add_classifier_argument(parser)
    parser.add_argument("--regions", type=Path, default=None, help="BED of regions (with --genome)")
    parser.add_argument("--genome", type=Path, default=None, help="reference FASTA for --regions")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    add_profiles(parser, "explain (needed beyond 8 outputs)", "--output")
    parser.add_argument("--device", default="auto", help="auto (GPU when present), cpu, cuda, cuda:1, ...")
    add_precision_argument(parser)
    parser.add_argument("--ism-window", type=positive_int, default=None,
                        help="central bp of each input to attribute, or the whole input where it is shorter (default: "
                        "1000, or the model window if shorter)")
    parser.add_argument("--gradients", choices=("ig", "input-x-gradient", "none"), default="ig",
                        help="gradient method: integrated gradients (default), input x gradient, or none")
    parser.add_argument("--ig-steps", type=positive_int, default=16, help="integrated-gradients steps (default: 16)")
    parser.add_argument("--logo-width", type=positive_int, default=100,
                        help="bp shown in each logo: the most attributed stretch (default: 100)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="mutants per model call (default: 32)")
    declare(parser, run, inputs=["model", "fasta", "fasta_option", "regions", "genome"],
            directories={"out": OutputDirectory("explain", atomic=True)})


def run(args) -> None:
    from genolong.core.errors import UserError
    from genolong.core.progress import progress_bar
    from genolong.inference.explain.run import explain

    if args.fasta is not None and args.fasta_option is not None:
        raise UserError("give the FASTA once: --fasta is the deprecated spelling of the positional FASTA")
    fasta = args.fasta if args.fasta_option is None else args.fasta_option

    progress = progress_bar(unit=" mutants", disable=None, file=sys.stderr, desc="in-silico mutagenesis")
    try:
        records = from_arguments(explain, args, fasta=fasta, progress=progress,
                                 say=lambda line: print(line, file=sys.stderr))
    finally:
        progress.close()
    print(f"{records:,} records explained -> {args.out}", file=sys.stderr)
