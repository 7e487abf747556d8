"""``genolong explain``: attributions for the records of a FASTA file or the regions of a BED file.

Output directory (written atomically; arrays are held in memory, so explain a few hundred
records per run, not a genome)::

    records.tsv                  name, input_bp, start, end (the attributed window in the input), source
    ohe.npz                      arr_0: (N, 4, L) one-hot of the attributed windows, channels A, C, G, T
    <target>/ism.npz             arr_0: (N, 4, L) in-silico mutagenesis effects on the output's logit
                                 (a softmax class: its probability; regression: the value)
    <target>/gradients.npz       arr_0: (N, 4, L) gradient attributions (when not --gradients none)
    <target>/logos/<n>_<name>.png  sequence logos of the most attributed stretch of each record

``<target>`` is ``<column>_<output name>`` per selected output. The npz files are what
``modisco motifs -s ohe.npz -a <target>/ism.npz`` (modisco-lite) reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import logomaker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from genolong.dna.genome import Genome
from genolong.dna.sequence import read_fasta
from genolong.errors import InputError, UserError
from genolong.files import atomic_path
from genolong.inference.bed import read_bed_regions
from genolong.inference.explain.attributions import (
    BASES,
    gradient_attributions,
    one_hot,
    saturation_mutagenesis,
)
from genolong.inference.labels import select_labels
from genolong.inference.variants.windows import fetch_padded
from genolong.outputs import mark_directory
from genolong.tasks.task import load_classifier


@dataclass(frozen=True)
class ExplainRecord:
    """One model input and the window of it to attribute: ``sequence[start:start + length]``."""

    name: str
    sequence: str
    start: int
    length: int
    source: str


def _centred(name: str, sequence: str, length: int, source: str, path) -> ExplainRecord:
    if len(sequence) < length:
        raise InputError(path, f"{len(sequence)} bp, shorter than the attributed window of {length} bp",
                         record=name, hint="lower --ism-window")
    return ExplainRecord(name, sequence, (len(sequence) - length) // 2, length, source)


def fasta_records(path: Path, length: int | None, longest: int) -> list[ExplainRecord]:
    """Each FASTA record is one input; its central ``length`` bp are attributed (None: ``longest``
    bp, or the shortest record's length when that is shorter)."""
    records = [(record.name, record.sequence) for record in read_fasta(path, unique_names=False)]
    if length is None:
        length = min([longest, *(len(sequence) for _, sequence in records)])
    return [_centred(name, sequence, length, ".", path) for name, sequence in records]


def bed_records(path: Path, genome: Genome, window: int, length: int) -> Iterator[ExplainRecord]:
    """Each BED region gives an input of ``window`` bp centred on it (``N`` beyond the contig)."""
    for region in read_bed_regions(path, genome):
        first = (region.start + region.end) // 2 - window // 2
        sequence, _ = fetch_padded(genome, region.chrom, first, first + window)
        name = region.name or f"{region.chrom}:{region.start}-{region.end}"
        yield _centred(name, sequence, length, f"{region.chrom}:{first}-{first + window}", path)


def logo_stretch(importance: np.ndarray, width: int) -> int:
    """Start of the ``width``-bp stretch with the largest total ``|importance|`` (L,)."""
    if len(importance) <= width:
        return 0
    totals = np.convolve(np.abs(importance), np.ones(width), mode="valid")
    return int(np.argmax(totals))


def plot_logos(path: Path, title: str, reference: np.ndarray, panels: dict[str, np.ndarray], width: int) -> None:
    """One logo per panel of the ``width``-bp stretch most attributed by the first panel.

    Args:
        reference: (4, L) one-hot.
        panels: name -> (4, L) attributions; ISM effects are drawn as the importance of the
            reference base, ``-mean`` of its three substitutions.
    """
    heights = {
        name: reference * (-values.sum(0) / 3 if name == "ism" else values.sum(0)) for name, values in panels.items()
    }
    first = logo_stretch(next(iter(heights.values())).sum(0), width)
    span = slice(first, first + width)
    figure = Figure(figsize=(max(6, width / 8), 2.2 * len(heights)))
    axes = figure.subplots(len(heights), 1, squeeze=False)
    for axis, (name, matrix) in zip(axes[:, 0], heights.items(), strict=True):
        frame = pd.DataFrame(matrix[:, span].T, columns=list(BASES), index=range(first, first + matrix[:, span].shape[1]))
        logomaker.Logo(frame, ax=axis)
        axis.set_ylabel(name)
    axes[0, 0].set_title(title)
    axes[-1, 0].set_xlabel("position in the attributed window (bp)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", name).strip("_")[:60]


def explain(
    model: Path, out: Path, *, fasta: Path | None = None, regions: Path | None = None, genome: Path | None = None,
    profiles=None, ism_window: int | None = None, gradients: str = "ig", ig_steps: int = 16,
    logo_width: int = 100, batch_size: int = 32, device: str = "auto", precision: str = "auto", progress=None,
) -> int:
    """Write the attributions of every record to ``out`` (module docstring); returns the record count.
    ``precision``: ``auto``, ``32`` or ``bf16`` (:mod:`genolong.precision`)."""
    classifier = load_classifier(model, device=device, precision=precision)
    names = classifier.info.label_names
    if profiles is None and len(names) > 8:
        raise UserError(f"the model has {len(names)} outputs: choose some with --profiles (e.g. CTCF, DHS)")
    columns = select_labels(names, profiles)
    if (fasta is None) == (regions is None) or (regions is not None and genome is None):
        raise UserError("give a FASTA file, or --regions BED with --genome FASTA")
    if ism_window is not None and ism_window < 1:
        raise UserError(f"--ism-window must be positive, got {ism_window}")
    window = classifier.info.window_bp
    if fasta:  # by default, the central 1,000 bp, or the model window or the shortest record if shorter
        records = fasta_records(fasta, ism_window, min(1000, window))
    else:
        records = list(bed_records(regions, Genome(genome), window, ism_window or min(1000, window)))
    if not records:
        raise UserError(f"{regions or fasta}: no records to explain")
    ism = np.stack([saturation_mutagenesis(classifier, r.sequence, r.start, r.length, columns, batch_size, progress)
                    for r in records], axis=1)  # (P, N, 4, L)
    grads = None if gradients == "none" else np.stack(
        [gradient_attributions(classifier, r.sequence, r.start, r.length, columns, method=gradients, steps=ig_steps)
         for r in records], axis=1)
    ohe = np.stack([one_hot(r.sequence[r.start : r.start + r.length]) for r in records])
    with atomic_path(out, directory=True) as tmp:
        mark_directory(tmp, "explain")
        np.savez_compressed(tmp / "ohe.npz", ohe)
        (tmp / "records.tsv").write_text("name\tinput_bp\tstart\tend\tsource\n" + "".join(
            f"{r.name}\t{len(r.sequence)}\t{r.start}\t{r.start + r.length}\t{r.source}\n" for r in records))
        for row, column in enumerate(columns):
            target = tmp / f"{column}_{_safe(names[column])}"
            (target / "logos").mkdir(parents=True)
            np.savez_compressed(target / "ism.npz", ism[row])
            if grads is not None:
                np.savez_compressed(target / "gradients.npz", grads[row])
            for index, record in enumerate(records):
                panels = {"ism": ism[row, index]} | ({} if grads is None else {gradients: grads[row, index]})
                plot_logos(target / "logos" / f"{index}_{_safe(record.name)}.png", f"{record.name}: {names[column]}",
                           ohe[index], panels, logo_width)
    return len(records)
