"""A converted modernGENA (helpers/modernbert.py: modernGENA's config scaled down, random
weights) through every command: ``task finetune --mode lora``, ``task predict``, ``scan``,
``score-variants --score mlm-llr``, and ``convert --backbone lsg --max-length``."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch
from helpers.modernbert import moderngena_source
from helpers.task_finetune import micro_preset, motif_rows
from helpers.variants import site_records, write_vcf

from genolong.cli.main import main
from genolong.model.modeling import GenolongForMaskedLM
from genolong.resources import sample_genome


@pytest.fixture(scope="module")
def moderngena(real_data, tmp_path_factory):
    """The converted masked-LM directory."""
    work = tmp_path_factory.mktemp("moderngena")
    moderngena_source(work / "src", real_data)
    assert main(["convert", str(work / "src"), "--out", str(work / "gena")]) == 0
    return work / "gena"


@pytest.fixture(scope="module")
def fine_tuned(moderngena, tmp_path_factory):
    """``task finetune --mode lora`` of the converted model on a 3-class motif table: (run, table)."""
    work = tmp_path_factory.mktemp("lora")
    rows = motif_rows(120, 300, seed=8)
    (work / "rows.csv").write_text("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(work / "rows.csv"), "--out", str(work / "data")]) == 0
    assert main(["task", "finetune", "--data", str(work / "data"), "--out", str(work / "run"), "--mode", "lora",
                 "--model", str(moderngena), "--set", "max_len=128",
                 "--config", str(micro_preset(work / "micro.yaml", max_steps=2, val_every_steps=2))]) == 0
    return work / "run", work / "rows.csv"


@pytest.mark.slow
def test_lora_fine_tuning_keeps_the_local_and_global_layers(fine_tuned):
    run, _ = fine_tuned
    report = json.loads((run / "report.json").read_text())
    assert report["mode"] == "lora" and report["backbone"] == "longformer"
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["full_attention_layers"] == [0, 3] and config["position_embedding_type"] == "rotary"
    assert config["gated_feed_forward"] and config["attention_window"] == 8


@pytest.mark.slow
def test_task_predict_and_scan_read_the_fine_tuned_model(fine_tuned, tmp_path):
    run, table = fine_tuned
    assert main(["task", "predict", str(table), "--model", str(run / "model"),
                 "--out", str(tmp_path / "predictions.tsv")]) == 0
    with (tmp_path / "predictions.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == 120 and all(np.isfinite(float(row["0"])) for row in rows)
    assert main(["scan", "--model", str(run / "model"), "--genome", str(sample_genome()), "--chromosomes", "chrM",
                 "--out", str(tmp_path / "scan.h5")]) == 0
    assert (tmp_path / "scan.h5").stat().st_size > 0


def test_score_variants_mlm_llr_with_the_converted_masked_lm(moderngena, tmp_path):
    write_vcf(tmp_path / "in.vcf", [record for record in site_records() if record[2] in ("snv1", "snv2")])
    assert main(["score-variants", "--vcf", str(tmp_path / "in.vcf"), "--genome", str(sample_genome()),
                 "--model", str(moderngena), "--out", str(tmp_path / "llr.tsv"), "--score", "mlm-llr",
                 "--window", "200", "--accelerator", "cpu"]) == 0
    rows = [line.split("\t") for line in (tmp_path / "llr.tsv").read_text().splitlines() if not line.startswith("#")]
    header = rows[0]
    assert [row[header.index("id")] for row in rows[1:]] == ["snv1", "snv2"]
    assert all(np.isfinite(float(row[header.index("llr")])) for row in rows[1:])


def test_convert_makes_it_long_with_lsg(moderngena, tmp_path):
    assert main(["convert", str(moderngena), "--out", str(tmp_path / "long"), "--backbone", "lsg",
                 "--max-length", "2048"]) == 0
    model = GenolongForMaskedLM.from_pretrained(str(tmp_path / "long")).eval()
    assert model.config.backbone == "lsg" and model.config.full_attention_layers is None
    assert model.config.max_position_embeddings == 2048 and model.config.position_embedding_type == "rotary"
    ids = torch.randint(5, 32000, (1, 1500), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.isfinite(model(input_ids=ids).logits).all()
