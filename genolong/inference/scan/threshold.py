"""The scan threshold of a promoter model: set on background genomes, checked on held-out ones.

It is the lowest probability at which the model calls at most ``target`` of each *calibration* genome (bp
of the ``scan --bed`` regions over the bp scanned, at stride 50 bp, on the strands the model reads), since nearly every window
of a genome is background; *held-out* genomes and promoter files only report the called fraction and the
recall it gives. Scans are kept in ``WORK/scans/NAME.h5``.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import h5py
import numpy as np

from genolong.classifier.directory import TASK_FILE, Classifier, reads_both_strands, strand_reader
from genolong.classifier.records import predict_all
from genolong.core.files import atomic_write_text
from genolong.dna.sequence import read_fasta
from genolong.inference.called import CAUTION_FRACTION
from genolong.inference.scan.plan import centred_window_starts
from genolong.inference.scan.tracks import CalledBases

#: Called fraction the scan threshold allows on each calibration genome: half of the 5% a promoter
#: model may call of any genome (:data:`~genolong.inference.called.CAUTION_FRACTION`), the other half
#: a margin for genomes it never saw.
TARGET = 0.025
#: The card's section, between these lines, is rewritten by :func:`install_scan_calibration`.
SECTION_START, SECTION_END = "<!-- scan-threshold -->", "<!-- /scan-threshold -->"


@dataclass(frozen=True)
class Background:
    """A background genome: ``file`` under ``genomes/``; ``regions`` evenly spaced regions of
    ``region_bp`` (0: the whole genome); ``role``: ``calibration`` or ``held out``."""

    file: str
    species: str
    what: str
    role: str
    regions: int = 0
    region_bp: int = 0


@dataclass(frozen=True)
class PromoterSource:
    """A promoter FASTA under ``promoters/`` and its role in training the model."""

    file: str
    source: str
    role: str


def read_scan(path: Path) -> tuple[list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]], int]:
    """The windows of a promoter scan's HDF5 output (``scan --out X.h5``): ``(chromosomes, scanned_bp)``,
    per chromosome ``(name, window_starts (B,), window_ends (B,), scores (B,), segments (S, 2))`` in bin
    order (NaN: a skipped bin; segments: the scanned regions), and the bp of all bins."""
    with h5py.File(path, "r") as h5:
        window, stride = int(h5.attrs["window"]), int(h5.attrs["stride"])
        names = [name.decode() if isinstance(name, bytes) else name for name in h5["chromosomes"][:]]
        lengths, chrom = h5["chromosome_lengths"][:], h5["chrom"][:]
        starts, ends, scores = h5["start"][:], h5["end"][:], h5["scores"][:, 0]
    chromosomes = []
    for index, name in enumerate(names):
        keep = chrom == index
        first = centred_window_starts(int(lengths[index]), window, stride, starts[keep])
        bins = np.stack([starts[keep], ends[keep]], axis=1)
        breaks = np.flatnonzero(bins[1:, 0] != bins[:-1, 1]) + 1
        segments = np.array([[run[0, 0], run[-1, 1]] for run in np.split(bins, breaks) if len(run)], dtype=np.int64)
        chromosomes.append((name, first, first + window, scores[keep], segments.reshape(-1, 2)))
    return chromosomes, int((ends - starts).sum())


def called_bp(chromosomes, threshold: float) -> int:
    """bp of the called regions of a scan (:func:`read_scan`) at ``threshold``."""
    called = CalledBases(threshold)
    for name, starts, ends, scores, segments in chromosomes:
        called.add(name, starts, ends, scores, segments)
    return called.bp


def lowest_threshold(scans: list[tuple[list, int]], target: float) -> float:
    """The lowest threshold (rounded up to 4 decimals) at which every scan (:func:`read_scan`) calls at most
    ``target`` of its bp."""
    def fits(threshold: float) -> bool:
        return all(called_bp(chromosomes, threshold) <= target * bp for chromosomes, bp in scans)

    candidates = np.unique(np.concatenate([scores[~np.isnan(scores)] for chromosomes, _ in scans
                                           for _, _, _, scores, _ in chromosomes]))
    # fits(candidates[i]) is monotone in i: find the first that fits
    first = bisect.bisect_left(range(len(candidates)), True, key=lambda i: fits(float(candidates[i])))
    threshold = float(np.ceil(float(candidates[min(first, len(candidates) - 1)]) * 1e4) / 1e4)
    if not fits(threshold):  # only when the best score itself calls too much: nothing is called above it
        threshold = float(np.nextafter(candidates[-1], 1.0))
    return threshold


def _regions(genome: Path, background: Background, work: Path) -> Path | None:
    """A BED of ``background.regions`` evenly spaced regions of each chromosome (None: the whole genome)."""
    if not background.regions:
        return None
    lengths = [line.split("\t")[:2] for line in Path(f"{genome}.fai").read_text().splitlines()]
    path = work / "scans" / f"{Path(background.file).name}.regions.bed"
    with open(path, "w") as bed:
        for name, length in lengths:
            for i in range(background.regions):
                start = int((i + 0.5) * int(length) / background.regions) - background.region_bp // 2
                bed.write(f"{name}\t{start}\t{start + background.region_bp}\n")
    return path


def scan_background(model: Path, genome: Path, background: Background, work: Path, rc: bool = False) -> Path:
    """Scan a background genome (indexed FASTA) at the scan defaults (``rc``: both strands) into
    ``WORK/scans/FILE.h5`` (reused)."""
    from genolong.inference.scan.run import ScanConfig, run_scan  # the scan stack, only when a scan runs

    out = work / "scans" / f"{Path(background.file).name}.h5"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        run_scan(ScanConfig(genome=genome, out=[out], model=model, regions=_regions(genome, background, work),
                            rc=rc, accelerator="cpu", progress=False))
    return out


def _promoter_probabilities(classifier, data_root: Path, source: PromoterSource, work: Path) -> np.ndarray:
    """The model's probability of every record of a promoter file, (N,), kept in ``WORK/promoters``."""
    cached = work / "promoters" / f"{source.file}.npy"
    if not cached.exists():
        sequences = [record.sequence for record in read_fasta(data_root / "promoters" / source.file)]
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.save(cached, predict_all(classifier, sequences, 64)[:, 0])
    return np.load(cached)


