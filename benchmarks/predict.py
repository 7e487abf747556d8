"""Prediction throughput on CPU: `genolong predict-promoter` and `chromatin predict`, end to end.

Inputs are real sequences: 300-bp mouse promoters (``mm_pos_TATA.txt``) and the 8,000-bp
DeepSEA rows (``gena_lm_deepsea_test.dataset.csv.gz``), repeated to the requested count and
written to a FASTA file. Each case runs the real command in this process (reading, windowing,
tokenizing, batching, the model, writing the TSV) on ``--threads`` torch threads:

* promoter, 300 bp: the shipped default model (251-bp window: 2 windows per record);
* promoter, 8 kb: the same model scanning each record (stride 125: 63 windows per record);
* chromatin, 8 kb: the ``chromatin_tiny`` architecture (random weights; a 1,024-token BPE
  tokenizer trained on the shipped sample genome; 510 central tokens per 8-kb input).

Usage::

    python benchmarks/predict.py --threads 2 --out scratch/bench_predict

Prints a markdown table (records/s, windows/s, peak RSS) and writes it with a JSON copy to ``--out``.
Timings depend on the machine and its load: report them with both.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import resource
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def real_sequences(shared: Path) -> dict[str, list[str]]:
    with open(shared / "promoters" / "mm_pos_TATA.txt") as handle:
        short = [line.strip() for line in handle if line.strip()]
    with gzip.open(shared / "chromatin" / "gena_lm_deepsea_test.dataset.csv.gz", "rt") as handle:
        long = [line.split(",", 1)[0] for line in handle]
    return {"300 bp": short, "8 kb": long}


def write_records(path: Path, pool: list[str], count: int) -> Path:
    from genolong.dna.sequence import write_fasta

    write_fasta(path, ((f"seq{i}", seq) for i, seq in zip(range(count), itertools.cycle(pool), strict=False)))
    return path


def chromatin_model(work: Path, overrides: dict | None = None) -> Path:
    """The chromatin_tiny architecture (with ``overrides`` of its config keys, e.g. ``model.hidden_size``) with
    random weights, saved as a classifier directory."""
    import torch

    from genolong.classifier.directory import Classifier, TaskInfo
    from genolong.dna.tokenizer import TokenizerTrainConfig, load_tokenizer, train_tokenizer
    from genolong.evaluation.profiles import chromatin_profiles
    from genolong.resources import sample_genome
    from genolong.tasks.task import load_finetune_config
    from genolong.training.model_setup import build_classifier_model

    config = load_finetune_config("chromatin", "chromatin_tiny", overrides)
    tokenizer_dir = work / "tokenizer"
    train_tokenizer(
        sample_genome(),
        tokenizer_dir,
        TokenizerTrainConfig(vocab_size=config.tokenizer.vocab_size),
        show_progress=False,
    )
    tokenizer = load_tokenizer(tokenizer_dir)
    torch.manual_seed(0)
    model = build_classifier_model(config, 919, tokenizer, None)
    info = TaskInfo("chromatin", 8000, 1000, config.max_len, [p.name for p in chromatin_profiles()])
    Classifier(model, tokenizer, info, device="cpu").save(work / "chromatin_model")
    return work / "chromatin_model"


def run_case(command: list[str], records: int, windows_per_record: int) -> dict:
    from genolong.cli.main import main

    started = time.perf_counter()
    code = main(command)
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed with status {code}")
    return {
        "records": records,
        "windows": records * windows_per_record,
        "seconds": round(seconds, 2),
        "records_per_s": round(records / seconds, 2),
        "windows_per_s": round(records * windows_per_record / seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--short", type=int, default=2000, help="300-bp records (default: 2000)")
    parser.add_argument("--long", type=int, default=40, help="8-kb records (default: 40)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared real-data directory")
    parser.add_argument("--out", type=Path, default=None, help="directory for predict.md and predict.json")
    args = parser.parse_args(argv)

    import torch

    from genolong.classifier.directory import Classifier, default_promoter_model

    torch.set_num_threads(args.threads)
    pools = real_sequences(args.shared)
    window = Classifier.load(default_promoter_model(), device="cpu").info.window_bp
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_predict.") as tmp:
        work = Path(tmp)
        short = write_records(work / "short.fa", pools["300 bp"], args.short)
        long = write_records(work / "long.fa", pools["8 kb"], args.long)
        batch = ["--batch-size", str(args.batch_size), "--device", "cpu"]
        from genolong.classifier.records import window_starts

        results["predict-promoter, 300 bp"] = run_case(
            ["predict-promoter", str(short), "--out", str(work / "p1.tsv"), *batch],
            args.short,
            len(window_starts(300, window, window // 2)),
        )
        results["predict-promoter, 8 kb (scanned)"] = run_case(
            ["predict-promoter", str(long), "--out", str(work / "p2.tsv"), *batch],
            args.long,
            len(window_starts(8000, window, window // 2)),
        )
        model = chromatin_model(work)
        results["chromatin predict, 8 kb"] = run_case(
            ["chromatin", "predict", str(long), "--model", str(model), "--out", str(work / "c.tsv"), *batch],
            args.long,
            1,
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        f"Prediction throughput, {args.threads} torch threads, batch {args.batch_size} "
        f"(peak RSS of the process {peak_mb:.0f} MB)",
        "",
        "| case | records | windows | seconds | records/s | windows/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {r['records']} | {r['windows']} | {r['seconds']} | {r['records_per_s']} | "
        f"{r['windows_per_s']} |"
        for name, r in results.items()
    ]
    table = "\n".join(lines)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "predict.md").write_text(table + "\n")
        (args.out / "predict.json").write_text(
            json.dumps({"threads": args.threads, "peak_rss_mb": round(peak_mb), "results": results}, indent=2)
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
