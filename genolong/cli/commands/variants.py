"""``genolong score-variants``: the effect of each variant of a VCF/TSV on a classifier's outputs."""

from __future__ import annotations

import sys
from pathlib import Path

from genolong.cli.arguments import (
    add_classifier_argument,
    add_device_arguments,
    add_strands_argument,
    from_arguments,
    non_negative_int,
    positive_int,
)
from genolong.cli.outputs import declare
from genolong.inference.variants.windows import MISSING_CONTIG, REF_MISMATCH

DESCRIPTION = (
    "Score each ALT allele of a VCF (plain, bgzip or BCF) or a TSV 'chrom pos ref alt [id]' (1-based): the "
    "model's outputs on a reference and an alternative window centred on the variant (the model's input "
    "length; indels keep it by trimming or extending the right flank), and per output, as the model's "
    "inference spec says: for probabilities (sigmoids, a softmax's classes) p_ref, p_alt, diff, abs_diff, "
    "logit_diff, combined (|diff|*|logit_diff|, DeepSEA); for regression values ref, alt, diff, abs_diff. Multi-allelic sites are split; symbolic "
    "alleles, '*' and breakends are skipped and counted; chromosome names resolve through aliases (chr1/1, "
    "chrM/MT). A VCF whose ##contig lengths differ from the genome (another build), a variant beyond a contig "
    "end or on a contig the genome lacks stops the run (exit 2, nothing written). --out NAME.tsv[.gz]: one "
    "row per variant x output (use --profiles); NAME.h5: a wide matrix of every output. An interrupted run "
    "continues where it stopped when started again with the same arguments.")


def register(subparsers) -> None:
    parser = subparsers.add_parser("score-variants", help="variant effects on a classifier's outputs (any task)",
                                   description=DESCRIPTION)
    parser.add_argument("--vcf", type=Path, required=True, help="VCF, .vcf.gz, BCF, or TSV chrom pos ref alt [id]")
    parser.add_argument("--genome", type=Path, required=True, help="reference FASTA (plain or bgzip)")
    add_classifier_argument(parser, "classifier (or, with --score mlm-llr, pretrained MLM)")
    parser.add_argument("--out", type=Path, required=True, help=".tsv/.tsv.gz (long) or .h5 (wide)")
    add_profiles(parser, "report")
    add_strands_argument(parser, "average the outputs of both strands")
    parser.add_argument("--ref-mismatch", choices=REF_MISMATCH, default="skip",
                        help="a REF allele that differs from the genome: stop, skip and count (default), or "
                        "score on the genome's reference with the flag ref_mismatch")
    parser.add_argument("--missing-contig", choices=MISSING_CONTIG, default="skip",
                        help="a variant on a contig the genome lacks (decoy, alt, unplaced): skip and count "
                        "(default) or stop; a run where no contig is found stops either way")
    parser.add_argument("--max-indel", type=non_negative_int, default=100,
                        help="longest allele scored, bp after trimming shared bases (default: 100)")
    parser.add_argument("--score", choices=("effect", "mlm-llr"), default="effect",
                        help="effect: a fine-tuned classifier; mlm-llr: zero-shot log-likelihood ratio of a "
                        "pretrained masked language model")
    parser.add_argument("--window", type=positive_int, default=None, help="bp around each variant for --score mlm-llr")
    parser.add_argument("--annotate-vcf", type=Path, default=None, metavar="VCF",
                        help="also write the input VCF (.vcf or .vcf.gz) with each allele's top effects in INFO "
                        "GENOLONG=ALT:PROFILE:VALUE&...")
    parser.add_argument("--top-k", type=positive_int, default=3, help="effects per allele in --annotate-vcf (default: 3)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="sequences per model call (default: 32)")
    parser.add_argument("--chunk-size", type=positive_int, default=1024,
                        help="alleles per output part, the unit of memory and of resuming (default: 1024)")
    add_device_arguments(parser)
    declare(parser, run, inputs=["vcf", "genome", "model"], files=["out", "annotate_vcf"])


def add_profiles(parser, verb: str, *aliases: str) -> None:
    """``--profiles`` (and ``aliases``): which model outputs to ``verb`` (shared with ``explain``)."""
    parser.add_argument("--profiles", *aliases, nargs="+", default=None, metavar="P",
                        help=f"outputs to {verb}: full names, classes DHS/TF/HM, or name parts (CTCF, HepG2)")


def run(args) -> None:
    from genolong.inference.variants.run import score_variants

    counts = from_arguments(score_variants, args, variants=args.vcf, annotate=args.annotate_vcf, progress=True)
    if counts is None:  # a rank other than 0: rank 0 reports
        return
    details = ", ".join(f"{count:,} {what}" for what, count in sorted(counts.items()) if what not in ("alleles", "scored"))
    print(f"{counts.get('alleles', 0):,} alleles, {counts.get('scored', 0):,} scored"
          + (f"; {details}" if details else "") + f" -> {args.out}", file=sys.stderr)
