"""A converted Nucleotide Transformer v2 checkpoint (rotary positions, SwiGLU, its 6-mer tokenizer;
the scaled-down NT v2 layout of :mod:`test_convert_ntv2`) through genolong's commands: ``task
finetune --mode lora`` -> ``task predict`` -> ``scan``, ``score-variants --score mlm-llr`` on the
masked-LM model, and ``convert --backbone lsg --max-length`` (whose short inputs give the full
model's logits). Assertions on what the commands wrote, not on what training reached."""

from __future__ import annotations

import csv
import json

import h5py
import numpy as np
import torch
import yaml
from helpers.convert import token_batch
from test_convert_ntv2 import NTV2_VOCAB, SPECIAL, ntv2_oracle, save_ntv2

import genolong.model  # noqa: F401  (registers the genolong Auto classes)
from genolong.cli.main import main
from genolong.dna.sequence import read_fasta
from genolong.model.modeling import GenolongForMaskedLM

LORA = {"task": "labelled", "max_len": 32, "mode": "lora", "patience": 10, "batch_size_eval": 64,
        "train": {"max_steps": 2, "val_every_steps": 2, "batch_size": 8, "warmup_steps": 1, "log_every_steps": 1,
                  "checkpoint_every_steps": 2, "val_windows": 16, "seed": 0}}


def read_tsv(path) -> list[dict[str, str]]:
    with open(path) as handle:
        return list(csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t"))


def test_converted_ntv2_serves_every_command(real_data, tmp_path, capsys):
    save_ntv2(ntv2_oracle(), tmp_path / "src")
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "nt")]) == 0
    chr17 = next(read_fasta(real_data / "genomes" / "chr17.hg19.part.fa")).sequence[:12_000].upper()
    genome = tmp_path / "chr17.fa"
    genome.write_text(f">chr17\n{chr17}\n")

    rows = ["id,sequence,label"] + [f"r{i},{chr17[100 * i : 100 * i + 60]},{'ab'[i % 2]}" for i in range(60)]
    (tmp_path / "rows.csv").write_text("\n".join(rows) + "\n")
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "data")]) == 0
    (tmp_path / "lora.yaml").write_text(yaml.safe_dump(LORA))
    run = tmp_path / "run"
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--model", str(tmp_path / "nt"),
                 "--config", str(tmp_path / "lora.yaml"), "--out", str(run)]) == 0
    config = json.loads((run / "model" / "config.json").read_text())
    assert (config["position_embedding_type"], config["gated_feed_forward"], config["mlp_in_bias"]) == ("rotary", True, False)

    records = tmp_path / "records.fa"
    records.write_text("".join(f">w{s}\n{chr17[s : s + 60]}\n" for s in (1000, 3000, 5000)))
    assert main(["task", "predict", str(records), "--model", str(run / "model"), "--out", str(tmp_path / "p.tsv")]) == 0
    assert [row["id"] for row in read_tsv(tmp_path / "p.tsv")] == ["w1000", "w3000", "w5000"]
    (tmp_path / "regions.bed").write_text("chr17\t1000\t1600\n")
    assert main(["scan", "--genome", str(genome), "--model", str(run / "model"), "--regions", str(tmp_path / "regions.bed"),
                 "--out", str(tmp_path / "scan.h5")]) == 0
    with h5py.File(tmp_path / "scan.h5") as h5:
        assert h5["scores"].shape[0] > 0 and np.isfinite(h5["scores"][:]).all()

    variants = tmp_path / "variants.tsv"
    variants.write_text("".join(f"chr17\t{p}\t{chr17[p - 1]}\t{'A' if chr17[p - 1] != 'A' else 'C'}\tv{p}\n"
                                for p in (1100, 1130, 1201)))
    assert main(["score-variants", "--vcf", str(variants), "--genome", str(genome), "--model", str(tmp_path / "nt"),
                 "--score", "mlm-llr", "--window", "200", "--out", str(tmp_path / "llr.tsv")]) == 0
    scored = read_tsv(tmp_path / "llr.tsv")
    assert [row["id"] for row in scored] == ["v1100", "v1130", "v1201"] and {row["profile"] for row in scored} == {"mlm_llr"}

    capsys.readouterr()
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "long"), "--backbone", "lsg",
                 "--max-length", "1024"]) == 0
    assert "converted esm (2 layers, hidden 32, 1024 positions, backbone lsg)" in capsys.readouterr().out
    full, long = (GenolongForMaskedLM.from_pretrained(str(tmp_path / name)).eval() for name in ("nt", "long"))
    ids, mask = token_batch([100, 37], len(NTV2_VOCAB), seed=5, special=SPECIAL)
    with torch.no_grad():
        difference = (full(input_ids=ids, attention_mask=mask).logits - long(input_ids=ids, attention_mask=mask).logits)
    assert difference[mask.bool()].abs().max().item() <= 1e-5
