"""A 512-position model fine-tuned at 4,096 tokens: convert -> chromatin prepare (8-kb windows) ->
chromatin finetune -> chromatin predict, on the real 8-kb DeepSEA rows of ../shared/data.

The source is GENA-LM's pre-LN BERT layout (scaled down, random weights, their tokenizer) with 512
positions, about 4.5 kb of DNA: the 8-kb records are longer, so at max_len 512 fine-tuning says
how much of them it leaves out, and after ``convert --backbone lsg --max-length 4096`` it reads
them whole and says nothing.
"""

from __future__ import annotations

import csv

import pytest
from helpers.classify import chromatin_prepared, real_deepsea_fastas
from test_convert_cli import gena_bert_source

from genolong.cli.main import main

MICRO_LONG = """task: chromatin
max_len: {max_len}
model: {{hidden_dropout_prob: 0.0}}
patience: 2
batch_size_eval: 4
train: {{max_steps: 2, val_every_steps: 2, batch_size: 2, warmup_steps: 1, log_every_steps: 1,
        checkpoint_every_steps: 2, val_windows: 4}}
test_rows: 4
"""


@pytest.mark.slow
def test_4096_token_fine_tune_of_a_512_position_model_end_to_end(real_data, shared_data, tmp_path, caplog):
    gena_bert_source(real_data, tmp_path / "src", max_position_embeddings=512)
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "long"), "--backbone", "lsg",
                 "--max-length", "4096"]) == 0
    prepared = chromatin_prepared(shared_data, tmp_path / "deepsea", context=8000)
    runs = {}
    for model, max_len in (("src_full", 512), ("long", 4096)):
        if model == "src_full":
            assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / model)]) == 0
        (tmp_path / f"{max_len}.yaml").write_text(MICRO_LONG.format(max_len=max_len))
        caplog.clear()
        with caplog.at_level("WARNING", logger="genolong"):
            assert main(["chromatin", "finetune", "--data", str(prepared), "--model", str(tmp_path / model),
                         "--config", str(tmp_path / f"{max_len}.yaml"), "--out", str(tmp_path / f"run{max_len}")]) == 0
        runs[max_len] = caplog.text
    assert "are longer than max_len=512 tokens: each is read as its central 510 tokens" in runs[512]
    assert "longer than max_len" not in runs[4096]
    long_fasta, _ = real_deepsea_fastas(shared_data, tmp_path)
    predictions = tmp_path / "predictions.tsv"
    assert main(["chromatin", "predict", str(long_fasta), "--model", str(tmp_path / "run4096" / "model"),
                 "--out", str(predictions)]) == 0
    with predictions.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == 100 and {row["length"] for row in rows} == {"8000"}
    assert all(row["start"] == "0" and row["end"] == "8000" and not row["error"] for row in rows)