def calibrate(model: Path, data_root: Path, work: Path, backgrounds: dict[Background, Path],
              promoters: list[PromoterSource], target: float = TARGET,
              alternatives: dict[str, list[str]] | None = None) -> dict:
    """Set the scan threshold on the calibration genomes (``backgrounds``: each and its indexed copy) and
    report every genome's called fraction and promoter file's recall at both thresholds, and for each set of
    genome files of ``alternatives`` (by name) its threshold and called fractions, for the record only."""
    classifier = Classifier.load(model, task="promoter", device="cpu")
    rc = reads_both_strands(None, classifier.info)  # calibrated as scan and predict-promoter read the model
    scans = {b.file: read_scan(scan_background(model, genome, b, work, rc)) for b, genome in backgrounds.items()}
    threshold = lowest_threshold([scans[b.file] for b in backgrounds if b.role == "calibration"], target)
    others = []
    for name, files in (alternatives or {}).items():
        other = lowest_threshold([scans[file] for file in files], target)
        others.append({"name": name, "files": files, "threshold": other,
                       "called": {file: called_bp(scan[0], other) / scan[1] for file, scan in scans.items()}})
    record_threshold = classifier.info.threshold
    genomes = []
    for background in backgrounds:
        chromosomes, bp = scans[background.file]
        genomes.append({**asdict(background), "scanned_bp": bp,
                        "called": called_bp(chromosomes, threshold) / bp,
                        "called_at_record_threshold": called_bp(chromosomes, record_threshold) / bp})
    sources = []
    for source in promoters:
        probabilities = _promoter_probabilities(strand_reader(classifier), data_root, source, work)
        sources.append({**asdict(source), "records": len(probabilities),
                        "recall": float((probabilities >= threshold).mean()),
                        "recall_at_record_threshold": float((probabilities >= record_threshold).mean())})
    return {"threshold": threshold, "target": target, "record_threshold": record_threshold, "stride": 50,
            "rc": rc, "genomes": genomes, "promoters": sources, "alternatives": others}


