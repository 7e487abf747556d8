"""``genolong extrapolate`` on a tiny random model with 64 positions and the shipped human sample.

The checks that can fail: at the trained length every conversion covers the whole input with its
pattern (two blocks, a window of 64 each side, one chunk), so every converted model must give the
source model's BPC there; the unigram baseline is the same for every model at a length; the
fine-tune changes the long model; the table and plot are written.
"""

from __future__ import annotations

import json

import pytest
from helpers.classify import tiny_tokenizer

from genolong.cli.main import main
from genolong.dna.tokenizer import load_tokenizer
from genolong.model.configuration import GenolongConfig
from genolong.model.loading import save_model
from genolong.model.modeling import GenolongForMaskedLM
from genolong.resources import sample_genome

TRAINED = 64


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    work = tmp_path_factory.mktemp("extrapolate")
    tokenizer = load_tokenizer(tiny_tokenizer(work / "tok"))
    assert main(["corpus", "build", "--genome", str(sample_genome()), "--tokenizer", str(work / "tok"), "--out",
                 str(work / "corpus"), "--passes", "1", "--valid-tail-fraction", "0.1", "--test-tail-fraction",
                 "0.2"]) == 0
    model = GenolongForMaskedLM(GenolongConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=32,
                                               max_position_embeddings=TRAINED, hidden_dropout_prob=0.0))
    (work / "model").mkdir()
    save_model(model, tokenizer, work / "model")
    assert main(["extrapolate", "--model", str(work / "model"), "--corpus", str(work / "corpus"), "--out",
                 str(work / "out"), "--multiples", "2", "--eval-tokens", "400", "--finetune-steps", "2",
                 "--batch-size", "2", "--device", "cpu"]) == 0
    return work / "out", json.loads((work / "out" / "extrapolation.json").read_text())


def test_every_conversion_gives_the_source_bpc_at_the_trained_length(experiment):
    _, report = experiment
    rows = report["rows"]
    assert report["lengths"] == [64, 128]
    source = next(r for r in rows if r["stage"] == "trained")
    converted = [r for r in rows if r["stage"] == "converted" and r["length"] == TRAINED]
    assert sorted(r["backbone"] for r in converted) == ["bigbird", "full", "longformer", "lsg", "sled"]
    for row in converted:
        assert row["bpc"] == pytest.approx(source["bpc"], abs=1e-6), row["backbone"]
        assert row["masked_tokens"] == source["masked_tokens"] > 0


def test_baseline_is_shared_and_the_fine_tune_changes_the_long_model(experiment):
    _, report = experiment
    rows = report["rows"]
    assert len(rows) == 1 + 5 * 2 * 2
    for length in report["lengths"]:
        assert len({round(r["unigram_bpc"], 9) for r in rows if r["length"] == length}) == 1
    for backbone in ("lsg", "full"):
        before, after = ([r["bpc"] for r in rows if r["backbone"] == backbone and r["stage"].startswith(stage)
                          and r["length"] == 128] for stage in ("converted", "fine-tuned 2 steps"))
        assert before != after


def test_table_and_plot_are_written(experiment):
    out, report = experiment
    table = (out / "extrapolation.md").read_text()
    assert "| token unigram |" in table and "| lsg (fine-tuned 2 steps) |" in table
    assert (out / "extrapolation.png").read_bytes()[:4] == b"\x89PNG"
    assert len((out / "extrapolation.tsv").read_text().splitlines()) == 1 + len(report["rows"])
