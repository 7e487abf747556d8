"""Variants against the reference genome: build check, REF check, left-normalisation, model windows.

The variant is left-normalised (Tan et al. 2015, "Unified representation of genetic variants"); the
reference window is ``genome[s - W // 2, s - W // 2 + W)`` (``s``: the allele's 0-based start, ``W``: the
model's input length), the alternative window replaces the allele there and keeps length ``W`` on the
right. Bases outside the contig are ``N`` and flag the variant ``padded``.
"""

from __future__ import annotations

from dataclasses import dataclass

from genolong.core.errors import UserError
from genolong.dna.genome import Genome, canonical_chrom
from genolong.inference.variants.reader import SkippedAllele, Variant

#: Chromosome lengths of the two human builds, to name the build in an error.
BUILD_LENGTHS = {"1": {"GRCh37": 249_250_621, "GRCh38": 248_956_422},
                 "2": {"GRCh37": 243_199_373, "GRCh38": 242_193_529},
                 "17": {"GRCh37": 81_195_210, "GRCh38": 83_257_441},
                 "X": {"GRCh37": 155_270_560, "GRCh38": 156_040_895},
                 "Y": {"GRCh37": 59_373_566, "GRCh38": 57_227_415}}
#: Policies for a REF allele that differs from the genome.
REF_MISMATCH = ("error", "skip", "flag")
#: Policies for a variant on a contig the genome lacks (decoy, alt, unplaced contigs).
MISSING_CONTIG = ("skip", "error")
#: The skip reason of a variant on a contig the genome lacks.
MISSING_CONTIG_REASON = "contig not in the genome"


def _build_of(chrom: str, length: int) -> str:
    return next((f" ({build})" for build, known in BUILD_LENGTHS.get(canonical_chrom(chrom), {}).items()
                 if known == length), "")


def check_build(declared: dict[str, int], genome: Genome, source) -> None:
    """Refuse a VCF whose ``##contig`` lengths differ from the genome's (another build); contigs the genome
    lacks are not compared."""
    lengths = {canonical_chrom(name): (name, length) for name, length in genome.chromosomes.items()}
    for chrom, length in declared.items():
        name, genome_length = lengths.get(canonical_chrom(chrom), (None, None))
        if genome_length is not None and genome_length != length:
            raise UserError(
                f"{source}: contig {chrom} is {length:,} bp{_build_of(chrom, length)} in the VCF header but "
                f"{genome_length:,} bp{_build_of(name, genome_length)} in {genome.path}: the VCF is from "
                "another genome build")


@dataclass(frozen=True)
class VariantWindows:
    """A variant with its model inputs ``ref_window`` and ``alt_window`` (``W`` bp each): ``ref_key``
    ``(contig, window start)``, shared by variants with the same reference window; ``allele`` ``(start, ref
    length, alt length)`` in the windows; ``centre``, in a padded window, the variant's index, around which
    the model keeps its tokens (None: the usual central crop)."""

    variant: Variant
    ref_key: tuple[str, int]
    ref_window: str
    alt_window: str
    flags: tuple[str, ...]
    allele: tuple[int, int, int]
    centre: int | None = None


def fetch_padded(genome: Genome, contig: str, start: int, end: int) -> tuple[str, bool]:
    """``contig[start:end]`` with ``N`` for the bases outside the contig, and whether any were."""
    length = len(genome.fasta.records[contig])
    inner = genome.fetch(contig, min(max(start, 0), length), max(min(end, length), 0))
    left, right = max(0, -start), max(0, end - max(start, length))
    return "N" * left + inner + "N" * right, bool(left or right)


def left_normalise(genome: Genome, contig: str, start: int, ref: str, alt: str) -> tuple[int, str, str]:
    """Minimal, left-aligned ``(start, ref, alt)`` of an allele at 0-based ``start`` (Tan et al. 2015,
    Algorithm 1); for an indel one of the two alleles is empty."""
    while ref and alt and ref[-1] == alt[-1]:
        ref, alt = ref[:-1], alt[:-1]
    while ref and alt and ref[0] == alt[0]:
        ref, alt, start = ref[1:], alt[1:], start + 1
    if (ref and alt) or not (ref or alt):  # SNV or MNV (or no change): nothing to shift
        return start, ref, alt
    while start > 0:
        context = genome.fetch(contig, max(0, start - 64), start)
        for base in reversed(context):
            allele = ref or alt
            if base != allele[-1]:
                return start, ref, alt
            start -= 1
            ref, alt = (base + ref[:-1], alt) if ref else (ref, base + alt[:-1])
    return start, ref, alt


