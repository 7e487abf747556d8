"""``genolong scan``: a classifier slid over a genome (or BED regions) into tracks.

Each rank appends its batches' scores (:mod:`~genolong.inference.scan.plan`) to per-chromosome parts in a
work directory beside the first output (:mod:`~genolong.inference.scan.parts`), keeping what an interrupted
run of the same settings finished; rank 0 merges them and streams the tracks, each written atomically.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from genolong.classifier.directory import default_promoter_model
from genolong.classifier.task_info import reads_both_strands
from genolong.core import interrupts
from genolong.core.errors import UserError
from genolong.core.files import atomic_path, work_path
from genolong.dna.genome import Genome
from genolong.inference.loop import ScanModule, ScanPartWriter, build_trainer, predict
from genolong.inference.scan.parts import WorkDirectory
from genolong.inference.scan.plan import ScanPlan, read_regions, whole_chromosomes
from genolong.inference.scan.tracks import (
    FORMATS,
    BedGraphTrack,
    BigWigTrack,
    CalledBases,
    MatrixTrack,
    RegionTrack,
    SkippedTrack,
)
from genolong.inference.scan.windows import WindowBatches, WindowEncoder
from genolong.runtime.devices import check_device_hardware, check_device_settings, cuda_available
from genolong.tasks.task import load_classifier

log = logging.getLogger(__name__)

#: Bins written per chunk (bounds the writer's memory).
WRITE_CHUNK = 1 << 18
#: bigWig/bedGraph outputs write a file per model output up to this many outputs; beyond, --profiles chooses.
MAX_TRACKS = 8


@dataclass
class ScanConfig:
    """What to scan and where to write it (``genolong scan --help`` describes each option)."""

    genome: Path
    out: list[Path]
    model: Path | None = None
    regions: Path | None = None
    chromosomes: list[str] | None = None
    stride: int | None = None
    rc: bool | None = None
    profiles: list[str] | None = None
    bed: Path | None = None
    threshold: float | None = None
    skipped: Path | None = None
    batch_size: int = 128
    workers: int = 1
    max_n_fraction: float = 0.5
    accelerator: str = "auto"
    devices: int | str = 1
    num_nodes: int = 1
    precision: str = "auto"
    progress: bool = True


def run_scan(config: ScanConfig) -> dict | None:
    """Scan, merge, write; the summary on rank 0 (None on the others), with, for a model with a threshold,
    ``called_bp`` (the bp of the ``--bed`` regions) and that ``threshold``."""
    started = time.perf_counter()
    check_device_settings(config.accelerator, config.devices)
    check_device_hardware(config.accelerator, config.devices)
    classifier = load_classifier(config.model or default_promoter_model(), device="cpu")
    info = classifier.info
    config = replace(config, rc=reads_both_strands(config.rc, info))
    formats = _check_outputs(config, info)
    columns, profiles = _select_profiles(config.profiles, info)
    genome = Genome(config.genome)
    plan = ScanPlan(_targets(config, genome), window=info.window_bp,
                    stride=config.stride or info.inference.scan_stride, batch_bins=config.batch_size)
    _check_windows(plan)
    trainer = build_trainer(accelerator=config.accelerator, devices=config.devices, num_nodes=config.num_nodes,
                            callbacks=[], precision=config.precision)
    rank, world = trainer.global_rank, trainer.world_size
    work_path = _work_path(config, plan, columns)
    if rank == 0:
        _remove_other_work(work_path)
    work = WorkDirectory(work_path, plan, len(profiles), world)
    pending = work.pending()
    resumed = sum(1 for i, chromosome in enumerate(plan.chromosomes) if chromosome.bins and i not in pending)
    if resumed:
        log.info("resuming: %d of %d chromosomes already scored in %s", resumed, len(plan.chromosomes), work.path)
    if pending:
        _predict(config, classifier, work, pending, columns, trainer)
    if world > 1:
        trainer.strategy.barrier()
    if rank != 0:
        return None
    for chromosome in range(len(plan.chromosomes)):
        work.merge(chromosome)
    counts = _write_tracks(config, formats, plan, work, info, profiles)
    shutil.rmtree(work.path, ignore_errors=True)
    return {**counts, "info": info, "chromosomes": len(plan.chromosomes), "resumed": resumed, "target_bp": plan.target_bp,
            "stride": plan.stride, "window": plan.window, "ranks": world, "seconds": time.perf_counter() - started}


def _predict(config, classifier, work: WorkDirectory, pending: list[int], columns, trainer) -> None:
    plan, rank, world = work.plan, trainer.global_rank, trainer.world_size
    batches = [b for c in pending for b in plan.batch_range(c) if b % world == rank]
    encoder = WindowEncoder(classifier.tokenizer, classifier.info.max_len)
    dataset = WindowBatches(plan, config.genome, encoder, batches, rc=config.rc,
                            max_n_fraction=config.max_n_fraction)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=config.workers,
                                         pin_memory=cuda_available(),
                                         worker_init_fn=interrupts.ignore_in_worker)
    pending_bp = sum(plan.chromosomes[c].target_bp for c in pending)
    writer = ScanPartWriter(work, pending_bp // world, progress=config.progress, description=config.genome.name)
    module = ScanModule(classifier.model, rc=config.rc, columns=columns, kmer=classifier.kmer)
    predict(trainer, module, loader, writer,
            resume=f"the same command resumes (finished chromosomes are kept in {work.path})")


def _check_outputs(config: ScanConfig, info) -> list[str]:
    """The format of each output; bad combinations raise before any work."""
    formats = []
    for path in config.out:
        kind = FORMATS.get(path.suffix.lower())
        if kind is None:
            raise UserError(f"{path}: unknown track format; use one of: {', '.join(FORMATS)}")
        formats.append(kind)
    outputs = len(info.label_names)
    if outputs > MAX_TRACKS and not config.profiles and set(formats) - {"hdf5"}:
        raise UserError(f"the model has {outputs} outputs: choose some with --profiles for bigWig/bedGraph "
                        "tracks, or write them all as an HDF5 matrix (--out FILE.h5)")
    if outputs == 1 and config.profiles:
        raise UserError("--profiles chooses among a model's outputs; this model has one output")
    if info.inference.threshold == "none" and (config.bed is not None or config.threshold is not None):
        raise UserError(f"--bed and --threshold cut probabilities; this model's outputs ({info.inference.activation}) "
                        "have no threshold", hint="write the scores as tracks (bigWig, bedGraph or HDF5)")
    if config.bed is not None and _threshold(config, info) is None:
        raise UserError("--bed needs a model with a decision threshold (a promoter model) or --threshold")
    if config.stride is not None and config.stride < 1:
        raise UserError(f"--stride must be positive, got {config.stride}")
    if not 0.0 <= config.max_n_fraction <= 1.0:
        raise UserError(f"--max-n-fraction must be within [0, 1], got {config.max_n_fraction}")
    return formats


def _select_profiles(profiles: list[str] | None, info) -> tuple[list[int] | None, list[str]]:
    """Column indices and names of the selected outputs (None: all of them)."""
    if not profiles:
        return None, list(info.label_names)
    index = {name: i for i, name in enumerate(info.label_names)}
    columns = []
    for profile in profiles:
        if profile in index:
            columns.append(index[profile])
        elif profile.isdigit() and int(profile) < len(info.label_names):
            columns.append(int(profile))
        else:
            raise UserError(f"unknown profile {profile!r}: give a name of the model's label_names (e.g. "
                            f"{info.label_names[0]!r}) or a column number < {len(info.label_names)}")
    return columns, [info.label_names[c] for c in columns]


def _targets(config: ScanConfig, genome: Genome) -> list[tuple[str, int, np.ndarray]]:
    targets = read_regions(config.regions, genome) if config.regions else whole_chromosomes(genome.chromosomes)
    if config.chromosomes:
        wanted = {genome.resolve(name) for name in config.chromosomes}
        targets = [target for target in targets if target[0] in wanted]
        if not targets:
            raise UserError(f"no regions on the chromosomes {', '.join(config.chromosomes)}")
    return targets


def _check_windows(plan: ScanPlan) -> None:
    """Refuse a scan without a window: every chromosome scanned is shorter than the model's window."""
    if all(chromosome.length < plan.window for chromosome in plan.chromosomes):
        longest = max(plan.chromosomes, key=lambda chromosome: chromosome.length)
        raise UserError(f"no window to score: every chromosome scanned is shorter than the model's window of "
                        f"{plan.window} bp (the longest, {longest.name}, has {longest.length:,} bp); nothing written")


