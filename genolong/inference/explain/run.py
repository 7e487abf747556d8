"""``genolong explain``: attributions for the records of a FASTA file or the regions of a BED file.

Output directory (written atomically; arrays are held in memory, so explain a few hundred records)::

    records.tsv                  name, input_bp, start, end (the attributed window in the input), source
    explain.json                 the gradient method, the parts it attributes, the window, the records clipped
    ohe.npz                      arr_0: (N, 4, L) one-hot of the attributed windows, channels A, C, G, T
    <target>/ism.npz             arr_0: (N, 4, L) in-silico mutagenesis effects on the attributed score
    <target>/gradients.npz       arr_0: (N, 4, L) gradient attributions (when not --gradients none)
    <target>/logos/<n>_<name>.png  sequence logos of the most attributed stretch of each record

``<target>`` is ``<column>_<output name>``. ``L`` is the widest record window (user guide, attributions);
narrower ones are padded with zeros.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import logomaker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from genolong.core.errors import UserError
from genolong.core.files import atomic_path, mark_directory
from genolong.dna.genome import Genome
from genolong.dna.sequence import read_fasta
from genolong.inference.bed import read_bed_regions
from genolong.inference.explain.attributions import (
    BASES,
    gradient_attributions,
    gradient_parts,
    one_hot,
    saturation_mutagenesis,
)
from genolong.inference.labels import select_labels
from genolong.inference.variants.windows import fetch_padded
from genolong.tasks.task import load_classifier


@dataclass(frozen=True)
class ExplainRecord:
    """One model input and the window of it to attribute: ``sequence[start:start + length]``."""

    name: str
    sequence: str
    start: int
    length: int
    source: str


def _centred(name: str, sequence: str, length: int, source: str) -> ExplainRecord:
    """The record with its central ``length`` bp to attribute, or all of it when it is shorter."""
    length = min(length, len(sequence))
    return ExplainRecord(name, sequence, (len(sequence) - length) // 2, length, source)


def fasta_records(path: Path, length: int) -> list[ExplainRecord]:
    """Each FASTA record is one input; its central ``length`` bp (all of it if shorter) are attributed."""
    return [_centred(record.name, record.sequence, length, ".") for record in read_fasta(path, unique_names=False)]


def bed_records(path: Path, genome: Genome, window: int, length: int) -> Iterator[ExplainRecord]:
    """Each BED region gives an input of ``window`` bp centred on it (``N`` beyond the contig)."""
    for region in read_bed_regions(path, genome):
        first = (region.start + region.end) // 2 - window // 2
        sequence, _ = fetch_padded(genome, region.chrom, first, first + window)
        name = region.name or f"{region.chrom}:{region.start}-{region.end}"
        yield _centred(name, sequence, length, f"{region.chrom}:{first}-{first + window}")


def padded(maps: list[np.ndarray]) -> np.ndarray:
    """(..., 4, L_i) arrays of each record -> one (N, ..., 4, max L_i) array, zeros past each record's end."""
    width = max(m.shape[-1] for m in maps)
    return np.stack([np.pad(m, [(0, 0)] * (m.ndim - 1) + [(0, width - m.shape[-1])]) for m in maps])


def logo_stretch(importance: np.ndarray, width: int) -> int:
    """Start of the ``width``-bp stretch with the largest total ``|importance|`` (L,)."""
    if len(importance) <= width:
        return 0
    totals = np.convolve(np.abs(importance), np.ones(width), mode="valid")
    return int(np.argmax(totals))


def plot_logos(path: Path, title: str, reference: np.ndarray, panels: dict[str, np.ndarray], width: int) -> None:
    """One logo per panel (name -> (4, L) attributions) of the ``width``-bp stretch most attributed by the
    first; ``reference``: (4, L) one-hot. ISM effects are drawn as the reference base's ``-mean`` of its three
    substitutions."""
    heights = {name: reference * (-values.sum(0) / 3 if name == "ism" else values.sum(0)) for name,
               values in panels.items()}
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


def explain(model: Path, out: Path, *, fasta: Path | None = None, regions: Path | None = None,
            genome: Path | None = None, profiles=None, ism_window: int | None = None, gradients: str = "ig",
            ig_steps: int = 16, logo_width: int = 100, batch_size: int = 32, device: str = "auto",
            precision: str = "auto", progress=None, say: Callable[[str], None] = lambda line: None) -> int:
    """Write the attributions of every record to ``out`` (module docstring); returns the record count.
    ``say`` gets what the user must know: the parts the gradients attribute, the records clipped."""
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
    length = ism_window or min(1000, window)
    records = fasta_records(fasta, length) if fasta else list(bed_records(regions, Genome(genome), window, length))
    if not records:
        raise UserError(f"{regions or fasta}: no records to explain")
    clipped = [r.name for r in records if r.length < length]
    if clipped:
        say(f"{len(clipped)} of {len(records)} records are shorter than --ism-window {length}"
            f"{'' if ism_window else ' (the default)'}: each is attributed "
            f"whole (records.tsv; arrays padded with zeros to the widest window): {', '.join(clipped[:5])}"
            + (", ..." if len(clipped) > 5 else ""))
    parts = gradient_parts(classifier) if gradients != "none" else []
    if parts:
        say(f"gradients ({gradients}) attribute the saved model's {' and '.join(parts)}"
            + (" (the network has weight 0 in it)" if parts == ["k-mer model"] else ""))
    ism = padded([saturation_mutagenesis(classifier, r.sequence, r.start, r.length, columns, batch_size, progress)
                  for r in records]).swapaxes(0, 1)  # (P, N, 4, L)
    grads = None if gradients == "none" else padded(
        [gradient_attributions(classifier, r.sequence, r.start, r.length, columns, method=gradients, steps=ig_steps)
         for r in records]).swapaxes(0, 1)
    ohe = padded([one_hot(r.sequence[r.start : r.start + r.length]) for r in records])
    summary = {"gradients": gradients, "gradient_parts": parts, "ism_window": ism_window,
               "width": int(ohe.shape[-1]), "clipped": clipped}
    with atomic_path(out, directory=True) as tmp:
        mark_directory(tmp, "explain")
        (tmp / "explain.json").write_text(json.dumps(summary, indent=1) + "\n")
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
                width = slice(0, record.length)
                panels = {"ism": ism[row, index][:, width]} | (
                    {} if grads is None else {gradients: grads[row, index][:, width]})
                plot_logos(target / "logos" / f"{index}_{_safe(record.name)}.png", f"{record.name}: {names[column]}",
                           ohe[index][:, width], panels, logo_width)
    return len(records)