def card_section(calibration: dict, species: dict[str, str]) -> str:
    """The model card's section on genome scans: the species, the threshold, how it was set, both tables."""
    genomes = "\n".join(
        f"| {g['species']} | `{g['file']}` | {g['what']} | {g['role']} | {g['scanned_bp']:,} | "
        f"{g['called']:.2%} | {g['called_at_record_threshold']:.1%} |" for g in calibration["genomes"])
    promoters = "\n".join(
        f"| `{p['file']}` | {p['source']} | {p['role']} | {p['records']:,} | {p['recall']:.3f} | "
        f"{p['recall_at_record_threshold']:.3f} |" for p in calibration["promoters"])

    def names(role: str) -> str:
        return "; ".join(f"{g['species']} {g['what']}" for g in calibration["genomes"] if g["role"] == role)

    by_file = {g["file"]: g for g in calibration["genomes"]}
    alternatives = ""
    for other in calibration.get("alternatives", []):
        rest = [(by_file[file], fraction) for file, fraction in other["called"].items() if file not in other["files"]]
        called = ", ".join(f"{fraction:.2%} of {g['species']} {g['what']}" for g, fraction in rest)
        alternatives += (f" Set on {other['name']} alone, the threshold would be {other['threshold']:.4f}, "
                         f"calling {called}")
        alternatives += (": a background level learnt on some species does not carry over to another, hence "
                         "the caution of `scan` and `predict-promoter` on species the model never saw."
                         if any(fraction > CAUTION_FRACTION for _, fraction in rest) else ".")
    seen = ", ".join(f"{common} (*{scientific}*)" for scientific, common in species.items())
    return f"""{SECTION_START}
**Species**: trained and validated on DNA of {seen} (`species` in `genolong_task.json`); tested on
*A. thaliana*. `scan` and `predict-promoter` add a line of caution when the model calls more than
{CAUTION_FRACTION:.0%} of a species not listed here (`--species` names yours).

**Scan threshold**: {calibration["threshold"]:.4f}, used by `genolong scan` (`--bed` and the called
fraction it prints); `predict-promoter` keeps the record threshold {calibration["record_threshold"]:.4f}
above. Records given to `predict-promoter` are candidates, promoters and non-promoters alike; in a
genome nearly every window is background and promoters cover a few percent of it, so a threshold
chosen with equal classes calls far too much there. The scan threshold is the lowest at which the
model calls at most {calibration["target"]:.1%} of each calibration genome (the bp of the called
regions over the bp scanned, stride {calibration["stride"]} bp, {"both strands" if calibration["rc"] else "one strand"}), half of the
{CAUTION_FRACTION:.0%} allowed on any genome, the rest a margin for genomes it never saw. Calibration
genomes: {names("calibration")}. Held out: {names("held out")}. No promoter set took part in
choosing it.{alternatives}

| species | genome | scanned | role | bp | called (scan threshold) | called (record threshold) |
|---|---|---|---|---|---|---|
{genomes}

Recall of promoter records (each scored whole) at both thresholds; the scan threshold keeps the
promoters the model is most sure of:

| file | source | role in training | records | recall (scan threshold) | recall (record threshold) |
|---|---|---|---|---|---|
{promoters}

Reproduce: `python scripts/train_default_promoter_model.py --work WORK --scan-threshold-only`
(scans and promoter scores kept under `WORK/scan_threshold`; `--install` writes the threshold and this
section into the model).
{SECTION_END}
"""


def install_scan_calibration(model: Path, calibration: dict, species: dict[str, str]) -> None:
    """Write the scan threshold, the species and the calibration into ``model``'s ``genolong_task.json``, and
    the card section into its README (replacing one, else after the record threshold), atomically."""
    task = json.loads((model / TASK_FILE).read_text())
    task["scan_threshold"] = calibration["threshold"]
    task["species"] = species
    task["provenance"]["scan_calibration"] = calibration
    atomic_write_text(model / TASK_FILE, json.dumps(task, indent=2) + "\n")
    readme = (model / "README.md").read_text()
    section = card_section(calibration, species)
    if SECTION_START in readme:
        before, rest = readme.split(SECTION_START, 1)
        readme = before + section + rest.split(SECTION_END + "\n", 1)[1]
    else:
        anchor = "\n**Records**:"
        before, after = readme.split(anchor, 1)
        readme = before + "\n" + section + anchor + after
    atomic_write_text(model / "README.md", readme)
    for path in (model / TASK_FILE, model / "README.md"):  # package data: readable by all
        path.chmod(0o644)