def _work_path(config: ScanConfig, plan: ScanPlan, columns) -> Path:
    """The work directory: next to the first output, named after the run's settings."""
    digest = hashlib.sha256(plan.fingerprint().encode())
    stat = config.genome.stat()
    digest.update(f"{config.genome.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    model = Path(config.model or default_promoter_model())
    for path in sorted(model.iterdir()):
        digest.update(f"{path.name}:{path.stat().st_size}:{path.stat().st_mtime_ns}".encode())
    digest.update(f"{config.rc}:{columns}:{config.max_n_fraction}".encode())
    return work_path(config.out[0], f"scan-{digest.hexdigest()[:12]}")


def _remove_other_work(path: Path) -> None:
    """Remove the work directories of earlier scans into the same output with other settings
    (the output is locked: no other run is using them); one with the same settings is resumed."""
    for other in path.parent.glob(f"{glob.escape(path.name.rsplit('-', 1)[0])}-*"):
        if other != path and other.is_dir():
            log.info("removing %s, the work of an earlier scan with other settings", other)
            shutil.rmtree(other, ignore_errors=True)


def _open_tracks(stack: contextlib.ExitStack, config, formats, plan: ScanPlan, info, profiles: list[str]):
    """``(writer, column, by_window)`` for every output, each on a temporary file renamed when ``stack``
    closes without error: ``column`` the profile it takes (None: all), ``by_window`` whether it takes
    window coordinates (called regions) instead of bins."""
    chromosomes = [(c.name, c.length) for c in plan.chromosomes]
    model = Path(config.model or default_promoter_model()).name

    def temporary(path: Path) -> Path:
        return stack.enter_context(atomic_path(path))

    def text(path: Path):
        return stack.enter_context(open(temporary(path), "w"))

    tracks = []
    for path, kind in zip(config.out, formats, strict=True):
        if kind == "hdf5":
            attributes = {"window": plan.window, "stride": plan.stride, "task": info.task, "rc": config.rc}
            tracks.append((MatrixTrack(temporary(path), chromosomes, profiles, attributes), None, False))
            continue
        for column, profile in enumerate(profiles):
            slug = re.sub(r"[^A-Za-z0-9_.+-]+", "_", profile).strip("_")
            target = path.with_name(f"{path.stem}.{slug}{path.suffix}") if len(profiles) > 1 else path
            track = (BigWigTrack(temporary(target), chromosomes) if kind == "bigwig"
                     else BedGraphTrack(text(target), f"{model} {profile}" if len(info.label_names) > 1 else model))
            tracks.append((track, column, False))
    if config.bed is not None:
        strand = "." if config.rc else "+"
        tracks.append((RegionTrack(text(config.bed), _threshold(config, info), strand, info.task), 0, True))
    if config.skipped is not None:
        tracks.append((SkippedTrack(text(config.skipped), plan.window, dict(chromosomes)), 0, False))
    return tracks


def _write_tracks(config, formats, plan: ScanPlan, work: WorkDirectory, info, profiles: list[str]) -> dict:
    """Stream every output from the merged parts, chunk by chunk; files appear when all are complete."""
    counts = {"bins": 0, "scored_bins": 0}
    threshold = None if info.inference.threshold == "none" else _threshold(config, info)
    called = None if threshold is None else CalledBases(threshold)
    with contextlib.ExitStack() as stack:
        tracks = _open_tracks(stack, config, formats, plan, info, profiles)
        for index, chromosome in enumerate(plan.chromosomes):
            scores = work.scores(index)
            for lo in range(0, chromosome.bins, WRITE_CHUNK):
                hi = min(lo + WRITE_CHUNK, chromosome.bins)
                starts, ends = plan.bins(index, lo, hi)
                windows = plan.window_starts(index, starts)
                chunk = np.asarray(scores[lo:hi])  # (bins, C')
                counts["bins"] += hi - lo
                counts["scored_bins"] += int((~np.isnan(chunk[:, 0])).sum())
                if called is not None:
                    called.add(chromosome.name, windows, windows + plan.window, chunk[:, 0], chromosome.segments)
                for track, column, by_window in tracks:
                    values = chunk if column is None else chunk[:, column]
                    first, last = (windows, windows + plan.window) if by_window else (starts, ends)
                    track.add(chromosome.name, first, last, values)
        if not counts["scored_bins"]:
            raise UserError(f"no window scored: each of the {counts['bins']:,} windows has more than "
                            f"{config.max_n_fraction:g} N (--max-n-fraction); nothing written")
        for track, _, _ in tracks:
            track.close()
    if called is not None:
        counts.update(called_bp=called.bp, threshold=threshold)
    return counts


def _threshold(config: ScanConfig, info) -> float | None:
    """The threshold of called regions: ``--threshold``, else the model's scan threshold."""
    return info.threshold_for_scans() if config.threshold is None else config.threshold
