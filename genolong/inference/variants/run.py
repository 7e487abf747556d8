"""One ``score-variants`` run: chunks of variants through the predict loop, parts, resume, assembly.

Each finished chunk leaves its parts and counts in ``.<out>.partial/`` (:class:`PartialRun`); rank 0
assembles them in input order, the same bytes on any number of ranks. A run started again with the same
inputs, model and options scores only the chunks not yet finished; bad input removes the directory. The
provenance's date is ``SOURCE_DATE_EPOCH`` when set (the reproducible-builds convention).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import shutil
from collections import Counter
from pathlib import Path

import torch

from genolong import __version__
from genolong.classifier.kmer_component import COMPONENT_FILE
from genolong.classifier.task_info import reads_both_strands
from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text, work_path
from genolong.dna.genome import Genome
from genolong.inference.labels import label_class, select_labels
from genolong.inference.loop import StepModule, build_trainer, predict
from genolong.inference.variants.loop import ANNOTATION_SUFFIX, VariantChunks, VariantPartWriter
from genolong.inference.variants.mlm_llr import MaskedLMEffects
from genolong.inference.variants.output import writer_for
from genolong.inference.variants.reader import VariantFile
from genolong.inference.variants.scoring import ClassifierEffects, rank_score
from genolong.inference.variants.vcf_annotation import annotate_vcf
from genolong.inference.variants.windows import MISSING_CONTIG_REASON, WindowBuilder, check_build
from genolong.tasks.task import load_classifier

log = logging.getLogger(__name__)

IDENTITY = "identity.json"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "genolong_task.json", COMPONENT_FILE)


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
    """sha256 (16 hex) of the genome's contig names and lengths (cheaper than a checksum of the file)."""
    text = "".join(f"{name}\t{length}\n" for name, length in genome.chromosomes.items())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def input_fingerprint(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


class PartialRun:
    """The partial directory of a run: ``identity.json`` (what makes two runs the same) and, per finished
    chunk ``i``, its parts and ``part-i.json`` (its counts, written last: the mark that it is done)."""

    def __init__(self, out: Path, identity: dict):
        self.folder = work_path(out, "partial")
        self.identity = json.loads(json.dumps(identity))

    def prepare(self) -> None:
        """Keep the directory of an earlier run with the same identity; else start it afresh."""
        path = self.folder / IDENTITY
        if not (path.is_file() and json.loads(path.read_text()) == self.identity):
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            atomic_write_text(path, json.dumps(self.identity))
        finished = len(list(self.folder.glob("part-*.json")))
        if finished:
            log.info("%s: resuming with %d chunks done", self.folder, finished)

    def part(self, index: int, suffix: str) -> Path:
        return self.folder / f"part-{index:06d}{suffix}"

    def done(self, index: int) -> bool:
        return self.part(index, ".json").is_file()

    def commit(self, index: int, counts: Counter) -> None:
        atomic_write_text(self.part(index, ".json"), json.dumps(dict(counts)))

    def counts(self, chunks: int) -> dict[str, int]:
        """The counts of chunks ``0 .. chunks - 1`` together, by name."""
        total = Counter()
        for index in range(chunks):
            total.update(json.loads(self.part(index, ".json").read_text()))
        return dict(sorted(total.items()))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def run_date() -> str:
    """Now (UTC, seconds), or ``SOURCE_DATE_EPOCH`` when set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch and epoch.isdigit()
              else datetime.datetime.now(datetime.timezone.utc))
    return moment.isoformat(timespec="seconds")


def score_variant_file(variants: VariantFile, genome: Genome, builder: WindowBuilder, effects, writer,
                       trainer, *, identity: dict, chunk_size: int = 1024, annotate: Path | None = None,
                       top_k: int = 3, progress: bool = False) -> dict | None:
    """Score every allele of ``variants`` into ``writer.out`` with ``effects`` (an effect model on this rank's
    device), and with ``annotate`` write the input VCF with each allele's ``top_k`` effects in INFO; the
    counts (alleles, scored, ``skipped: reason``, ``flagged: flag``), None on ranks other than 0."""
    if chunk_size < 1 or top_k < 1:
        raise UserError(f"--chunk-size and --top-k must be positive, got {chunk_size} and {top_k}")
    if annotate is not None and not variants.is_vcf:
        raise UserError(f"--annotate-vcf needs a VCF input; {variants.path} is a TSV")
    check_build(variants.contigs, genome, variants.path)
    if next(iter(variants), None) is None:
        raise UserError(f"{variants.path}: no variants")
    run = PartialRun(writer.out, identity | {"batch_size": effects.batch_size})  # float sums differ by batch
    chunks = VariantChunks(variants, builder, chunk_size, run, trainer.global_rank, trainer.world_size)
    loader = torch.utils.data.DataLoader(chunks, batch_size=None)
    part_writer = VariantPartWriter(run, writer, effects.labels, None if annotate is None else top_k,
                                    progress=progress, description=variants.path.name)
    try:
        module = StepModule(lambda chunk: (chunk, effects.score(chunk.windows) if chunk.index >= 0 else {}))
        predict(trainer, module, loader, part_writer,
                resume=f"the same command continues after the chunks kept in {run.folder}")
        if trainer.world_size > 1:
            trainer.strategy.barrier("variant parts")
        if trainer.global_rank != 0:
            return None
        counts = run.counts(chunks.chunks)
        check_some_scored(counts, variants, genome)
        provenance = identity | {"genolong": __version__, "date": run_date(), "counts": counts}
        if annotate is not None:
            rank = rank_score(effects.score_names)
            annotate_vcf(variants, [run.part(i, ANNOTATION_SUFFIX) for i in range(chunks.chunks)], annotate, rank)
        writer.assemble([run.part(i, writer.part_suffix) for i in range(chunks.chunks)], provenance)
    except UserError:
        run.remove()
        raise
    run.remove()
    return counts


def check_some_scored(counts: dict[str, int], variants: VariantFile, genome: Genome) -> None:
    """Refuse a run that scored no allele, naming why (every contig missing: the VCF and the genome name
    their contigs differently, or are of two species)."""
    if counts.get("scored", 0):
        return
    if counts.get(f"skipped: {MISSING_CONTIG_REASON}", 0) == counts.get("alleles", 0):
        theirs = list(variants.contigs) or [next(iter(variants)).chrom]
        raise UserError(f"{variants.path}: none of its contigs is in {genome.path}: the variants name them "
                        f"{', '.join(theirs[:3])}..., the genome {', '.join(list(genome.chromosomes)[:3])}...",
                        hint="give the genome the variants were called on, or rename the contigs")
    reasons = ", ".join(f"{n} {key}" for key, n in counts.items() if key.startswith("skipped: "))
    raise UserError(f"{variants.path}: no allele scored ({reasons})")


def effects_for(model: Path, *, score: str, profiles: list[str] | None, rc: bool | None, batch_size: int, device: str):
    """``(effects, window_bp, classes)`` of ``--score``: ``effect`` (a classifier) or ``mlm-llr`` (a
    pretrained MLM); ``classes`` names each reported output's class."""
    if batch_size < 1:
        raise UserError(f"--batch-size must be positive, got {batch_size}")
    if score == "mlm-llr":
        if profiles or rc:
            raise UserError("--profiles and --rc apply to classifiers, not to --score mlm-llr")
        return MaskedLMEffects(model, batch_size, device), None, ["mlm"]
    classifier = load_classifier(model, device=device)
    labels = select_labels(classifier.info.label_names, profiles)
    effects = ClassifierEffects(classifier, labels, batch_size, rc=reads_both_strands(rc, classifier.info))
    return effects, classifier.info.window_bp, [label_class(classifier.info.label_names, i) for i in labels]


def score_variants(variants: Path, genome: Path, model: Path, out: Path, *, score: str = "effect",
                   profiles=None, rc=None, ref_mismatch: str = "skip", missing_contig: str = "skip",
                   max_indel: int = 100, window: int | None = None, batch_size: int = 32,
                   chunk_size: int = 1024, accelerator: str = "auto", devices: int | str = 1,
                   num_nodes: int = 1, precision: str = "auto", annotate: Path | None = None, top_k: int = 3,
                   progress: bool = False) -> dict | None:
    """``genolong score-variants``: load everything, check it, score (:func:`score_variant_file`); None on
    ranks other than 0. ``window``: the input length of ``mlm-llr`` (a classifier's is its ``window_bp``)."""
    variant_file, reference = VariantFile(variants), Genome(genome)
    trainer = build_trainer(accelerator=accelerator, devices=devices, num_nodes=num_nodes, callbacks=[],
                            precision=precision)
    effects, window_bp, classes = effects_for(model, score=score, profiles=profiles, rc=rc, batch_size=batch_size,
                                              device=str(trainer.strategy.root_device))
    window = window_bp or window
    if window is None or window < 1:
        raise UserError("--score mlm-llr needs --window (bp of sequence around each variant)")
    writer = writer_for(out, effects.labels, classes, effects.score_names)
    identity = {
        "model": str(model), "model_fingerprint": model_fingerprint(model),
        "genome": str(genome), "genome_fingerprint": genome_fingerprint(reference),
        "genome_file": input_fingerprint(Path(genome)),  # an edited base keeps the names and lengths
        "variants": input_fingerprint(variants),
        "options": {"score": score, "profiles": profiles, "rc": effects.rc, "ref_mismatch": ref_mismatch,
                    "max_indel": max_indel, "window": window, "chunk_size": chunk_size,
                    "annotate_vcf": None if annotate is None else str(annotate), "top_k": top_k},
    }
    builder = WindowBuilder(reference, window, ref_mismatch=ref_mismatch, max_indel=max_indel,
                            missing_contig=missing_contig)
    return score_variant_file(variant_file, reference, builder, effects, writer, trainer, identity=identity,
                              chunk_size=chunk_size, annotate=annotate, top_k=top_k, progress=progress)
