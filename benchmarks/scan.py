"""`genolong scan` throughput on CPU, and where the time goes (tokenise, model, write).

Input: the first ``--bp`` bases of the real C. elegans chrX (ce2, ``../shared/data/genomes``),
written as an indexed bgzip FASTA. Two models:

* the promoter model shipped with genolong (its ``window_bp``, 300 bp for the BPE model) at stride 50;
* the ``chromatin_tiny`` architecture (random weights, BigBird, 512 tokens of a 1,024-token
  BPE tokenizer, 919 outputs; the model of ``benchmarks/predict.py``) at stride 200 on 8-kb
  windows, writing an HDF5 matrix.

For each: the whole command in this process (``run_scan``: model load, Lightning, DataLoader
worker, merge, tracks), then the three stages alone, each over every batch of the plan:
*tokenise* (read the windows from the genome, skip N-rich ones, token ids), *model* (the
predict step, after one untimed call), *write* (bigWig + bedGraph, or HDF5). The GRCh37
extrapolation divides its 3,101,804,739 bp by the end-to-end rate (N runs counted as scored).
``model_kbp_per_core_s`` is the model stage on one thread divided by its CPU time instead of the
wall time: on a machine shared with other jobs it estimates what one free core delivers, and
``grch37_hours_2_free_cores`` extrapolates it to two ranks (``--accelerator cpu --devices 2``)
on two free cores, the model being >= 99% of the work.

Usage::

    python benchmarks/scan.py --threads 2 --out scratch/bench_scan

Prints a markdown table and writes it with a JSON copy to ``--out``. Timings depend on the
machine and its load (report both: ``uptime`` is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from genolong.classifier.directory import Classifier, default_promoter_model
from genolong.dna.genome import Genome
from genolong.dna.sequence import write_fasta
from genolong.inference.loop import ScanModule
from genolong.inference.scan.plan import ScanPlan, whole_chromosomes
from genolong.inference.scan.run import ScanConfig, run_scan
from genolong.inference.scan.tracks import BedGraphTrack, BigWigTrack, MatrixTrack
from genolong.inference.scan.windows import WindowBatches, WindowEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from predict import chromatin_model  # noqa: E402 (the benchmark sibling's chromatin_tiny builder)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
GRCH37_BP = 3_101_804_739


def real_genome(shared: Path, length: int, work: Path) -> Path:
    """The first ``length`` bp of ce2 chrX as bgzip + .fai/.gzi."""
    from genolong.prep.genome_prepare import prepare_genome

    sequence = next(Genome(shared / "genomes" / "ce2chrX.fa.gz").records()).sequence[:length]
    write_fasta(work / "raw.fa", [("chrX", sequence)])
    return prepare_genome(work / "raw.fa", work / "genome.fa.bgz", progress=False).path


def stages(model: Path, genome: Path, stride: int, batch_size: int, work: Path, matrix: bool) -> dict:
    """Seconds of each stage over the whole plan, run one after the other in this process."""
    classifier = Classifier.load(model, device="cpu")
    info = classifier.info
    plan = ScanPlan(whole_chromosomes(Genome(genome).chromosomes), window=info.window_bp, stride=stride,
                    batch_bins=batch_size)
    dataset = WindowBatches(plan, genome, WindowEncoder(classifier.tokenizer, info.max_len),
                            list(range(plan.batches)), rc=False, max_n_fraction=0.5)
    started = time.perf_counter()
    items = [dataset[i] for i in range(len(dataset))]
    tokenise = time.perf_counter() - started
    module = ScanModule(classifier.model, rc=False, columns=None)
    with torch.inference_mode():
        module.predict_step(items[0], 0)  # first call out of the timed path
        started = time.perf_counter()
        scores = [module.predict_step(item, i)["scores"] for i, item in enumerate(items)]
        model_s = time.perf_counter() - started
        core_rate = per_core_bp_per_s(module, items, plan)
    started = time.perf_counter()
    chromosome = plan.chromosomes[0]
    starts, ends = plan.bins(0, 0, chromosome.bins)
    values = np.concatenate(scores)
    if matrix:
        tracks = [MatrixTrack(work / "stage.h5", [(chromosome.name, chromosome.length)], info.label_names, {})]
    else:
        values = values[:, 0]
        text = open(work / "stage.bedGraph", "w")  # noqa: SIM115 (closed below, inside the timed write)
        tracks = [BigWigTrack(work / "stage.bw", [(chromosome.name, chromosome.length)]),
                  BedGraphTrack(text, "benchmark")]
    for track in tracks:
        track.add(chromosome.name, starts, ends, values)
        track.close()
    if not matrix:
        text.close()
    write = time.perf_counter() - started
    return {"windows": sum(int(item["scored"].sum()) for item in items), "tokenise_s": tokenise,
            "model_s": model_s, "write_s": write, "core_bp_per_s": core_rate}


def per_core_bp_per_s(module: ScanModule, items: list[dict], plan: ScanPlan, windows: int = 2048) -> float:
    """bp per CPU-second of the model stage on one thread (over the first ``windows`` windows): what
    one dedicated core delivers; ranks (``--devices``) scale it by the number of cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    subset = items[: max(1, windows // plan.batch_bins)]
    try:
        with torch.inference_mode():
            started = time.process_time()
            for item in subset:
                module.predict_step(item, 0)
            seconds = time.process_time() - started
    finally:
        torch.set_num_threads(threads)
    return sum(int(item["bp"]) for item in subset) / seconds


def end_to_end(model: Path, genome: Path, stride: int, batch_size: int, out: list[Path]) -> float:
    config = ScanConfig(genome=genome, out=out, model=model, stride=stride, batch_size=batch_size, workers=1,
                        accelerator="cpu", progress=False)
    started = time.perf_counter()
    run_scan(config)
    return time.perf_counter() - started


def row(name: str, bp: int, stride: int, total_s: float, parts: dict) -> dict:
    rate = bp / total_s
    busy = parts["tokenise_s"] + parts["model_s"] + parts["write_s"]
    return {
        "model": name, "bp": bp, "stride": stride, "windows": parts["windows"], "end_to_end_s": round(total_s, 1),
        "kbp_per_s": round(rate / 1000, 1), "windows_per_s": round(parts["windows"] / total_s, 1),
        "tokenise_%": round(100 * parts["tokenise_s"] / busy, 1), "model_%": round(100 * parts["model_s"] / busy, 1),
        "write_%": round(100 * parts["write_s"] / busy, 1),
        "model_only_kbp_per_s": round(bp / parts["model_s"] / 1000, 1),
        "grch37_hours": round(GRCH37_BP / rate / 3600, 1),
        "model_kbp_per_core_s": round(parts["core_bp_per_s"] / 1000, 1),
        "grch37_hours_2_free_cores": round(GRCH37_BP / (2 * parts["core_bp_per_s"]) / 3600, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--bp", type=int, default=1_000_000, help="bases scanned by the promoter model")
    parser.add_argument("--chromatin-bp", type=int, default=100_000, help="bases scanned by the chromatin model")
    parser.add_argument("--batch-size", type=int, default=128, help="bins per batch (default: 128)")
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared real-data directory")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = [("promoter (shipped)", default_promoter_model(), args.bp, 50, False),
                 ("chromatin_tiny (random)", chromatin_model(work), args.chromatin_bp, 200, True)]
        for name, model, bp, stride, matrix in cases:
            folder = work / name.split()[0]
            folder.mkdir()
            genome = real_genome(args.shared, bp, folder)
            out = [folder / ("scan.h5" if matrix else "scan.bw")] + ([] if matrix else [folder / "scan.bedGraph"])
            total = end_to_end(model, genome, stride, args.batch_size, out)
            rows.append(row(name, bp, stride, total, stages(model, genome, stride, args.batch_size, folder, matrix)))
    header = list(rows[0])
    table = "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                      + ["| " + " | ".join(str(r[k]) for k in header) + " |" for r in rows])
    load = os.getloadavg()
    note = (f"{time.strftime('%Y-%m-%d')}, {args.threads} torch threads, batch {args.batch_size}, "
            f"load average {load[0]:.1f} (1 min) on {os.cpu_count()} CPUs; command: "
            f"python benchmarks/scan.py --threads {args.threads} --bp {args.bp} --chromatin-bp {args.chromatin_bp}")
    print(table + "\n\n" + note)
    (args.out / "scan.md").write_text(table + "\n\n" + note + "\n")
    (args.out / "scan.json").write_text(json.dumps({"rows": rows, "note": note}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
