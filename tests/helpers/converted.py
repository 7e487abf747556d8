"""A converted published model through every command that serves it, at toy scale: ``task
finetune --mode lora`` on a 3-class task, ``task predict``, ``scan``, ``score-variants --score
mlm-llr`` and ``convert --backbone ... --max-length`` (the tests of each source format call
:func:`every_command`). The assertions are on exit codes, shapes and finite values, never on
what a few training steps reach."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import yaml

from genolong.cli.main import main
from genolong.dna.sequence import read_fasta

MOTIFS = ("GGGCGGGG", "TATAAAAG", "CACGTGAC")


def task_rows(root: Path, rows: int = 60, window: int = 60) -> Path:
    """A prepared 3-class task: random sequences, each holding its class's motif."""
    rng = np.random.default_rng(0)
    lines = ["id,sequence,label"]
    for i in range(rows):
        sequence = "".join(np.array(list("ACGT"))[rng.integers(0, 4, window)])
        at = int(rng.integers(0, window - 8))
        lines.append(f"r{i},{sequence[:at]}{MOTIFS[i % 3]}{sequence[at + 8:]},{'abc'[i % 3]}")
    (root / "rows.csv").write_text("\n".join(lines) + "\n")
    assert main(["task", "prepare", "--table", str(root / "rows.csv"), "--out", str(root / "data")]) == 0
    return root / "data"


def lora_preset(path: Path) -> Path:
    """LoRA on the given model, a few steps."""
    path.write_text(yaml.safe_dump({
        "task": "labelled", "max_len": 64, "mode": "lora", "patience": 10, "batch_size_eval": 32,
        "train": {"max_steps": 2, "val_every_steps": 2, "batch_size": 8, "learning_rate": 0.003, "warmup_steps": 1,
                  "log_every_steps": 1, "checkpoint_every_steps": 2, "val_windows": 100, "seed": 0},
    }))
    return path


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path) as handle:
        return list(csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t"))


def every_command(model: Path, root: Path, real_data: Path, long: tuple[str, int]) -> None:
    """``model`` (a converted masked-LM directory) through every command; ``long`` = the backbone and
    --max-length of the long conversion."""
    chr17 = next(iter(read_fasta(real_data / "genomes" / "chr17.hg19.part.fa"))).sequence[:6_000].upper()
    genome = root / "chr17.fa"
    genome.write_text(f">chr17\n{chr17}\n")

    run = root / "run"
    assert main(["task", "finetune", "--data", str(task_rows(root)), "--model", str(model), "--out", str(run),
                 "--config", str(lora_preset(root / "lora.yaml"))]) == 0
    classifier = run / "model"
    records = root / "records.fa"
    records.write_text("".join(f">w{s}\n{chr17[s:s + 60]}\n" for s in (1000, 2000)))
    assert main(["task", "predict", str(records), "--model", str(classifier), "--out", str(root / "predict.tsv")]) == 0
    predicted = read_tsv(root / "predict.tsv")
    assert len(predicted) == 2 and all(np.isfinite(float(row["c"])) for row in predicted)

    (root / "regions.bed").write_text("chr17\t1000\t1300\n")
    assert main(["scan", "--genome", str(genome), "--model", str(classifier), "--regions", str(root / "regions.bed"),
                 "--out", str(root / "scan.bw"), str(root / "scan.h5")]) == 0

    variants = root / "variants.tsv"
    positions = (1100, 1201)
    variants.write_text("".join(f"chr17\t{p}\t{chr17[p - 1]}\t{'A' if chr17[p - 1] != 'A' else 'C'}\tv{p}\n"
                                for p in positions))
    assert main(["score-variants", "--vcf", str(variants), "--genome", str(genome), "--model", str(model),
                 "--score", "mlm-llr", "--window", "200", "--out", str(root / "llr.tsv")]) == 0
    llr = read_tsv(root / "llr.tsv")
    assert [row["id"] for row in llr] == ["v1100", "v1201"] and all(np.isfinite(float(row["llr"])) for row in llr)

    backbone, length = long
    assert main(["convert", str(model), "--out", str(root / "long"), "--backbone", backbone,
                 "--max-length", str(length)]) == 0
    assert main(["score-variants", "--vcf", str(variants), "--genome", str(genome), "--model", str(root / "long"),
                 "--score", "mlm-llr", "--window", "200", "--out", str(root / "long_llr.tsv")]) == 0
