"""One ``score-variants`` run: stream the variants in chunks, score, write parts, resume, assemble.

Memory is one chunk of variants (``chunk_size`` alleles, their windows and scores), whatever
the number of variants. After each chunk its part file and ``progress.json`` (the number of
input alleles done and the counts so far) are written atomically into ``.<out>.partial/``
beside the output. A run started again with the same inputs, model and options continues
after the last finished chunk; with anything changed it starts over. Bad input
(:class:`~genolong.errors.UserError`) removes the partial directory: nothing is left behind.
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import logging
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from genolong import __version__
from genolong.classifier import Classifier, StrandAveraged
from genolong.errors import UserError
from genolong.files import atomic_write_text
from genolong.genome import Genome
from genolong.inference.labels import label_class, select_labels
from genolong.inference.mlm_llr import MaskedLMEffects
from genolong.inference.variant_output import writer_for
from genolong.inference.variant_scoring import ClassifierEffects
from genolong.inference.variant_vcf import annotate_vcf, annotation_rows
from genolong.inference.variant_windows import VariantWindows, WindowBuilder, check_build
from genolong.inference.variants import SkippedAllele, Variant, VariantFile, check_not_empty

log = logging.getLogger(__name__)

PROGRESS = "progress.json"
ANNOTATION_SUFFIX = ".annotations.tsv"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "genolong_task.json")


def model_fingerprint(directory: Path) -> str:
    """sha256 (16 hex) of a model directory's weights, configuration and tokenizer."""
    digest = hashlib.sha256()
    for name in MODEL_FILES:
        path = directory / name
        if path.is_file():
            digest.update(name.encode())
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):  # noqa: B023 (read at once)
                    digest.update(block)
    return digest.hexdigest()[:16]


def genome_fingerprint(genome: Genome) -> str:
    """sha256 (16 hex) of the genome's contig names and lengths (a whole-file checksum of a
    3-GB FASTA would cost more than many runs)."""
    text = "".join(f"{name}\t{length}\n" for name, length in genome.chromosomes.items())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def input_fingerprint(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


class PartialRun:
    """The partial directory of a run: its parts and ``progress.json``."""

    def __init__(self, out: Path, identity: dict):
        self.folder = out.parent / f".{out.name}.partial"
        self.identity = json.loads(json.dumps(identity))
        self.state = {"identity": self.identity, "parts": 0, "alleles": 0, "counts": {}}
        progress = self.folder / PROGRESS
        if progress.is_file() and json.loads(progress.read_text()).get("identity") == self.identity:
            self.state = json.loads(progress.read_text())
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True, exist_ok=True)

    @property
    def resumed(self) -> bool:
        return self.state["parts"] > 0

    def part(self, index: int, suffix: str) -> Path:
        return self.folder / f"part-{index:06d}{suffix}"

    def commit(self, alleles: int, counts: Counter) -> None:
        self.state.update(parts=self.state["parts"] + 1, alleles=self.state["alleles"] + alleles, counts=dict(counts))
        atomic_write_text(self.folder / PROGRESS, json.dumps(self.state))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _windows_of(chunk: list, builder: WindowBuilder, source, counts: Counter) -> list[VariantWindows]:
    """The scoreable windows of a chunk of alleles; skips and flags are counted in ``counts``."""
    windows = []
    for item in chunk:
        counts["alleles"] += 1
        if isinstance(item, Variant):
            item = builder(item, source)
        if isinstance(item, SkippedAllele):
            counts[f"skipped: {item.reason}"] += 1
            continue
        counts["scored"] += 1
        for flag in item.flags:
            counts[f"flagged: {flag}"] += 1
        windows.append(item)
    return windows


def _alleles(variants: VariantFile) -> Iterator[Variant | SkippedAllele]:
    items = iter(variants)
    first = next(items, None)
    check_not_empty(variants.path, first)
    return itertools.chain([first], items)


