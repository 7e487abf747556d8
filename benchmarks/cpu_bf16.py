"""`genolong scan` and `genolong score-variants` throughput on CPU in float32 and in bf16 autocast, side by side.

Each case is the real command in this process (``--accelerator cpu``), run with ``--precision 32``
and ``--precision bf16`` alternately (``--repeats`` times each, the median kept), after one untimed
run of each that imports and warms everything:

* scan with a chromatin classifier of the issue's "small" size (random weights; ``chromatin_tiny`` of
  ``benchmarks/predict.py`` widened to hidden 256, 4 layers, 4 heads, FFN 1024: BigBird, 8-kb windows,
  512 tokens, 919 profiles to HDF5), stride 200, on the first ``--chromatin-bp`` of the real ce2 chrX;
* scan with the shipped promoter model (300-bp windows, a network of width 64 and k-mer experts),
  stride 50, on the first ``--bp`` of chrX (HDF5);
* score-variants, the same two models, on random SNVs of the shipped hg19 chr17 fragment
  (``benchmarks/variants.py``'s VCF), HDF5.

bf16 speeds up matrix products: the larger the model's matrices, the larger the gain; the shipped
promoter model is small enough for tokenizing, the k-mer experts and the writing to weigh as much.

For each scan, also its model stage alone: ``ScanModule.predict_step`` over every batch of the plan
(tokenised beforehand), float32 and under ``torch.autocast("cpu", bfloat16)`` alternately, in CPU
seconds: what the command converges to once its fixed costs (loading, Lightning, the writers) are
amortised over a large input.

Printed beside each: CPU seconds of the process (all threads), the bf16 / float32 speed-up of wall
and CPU time, the largest |bf16 - float32| of the written scores, the load average; and the probe
that ``--precision auto`` runs (:func:`genolong.runtime.cpu_bf16.matmul_rates`: 512^2 products)
with this CPU's flags. On a machine shared with other jobs, the CPU-time ratio is the steadier one.

Usage::

    python benchmarks/cpu_bf16.py --threads 2 --out scratch/bench_cpu_bf16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from predict import chromatin_model  # noqa: E402 (the benchmarks folder is not a package)
from scan import real_genome  # noqa: E402
from variants import write_snvs  # noqa: E402

from genolong.classifier.directory import Classifier, default_promoter_model  # noqa: E402
from genolong.cli.main import main as genolong_main  # noqa: E402
from genolong.dna.genome import Genome  # noqa: E402
from genolong.inference.loop import ScanModule  # noqa: E402
from genolong.inference.scan.plan import ScanPlan, whole_chromosomes  # noqa: E402
from genolong.inference.scan.windows import WindowBatches, WindowEncoder  # noqa: E402
from genolong.resources import sample_genome  # noqa: E402
from genolong.runtime.cpu_bf16 import PROBE_SIZE, matmul_rates  # noqa: E402
from genolong.runtime.precision import cpu_bf16  # noqa: E402

#: The chromatin model's size: the "small" BigBird of the measurements quoted in the issue (256 x 4).
SMALL = {"model.hidden_size": 256, "model.num_hidden_layers": 4, "model.num_attention_heads": 4,
         "model.intermediate_size": 1024}
SHARED = Path(os.environ.get("GENOLONG_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of ``genolong ARGV`` in this process."""
    started, cpu = time.perf_counter(), time.process_time()
    if genolong_main(argv) != 0:
        raise SystemExit(f"failed: genolong {' '.join(argv)}")
    return time.perf_counter() - started, time.process_time() - cpu


def scores(path: Path) -> np.ndarray:
    """The scores an HDF5 output holds (scan: every chromosome's matrix; score-variants: ``diff``)."""
    with h5py.File(path) as h5:
        if "diff" in h5:
            return h5["diff"][:]
        arrays = []
        h5.visititems(lambda name, item: arrays.append(item[:]) if isinstance(item, h5py.Dataset)
                      and item.dtype.kind == "f" and item.ndim == 2 else None)
        return np.concatenate(arrays)


def case(name: str, argv: list[str], out: Path, amount: int, unit: str, repeats: int) -> dict:
    """Time ``argv`` + ``--out OUT --precision P`` for both precisions, alternately."""
    runs: dict[str, list[tuple[float, float]]] = {"32": [], "bf16": []}
    written = {}
    load = os.getloadavg()[0]
    for attempt in range(repeats + 1):
        for precision in ("32", "bf16"):
            target = out.with_name(f"{out.stem}_{precision}{out.suffix}")
            target.unlink(missing_ok=True)
            result = timed([*argv, "--out", str(target), "--precision", precision])
            if attempt:  # the first of each is the warm-up
                runs[precision].append(result)
            written[precision] = scores(target)
    wall = {p: statistics.median(w for w, _ in r) for p, r in runs.items()}
    cpu = {p: statistics.median(c for _, c in r) for p, r in runs.items()}
    finite = np.isfinite(written["32"])
    return {
        "case": name, "amount": f"{amount:,} {unit}",
        "fp32_per_s": round(amount / wall["32"], 1), "bf16_per_s": round(amount / wall["bf16"], 1),
        "speedup_wall": round(wall["32"] / wall["bf16"], 2), "speedup_cpu": round(cpu["32"] / cpu["bf16"], 2),
        "fp32_cpu_s": round(cpu["32"], 1), "bf16_cpu_s": round(cpu["bf16"], 1),
        "max_abs_diff": float(np.abs(written["bf16"][finite] - written["32"][finite]).max()),
        "load": f"{load:.1f}-{os.getloadavg()[0]:.1f}",
    }


