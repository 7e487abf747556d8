"""The inference commands on an accelerator against the same commands on the CPU.

``predict-promoter`` (64 windows of the shipped sample), ``scan`` (the whole sample) and
``score-variants`` (40 SNVs on it) run with the shipped promoter model in child processes, once
with ``--accelerator cpu --precision 32`` (the reference) and once on the device, at
:data:`DEVICE_PRECISION`: ``score-variants`` in float32, because a variant's effect is the
difference of two nearly equal scores, which bf16 cannot rank (``docs/results/gpu.md``). The
outputs are compared by :func:`compare_tables`.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from genolong.classifier.directory import default_promoter_model
from genolong.core.children import run_genolong
from genolong.dna.sequence import read_fasta
from genolong.resources import sample_genome

#: Largest absolute difference of a probability between the two devices.
TOLERANCE = 0.05
MIN_RANK_CORRELATION = 0.98
#: ``--precision`` of each tool on the device (the CPU reference always runs ``32``).
DEVICE_PRECISION = {"predict-promoter": "auto", "scan": "auto", "score-variants": "32"}
#: The main score of each output, by column name (a bedGraph has none: its last column).
SCORE_COLUMNS = ("probability", "combined")


def write_inputs(directory: Path, seed: int = 0) -> dict[str, Path]:
    """The FASTA records and the variant TSV cut from the shipped sample genome, the genome and the model."""
    directory.mkdir(parents=True, exist_ok=True)
    genome = sample_genome()
    first = next(read_fasta(genome))
    chrom, sequence = first.name, first.sequence.upper()
    rng = random.Random(seed)
    fasta = directory / "windows.fa"
    with fasta.open("w") as handle:
        for i in range(64):
            start = rng.randrange(0, len(sequence) - 251)
            handle.write(f">w{i}_{chrom}:{start}\n{sequence[start:start + 251]}\n")
    variants = directory / "variants.tsv"
    with variants.open("w") as handle:
        for i, pos in enumerate(sorted(rng.sample(range(500, len(sequence) - 500), 40))):
            ref = sequence[pos - 1]
            alt = rng.choice([base for base in "ACGT" if base != ref])
            handle.write(f"{chrom}\t{pos}\t{ref}\t{alt}\tv{i}\n")
    return {"fasta": fasta, "variants": variants, "genome": genome, "model": default_promoter_model()}


def commands(inputs: dict[str, Path], out: Path) -> dict[str, tuple[list, Path]]:
    """Per tool: the arguments (device options appended later) and the output file."""
    return {
        "predict-promoter": (["predict-promoter", inputs["fasta"], "--out", out / "predict.tsv"], out / "predict.tsv"),
        "scan": (["scan", "--genome", inputs["genome"], "--out", out / "scan.bedGraph"], out / "scan.bedGraph"),
        "score-variants": (["score-variants", "--vcf", inputs["variants"], "--genome", inputs["genome"],
                            "--model", inputs["model"], "--out", out / "variants.tsv"], out / "variants.tsv"),
    }


def numeric_columns(path: Path) -> dict[str, np.ndarray]:
    """The all-numeric columns of a tab-separated table (header line, or none for a bedGraph)."""
    with path.open() as handle:
        rows = [row for row in csv.reader(handle, delimiter="\t") if row and not row[0].startswith(("#", "track"))]
    header = rows[0] if not _is_number(rows[0][-1]) else [f"column{i}" for i in range(len(rows[0]))]
    body = rows[1:] if header is rows[0] else rows
    columns = {}
    for i, name in enumerate(header):
        values = [row[i] for row in body]
        if values and all(map(_is_number, values)):
            columns[name] = np.array(values, dtype=float)
    return columns


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def compare_tables(reference: Path, candidate: Path) -> dict:
    """Max abs difference over the shared numeric columns (at most :data:`TOLERANCE`) and the Spearman
    correlation of the main score (at least :data:`MIN_RANK_CORRELATION`; a column of
    :data:`SCORE_COLUMNS`, else the last numeric one: a track's value)."""
    from scipy.stats import spearmanr

    ref, cand = numeric_columns(reference), numeric_columns(candidate)
    shared = [name for name in ref if name in cand and len(ref[name]) == len(cand[name])]
    if not shared:
        return {"ok": False, "status": "the outputs differ in shape"}
    diffs = {name: float(np.abs(ref[name] - cand[name]).max()) for name in shared}
    named = [name for name in shared if name in SCORE_COLUMNS]
    score = named[0] if named else shared[-1]
    rho = float(spearmanr(ref[score], cand[score]).statistic) if np.ptp(ref[score]) > 0 else 1.0
    worst = max(diffs, key=diffs.get)
    ok = diffs[worst] <= TOLERANCE and rho >= MIN_RANK_CORRELATION
    return {"ok": ok, "max_abs_diff": diffs[worst], "worst_column": worst, "score_column": score,
            "spearman": rho, "rows": len(ref[score])}


def compare_inference(out: Path, device: torch.device, say: Callable[[str], None]) -> list[dict]:
    """Each tool on the CPU and on ``device`` (on a CPU-only check: the CPU twice), compared."""
    inputs = write_inputs(out / "inputs")
    accelerator = "gpu" if device.type == "cuda" else "cpu"
    rows = []
    for tool in commands(inputs, out):
        outputs = {}
        for label, chosen, precision in (("cpu", "cpu", "32"), ("device", accelerator, DEVICE_PRECISION[tool])):
            directory = out / label
            directory.mkdir(parents=True, exist_ok=True)
            arguments, output = commands(inputs, directory)[tool]
            done = run_genolong([*arguments, "--accelerator", chosen, "--precision", precision],
                                cwd=out)  # no checkout shadows the package
            (directory / f"{tool}.log").write_text(done.stdout + done.stderr)
            outputs[label] = output if done.returncode == 0 else None
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
                say(f"  {tool} on {chosen}: exit {done.returncode}: {last}")
        row = {"check": "inference", "tool": tool}
        if None in outputs.values():
            row |= {"ok": False, "status": "a run failed (see its log)"}
        else:
            row |= compare_tables(outputs["cpu"], outputs["device"])
        rows.append(row)
        if "max_abs_diff" in row:
            say(f"  {tool}: {row['rows']} rows, max |diff| {row['max_abs_diff']:.2e} ({row['worst_column']}), "
                f"spearman {row['spearman']:.4f} {'ok' if row['ok'] else 'FAIL'}")
    return rows
