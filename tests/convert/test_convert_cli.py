"""``genolong convert`` on the command line: bad inputs (exit 2, one line, nothing written) and a
GENA-LM-style checkpoint through convert -> finetune -> predict-promoter."""

from __future__ import annotations

import csv
import itertools
import json

import pytest
import torch
from helpers.classify import promoter_dataset
from helpers.convert import copy_gena_tokenizer, gena_config, randomize, save_source
from helpers.tables import read_tsv
from test_convert import gena_pre_ln_state
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast, BigBirdConfig, BigBirdForPreTraining

from genolong.cli.main import main
from genolong.dna.sequence import write_fasta

PRE_LN = "L12-H768-A12-V32k-preln-lastln.json"


def gena_bert_source(real_data, out, **overrides):
    """A GENA-LM pre-LN BERT checkpoint (pytorch_model.bin, config.json, their tokenizer)."""
    config = gena_config(real_data, PRE_LN, **overrides)
    save_source(out, config, gena_pre_ln_state(config, last_layer_norm=True), safetensors=False)
    copy_gena_tokenizer(real_data, out)
    return out


def run_convert(src, out, capsys):
    code = main(["convert", str(src), "--out", str(out)])
    return code, capsys.readouterr()


def edit_config(directory, **changes):
    path = directory / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in (config | changes).items() if v is not None}))


def broken_source(kind, real_data, src):
    """A source directory with one defect."""
    if kind == "empty":
        src.mkdir()
        return
    if kind == "wordpiece":  # a k-mer vocabulary under BERT's WordPiece tokenizer (DNABERT's layout)
        src.mkdir()
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *map("".join, itertools.product("ACGT", repeat=3))]
        (src / "vocab.txt").write_text("\n".join(vocab) + "\n")
        BertTokenizerFast(vocab_file=str(src / "vocab.txt")).save_pretrained(str(src))
        config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32)
        save_source(src, config.to_dict(), randomize(BertForMaskedLM(config)).state_dict(), safetensors=True)
        return
    gena_bert_source(real_data, src)
    if kind == "no weights":
        (src / "pytorch_model.bin").unlink()
    elif kind == "model_type":
        edit_config(src, model_type="hyenadna")
    elif kind == "unknown model_type":
        edit_config(src, model_type="gpt2")
    elif kind == "config says post-LN":
        edit_config(src, pre_layer_norm=None)
    elif kind == "rotary":
        edit_config(src, position_embedding_type="rotary")
    elif kind == "deepspeed sparse":
        sparse = json.loads((real_data / "checkpoints/gena_lm/configs/L12-H768-A12-V32k-L4096-preln-sparse-rope.json").read_text())
        edit_config(src, sparse_config_cls=sparse["sparse_config_cls"], sparse_attention=sparse["sparse_attention"])
    elif kind == "dnabert2":
        edit_config(src, alibi_starting_size=512)
    elif kind == "vocabulary":
        config = gena_config(real_data, PRE_LN, vocab_size=4000)
        save_source(src, config, gena_pre_ln_state(config, last_layer_norm=True), safetensors=False)
    elif kind == "classifier weights":
        state = torch.load(src / "pytorch_model.bin", weights_only=True) | {"classifier.weight": torch.zeros(2, 32)}
        torch.save(state, src / "pytorch_model.bin")


@pytest.mark.parametrize(
    "kind, message",
    [
        ("empty", "is not a transformers checkpoint (no config.json)"),
        ("wordpiece", "its tokenizer is a WordPiece model, which genolong's commands do not read"),
        ("no weights", "holds no weights"),
        ("model_type", "HyenaDNA is a long-convolution"),
        ("unknown model_type", "model_type 'gpt2' is not supported (supported: big_bird, bert, esm, mosaic_bert, modernbert)"),
        ("config says post-LN", "config.json describes a post-LN BERT but the weights are pre-LN"),
        ("rotary", "position_embedding_type 'rotary' is not supported"),
        ("deepspeed sparse", "random block layout is not stored"),
        ("dnabert2", "config.json has MosaicBERT's alibi_starting_size (DNABERT-2) but the weights have no gated"),
        ("vocabulary", "the tokenizer has 32000 tokens but the embedding matrix 4000 rows"),
        ("classifier weights", "a bert checkpoint with classifier weights is not supported: genolong converts "
                               "masked-LM and sequence-classification"),
    ],
)
def test_bad_sources_exit_2_with_one_line_and_write_nothing(kind, message, real_data, tmp_path, capsys):
    broken_source(kind, real_data, tmp_path / "src")
    code, captured = run_convert(tmp_path / "src", tmp_path / "out", capsys)
    assert code == 2 and message in captured.err, captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_a_users_directory_is_never_replaced_and_a_converted_one_needs_force(real_data, tmp_path, capsys):
    gena_bert_source(real_data, tmp_path / "src")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("mine")
    for extra in ([], ["--force"]):
        code = main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "mine"), *extra])
        err = capsys.readouterr().err
        assert code == 2 and "genolong did not write" in err and (tmp_path / "mine" / "keep.txt").read_text() == "mine"
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    code, captured = run_convert(tmp_path / "src", tmp_path / "out", capsys)
    assert code == 2 and "already exists" in captured.err
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--force"]) == 0