def model_stage(name: str, model: Path, genome: Path, stride: int, repeats: int) -> dict:
    """CPU seconds of the scan's model stage over the whole plan, float32 and bf16 autocast alternately."""
    classifier = Classifier.load(model, device="cpu")
    plan = ScanPlan(whole_chromosomes(Genome(genome).chromosomes), window=classifier.info.window_bp, stride=stride,
                    batch_bins=128)
    dataset = WindowBatches(plan, genome, WindowEncoder(classifier.tokenizer, classifier.info.max_len),
                            list(range(plan.batches)), rc=False, max_n_fraction=0.5)
    items = [dataset[i] for i in range(len(dataset))]
    module = ScanModule(classifier.model, rc=False, columns=None)
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for attempt in range(repeats + 1):
        for bf16 in (False, True):
            started = time.process_time()
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                for item in items:
                    module.predict_step(item, 0)
            if attempt:
                cpu[bf16].append(time.process_time() - started)
    fp32, bf16 = statistics.median(cpu[False]), statistics.median(cpu[True])
    windows = sum(int(item["scored"].sum()) for item in items)
    return {"case": f"{name}, model stage", "amount": f"{windows:,} windows", "fp32_per_s": "", "bf16_per_s": "",
            "speedup_wall": "", "speedup_cpu": round(fp32 / bf16, 2), "fp32_cpu_s": round(fp32, 1),
            "bf16_cpu_s": round(bf16, 1), "max_abs_diff": "", "load": f"{os.getloadavg()[0]:.1f}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--chromatin-bp", type=int, default=40_000, help="bases scanned by chromatin_tiny")
    parser.add_argument("--bp", type=int, default=200_000, help="bases scanned by the promoter model")
    parser.add_argument("--chromatin-variants", type=int, default=48)
    parser.add_argument("--promoter-variants", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per precision (default: 2)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    os.environ.pop("GENOLONG_PRECISION", None)
    args.out.mkdir(parents=True, exist_ok=True)
    check, rates = cpu_bf16(), matmul_rates()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        chromatin = chromatin_model(work, SMALL)
        for name, model, bp, stride in [("scan chromatin 256x4 8 kb", chromatin, args.chromatin_bp, 200),
                                        ("scan promoter 300 bp", default_promoter_model(), args.bp, 50)]:
            folder = work / name.replace(" ", "_")
            folder.mkdir()
            genome = real_genome(SHARED, bp, folder)
            rows.append(case(name, ["scan", "--genome", str(genome), "--model", str(model), "--stride", str(stride),
                                    "--accelerator", "cpu"], folder / "scan.h5", bp, "bp",
                             args.repeats))
            print(rows[-1], flush=True)
            rows.append(model_stage(name, model, genome, stride, args.repeats))
            print(rows[-1], flush=True)
        for name, model, count in [("score-variants chromatin 256x4 8 kb", chromatin, args.chromatin_variants),
                                   ("score-variants promoter 300 bp", default_promoter_model(), args.promoter_variants)]:
            vcf = write_snvs(work / f"{count}.vcf", count)
            rows.append(case(name, ["score-variants", "--vcf", str(vcf), "--genome", str(sample_genome()), "--model",
                                    str(model), "--accelerator", "cpu"], work / "variants.h5", count, "variants",
                             args.repeats))
            print(rows[-1], flush=True)
    header = list(rows[0])
    table = "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                      + ["| " + " | ".join(str(r[k]) for k in header) + " |" for r in rows])
    probe = (f"probe ({PROBE_SIZE}^2 products): float32 {rates.fp32:.1f} GFLOP/s, bf16 {rates.bf16:.1f} GFLOP/s "
             f"({rates.bf16 / rates.fp32:.1f}x); CPU {check.cpu}, bf16 flags: {', '.join(check.flags) or 'none'}; "
             f"--precision auto picks {'bf16' if check.fast else 'float32'} here")
    note = (f"{time.strftime('%Y-%m-%d')}, {args.threads} torch threads, torch {torch.__version__}, {os.cpu_count()} "
            f"CPUs; command: python benchmarks/cpu_bf16.py --threads {args.threads} --chromatin-bp {args.chromatin_bp} "
            f"--bp {args.bp} --chromatin-variants {args.chromatin_variants} --promoter-variants "
            f"{args.promoter_variants} --repeats {args.repeats}")
    print(f"{table}\n\n{probe}\n\n{note}")
    (args.out / "cpu_bf16.md").write_text(f"{table}\n\n{probe}\n\n{note}\n")
    (args.out / "cpu_bf16.json").write_text(json.dumps({"rows": rows, "probe": probe, "note": note}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