def score_variant_file(
    variants: VariantFile, genome: Genome, builder: WindowBuilder, effects, writer, *,
    identity: dict, chunk_size: int = 1024, annotate: Path | None = None, top_k: int = 3, progress=None,
) -> dict:
    """Score every allele of ``variants`` into ``writer.out`` (see the module docstring).

    Args:
        builder: variant -> windows (or a skip), with the REF policy.
        effects: ``score(windows) -> {name: (n, P)}`` (module :mod:`variant_scoring`).
        writer: :class:`~genolong.inference.variant_output.LongTsv` or ``WideHdf5``.
        identity: what makes two runs the same (model, genome and input fingerprints, options).
        annotate: also write the input VCF with each allele's ``top_k`` effects in INFO.
        progress: optional tqdm-like object, advanced by one per allele.

    Returns:
        The counts (alleles, scored, ``skipped: reason``, ``flagged: flag``).
    """
    if chunk_size < 1 or top_k < 1:
        raise UserError(f"--chunk-size and --top-k must be positive, got {chunk_size} and {top_k}")
    if annotate is not None and not variants.is_vcf:
        raise UserError(f"--annotate-vcf needs a VCF input; {variants.path} is a TSV")
    check_build(variants.contigs, genome, variants.path)
    alleles = _alleles(variants)
    run = PartialRun(writer.out, identity)
    try:
        counts = Counter(run.state["counts"])
        done = run.state["alleles"]
        if run.resumed:
            log.info("%s: resuming after %d alleles (%d parts done)", writer.out, done, run.state["parts"])
        alleles = itertools.islice(alleles, done, None)
        if progress is not None:
            progress.update(done)
        while chunk := list(itertools.islice(alleles, chunk_size)):
            windows = _windows_of(chunk, builder, variants.path, counts)
            scores = effects.score(windows)
            if annotate is not None:
                rows = annotation_rows(windows, scores, effects.labels, top_k)
                atomic_write_text(run.part(run.state["parts"], ANNOTATION_SUFFIX), "".join(rows))
            writer.write_part(run.part(run.state["parts"], writer.part_suffix), windows, scores)
            run.commit(len(chunk), counts)
            if progress is not None:
                progress.update(len(chunk))
        provenance = identity | {
            "genolong": __version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "counts": dict(counts),
        }
        if annotate is not None:
            rank = "combined" if "combined" in effects.score_names else effects.score_names[0]
            annotate_vcf(variants, [run.part(i, ANNOTATION_SUFFIX) for i in range(run.state["parts"])], annotate, rank)
        writer.assemble([run.part(i, writer.part_suffix) for i in range(run.state["parts"])], provenance)
    except UserError:
        run.remove()
        raise
    run.remove()
    return dict(counts)


def effects_for(model: Path, *, score: str, profiles: list[str] | None, rc: bool, batch_size: int, device: str):
    """The effect model of ``--score``: ``effect`` (a classifier) or ``mlm-llr`` (a pretrained MLM).

    Returns:
        ``(effects, window_bp, classes)``; ``classes`` names each reported output's class.
    """
    if batch_size < 1:
        raise UserError(f"--batch-size must be positive, got {batch_size}")
    if score == "mlm-llr":
        if profiles or rc:
            raise UserError("--profiles and --rc apply to classifiers, not to --score mlm-llr")
        effects = MaskedLMEffects(model, batch_size, device)
        return effects, None, ["mlm"]
    classifier = Classifier.load(model, device=device)
    labels = select_labels(classifier.info.label_names, profiles)
    effects = ClassifierEffects(StrandAveraged(classifier) if rc else classifier, labels, batch_size)
    return effects, classifier.info.window_bp, [label_class(classifier.info.label_names, i) for i in labels]


def score_variants(
    variants: Path, genome: Path, model: Path, out: Path, *, score: str = "effect", profiles=None, rc=False,
    ref_mismatch: str = "skip", max_indel: int = 100, window: int | None = None, batch_size: int = 32,
    chunk_size: int = 1024, device: str = "auto", annotate: Path | None = None, top_k: int = 3, progress=None,
) -> dict:
    """``genolong score-variants``: load everything, check it, score (see :func:`score_variant_file`).

    ``window`` is the input length for ``mlm-llr`` (a classifier's is its own ``window_bp``).
    """
    variant_file, reference = VariantFile(variants), Genome(genome)
    effects, window_bp, classes = effects_for(
        model, score=score, profiles=profiles, rc=rc, batch_size=batch_size, device=device
    )
    window = window_bp or window
    if window is None or window < 1:
        raise UserError("--score mlm-llr needs --window (bp of sequence around each variant)")
    writer = writer_for(out, effects.labels, classes, effects.score_names)
    identity = {
        "model": str(model), "model_fingerprint": model_fingerprint(model),
        "genome": str(genome), "genome_fingerprint": genome_fingerprint(reference),
        "genome_file": input_fingerprint(Path(genome)),  # an edited base keeps the names and lengths
        "variants": input_fingerprint(variants),
        "options": {"score": score, "profiles": profiles, "rc": rc, "ref_mismatch": ref_mismatch,
                    "max_indel": max_indel, "window": window, "chunk_size": chunk_size,
                    "annotate_vcf": None if annotate is None else str(annotate), "top_k": top_k},
    }
    builder = WindowBuilder(reference, window, ref_mismatch=ref_mismatch, max_indel=max_indel)
    return score_variant_file(
        variant_file, reference, builder, effects, writer, identity=identity, chunk_size=chunk_size,
        annotate=annotate, top_k=top_k, progress=progress,
    )