MICRO_FINETUNE = """task: promoter
max_len: 64
model: {hidden_dropout_prob: 0.0}
patience: 2
kmer_baseline: false
batch_size_eval: 32
train: {max_steps: 6, val_every_steps: 3, batch_size: 8, warmup_steps: 1, log_every_steps: 1,
        checkpoint_every_steps: 3, val_windows: 64}
"""


def finetune_and_predict_promoters(model_dir, real_data, tmp_path) -> dict:
    """``genolong promoter finetune --model model_dir`` (a micro run) then ``predict-promoter`` on the
    test split; returns the fine-tuning report after checking the predictions."""
    dataset = promoter_dataset(real_data, tmp_path / "promoters")
    (tmp_path / "micro.yaml").write_text(MICRO_FINETUNE)
    run = tmp_path / "run"
    assert main(["promoter", "finetune", "--data", str(dataset), "--model", str(model_dir),
                 "--config", str(tmp_path / "micro.yaml"), "--out", str(run)]) == 0
    assert (run / "model" / "tokenizer.json").read_text() == (model_dir / "tokenizer.json").read_text()
    with (dataset / "test.tsv").open() as rows:
        test_fasta = [(f"test{i}", row["sequence"]) for i, row in enumerate(csv.DictReader(rows, delimiter="\t"))]
    write_fasta(tmp_path / "test.fa", test_fasta)
    predictions = tmp_path / "predictions.tsv"
    assert main(["predict-promoter", str(tmp_path / "test.fa"), "--model", str(run / "model"),
                 "--out", str(predictions)]) == 0
    rows = read_tsv(predictions)
    assert len(rows) == len(test_fasta) and all(0.0 <= float(row["probability"]) <= 1.0 for row in rows)
    return json.loads((run / "report.json").read_text())


@pytest.mark.slow
def test_gena_bigbird_convert_finetune_predict(real_data, tmp_path, capsys):
    """GENA-LM's BigBird config (scaled down) and tokenizer: convert, then every promoter command."""
    config = BigBirdConfig(**gena_config(real_data, "hf_bigbird_L12-H768-A12-V32k-L4096.json"))
    save_source(tmp_path / "src", config.to_dict(), randomize(BigBirdForPreTraining(config)).state_dict(), safetensors=True)
    copy_gena_tokenizer(real_data, tmp_path / "src")
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "gena")]) == 0
    assert "converted big_bird (2 layers, hidden 32, 4096 positions, backbone bigbird)" in capsys.readouterr().out
    report = finetune_and_predict_promoters(tmp_path / "gena", real_data, tmp_path)
    assert report["backbone"] == "bigbird" and report["test"]["n"] > 0


@pytest.mark.slow
def test_nucleotide_transformer_convert_finetune_predict(real_data, tmp_path):
    """Nucleotide Transformer v1's layout with its vocab.txt-only tokenizer: the converted directory's
    tokenizer.json carries fine-tuning and prediction."""
    from test_convert import esm_source

    esm_source(tmp_path / "src")
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "nt")]) == 0
    report = finetune_and_predict_promoters(tmp_path / "nt", real_data, tmp_path)
    assert report["backbone"] == "full" and report["test"]["n"] > 0


MICRO_CHROMATIN = """task: chromatin
max_len: 160
model: {hidden_dropout_prob: 0.0}
patience: 2
batch_size_eval: 32
train: {max_steps: 4, val_every_steps: 2, batch_size: 8, warmup_steps: 1, log_every_steps: 1,
        checkpoint_every_steps: 2, val_windows: 32}
"""


def test_gena_bert_convert_finetune_eval_chromatin(real_data, tmp_path, capsys):
    """GENA-LM's pre-LN BERT (scaled down) and tokenizer on the 100 real DeepSEA rows:
    convert -> chromatin finetune -> chromatin eval."""
    from helpers.classify import chromatin_prepared

    gena_bert_source(real_data, tmp_path / "src")
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "gena")]) == 0
    prepared = chromatin_prepared(real_data, tmp_path / "deepsea", context=None)
    (tmp_path / "micro.yaml").write_text(MICRO_CHROMATIN)
    run = tmp_path / "run"
    assert main(["chromatin", "finetune", "--data", str(prepared), "--model", str(tmp_path / "gena"),
                 "--config", str(tmp_path / "micro.yaml"), "--out", str(run)]) == 0
    capsys.readouterr()
    aucs = tmp_path / "aucs.csv"
    assert main(["chromatin", "eval", "--model", str(run / "model"), "--data", str(prepared), "--out", str(aucs)]) == 0
    assert "-> " + str(aucs) in capsys.readouterr().out and aucs.is_file()