class WindowBuilder:
    """Turns :class:`Variant` items into :class:`VariantWindows` of ``window`` bp or :class:`SkippedAllele`.
    ``ref_mismatch``: ``error``, ``skip`` or ``flag`` (score on the genome's reference, flag the row);
    ``max_indel``: the longest allele scored after trimming; ``missing_contig``: ``skip`` or ``error``."""

    def __init__(self, genome: Genome, window: int, *, ref_mismatch: str = "skip", max_indel: int = 100,
                 missing_contig: str = "skip"):
        if ref_mismatch not in REF_MISMATCH:
            raise UserError(f"--ref-mismatch must be one of {', '.join(REF_MISMATCH)}, got {ref_mismatch!r}")
        if missing_contig not in MISSING_CONTIG:
            raise UserError(f"--missing-contig must be one of {', '.join(MISSING_CONTIG)}, got {missing_contig!r}")
        if max_indel < 1:
            raise UserError(f"--max-indel must be positive, got {max_indel}")
        self.genome, self.window, self.ref_mismatch, self.max_indel = genome, window, ref_mismatch, max_indel
        self.missing_contig = missing_contig

    def __call__(self, variant: Variant, source) -> VariantWindows | SkippedAllele:
        genome = self.genome
        try:
            contig = genome.resolve(variant.chrom)
        except UserError:
            if self.missing_contig == "skip":
                return SkippedAllele(MISSING_CONTIG_REASON, variant.line)
            raise UserError(f"{source}:{variant.line}: contig {variant.chrom!r} is not in {genome.path} "
                            f"(its contigs: {', '.join(list(genome.chromosomes)[:5])})",
                            hint="--missing-contig skip to go on") from None
        start, length = variant.pos - 1, len(genome.fasta.records[contig])
        if start + len(variant.ref) > length:
            raise UserError(
                f"{source}:{variant.line}: {variant.chrom}:{variant.pos} {variant.ref} lies beyond the "
                f"end of {contig} ({length:,} bp) in {genome.path}: is the file from another genome build?")
        flags = []
        if genome.fetch(contig, start, start + len(variant.ref)) != variant.ref:
            if self.ref_mismatch == "error":
                raise UserError(
                    f"{source}:{variant.line}: REF {variant.ref} at {variant.chrom}:{variant.pos} differs "
                    f"from the genome ({genome.fetch(contig, start, start + len(variant.ref))})",
                    hint="--ref-mismatch skip or flag to go on")
            if self.ref_mismatch == "skip":
                return SkippedAllele("REF differs from the genome", variant.line)
            flags.append("ref_mismatch")
        start, ref, alt = left_normalise(genome, contig, start, variant.ref, variant.alt)
        if max(len(ref), len(alt)) > self.max_indel:
            return SkippedAllele(f"longer than --max-indel {self.max_indel} bp", variant.line)
        if not ref and not alt:
            return SkippedAllele("ALT equals REF", variant.line)
        return self._windows(variant, contig, start, ref, alt, flags)

    def _windows(self, variant: Variant, contig: str, start: int, ref: str, alt: str, flags: list[str]):
        """The reference and alternative windows of a normalised allele (module docstring)."""
        first = start - self.window // 2
        ref_window, padded = fetch_padded(self.genome, contig, first, first + self.window)
        offset = start - first
        alt_window = (ref_window[:offset] + alt + ref_window[offset + len(ref) :])[: self.window]
        if len(alt_window) < self.window:
            end = first + self.window
            extension, extended_padded = fetch_padded(self.genome, contig, end, end + self.window - len(alt_window))
            alt_window += extension
            padded = padded or extended_padded
        if padded:
            flags.append("padded")
        centre = offset if padded else None
        return VariantWindows(variant, (contig, first), ref_window, alt_window, tuple(flags), (offset, len(ref), len(alt)),
                              centre)
