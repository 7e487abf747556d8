"""``genolong convert`` on sequence classifiers: transformers' BERT, BigBird and ESM heads (dense,
nonlinearity, output layer) and GENA-LM's pre-LN BERT give the same probabilities after
conversion; a two-class softmax becomes one sigmoid (every other head type:
test_convert_heads.py).

Sources are GENA-LM's real configs scaled down (2 layers, hidden 32) with random weights and
GENA-LM's real tokenizer (ESM: Nucleotide Transformer v1's 6-mer vocabulary).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers.convert import copy_gena_tokenizer, gena_config, randomize, save_source, token_batch
from helpers.tables import read_tsv
from test_convert import VOCAB, esm_source, gena_pre_ln_state, gena_pre_ln_states
from test_convert_cli import PRE_LN, edit_config, run_convert
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    BigBirdConfig,
    BigBirdForSequenceClassification,
)

import genolong.model  # noqa: F401  (registers the genolong Auto classes)
from genolong.classifier.directory import Classifier
from genolong.cli.main import main
from genolong.convert import convert_checkpoint
from genolong.dna.sequence import read_fasta, write_fasta
from genolong.model.modeling import GenolongForSequenceClassification

#: Output layers of the sources: a two-class softmax (transformers' default problem type for
#: two labels) and three independent sigmoids.
SOFTMAX_2 = {"num_labels": 2, "id2label": {0: "other", 1: "promoter"}, "label2id": {"other": 0, "promoter": 1}}
MULTI_LABEL = {"num_labels": 3, "id2label": {0: "a", 1: "b", 2: "c"}, "label2id": {"a": 0, "b": 1, "c": 2},
               "problem_type": "multi_label_classification"}
SOFTMAX_3 = {k: v for k, v in MULTI_LABEL.items() if k != "problem_type"}
#: Special token ids (CLS, SEP, PAD) and vocabulary size of each family's test tokenizer.
TOKENS = {"bert": ((1, 2, 3), VOCAB), "big_bird": ((1, 2, 3), VOCAB), "esm": ((3, 4, 1), 4**6 + 11)}


def classifier_source(family: str, labels: dict, out, real_data):
    """transformers' sequence classifier of ``family`` with ``labels`` (config fields), random
    weights, saved with its config's ``architectures`` and a tokenizer of its vocabulary (GENA-LM's
    from ``real_data``, Nucleotide Transformer v1's for ESM)."""
    if family == "esm":
        return esm_source(out, classifier_labels=labels)[0]
    config_class, model_class, name = {
        "bert": (BertConfig, BertForSequenceClassification, "L12-H768-A12-V32k-preln.json"),
        "big_bird": (BigBirdConfig, BigBirdForSequenceClassification, "hf_bigbird_L12-H768-A12-V32k-L4096.json"),
    }[family]
    fields = {k: v for k, v in gena_config(real_data, name).items() if k not in ("pre_layer_norm", "last_layer_norm")}
    model = randomize(model_class(config_class(**fields, **labels)))
    save_source(out, model.config.to_dict() | {"architectures": [model_class.__name__]}, model.state_dict(),
                safetensors=True)
    copy_gena_tokenizer(real_data, out)
    return model


@torch.no_grad()
def compare(source, converted, lengths, family, seed=0) -> torch.Tensor:
    """Logits of both models on the same token rows; returns (ours (B, C'), theirs (B, C))."""
    special, vocab = TOKENS[family]
    ids, mask = token_batch(lengths, vocab, seed, special=special)
    return converted(input_ids=ids, attention_mask=mask).logits, source(input_ids=ids, attention_mask=mask).logits


def assert_same_probabilities(ours: torch.Tensor, theirs: torch.Tensor, softmax: bool) -> None:
    """sigmoid(ours) against softmax(theirs)[:, 1] (one output) or sigmoid(theirs), and the logits, to 1e-4."""
    if softmax:
        assert ours.shape[1] == 1
        assert (torch.sigmoid(ours[:, 0]) - theirs.softmax(-1)[:, 1]).abs().max() <= 1e-4
        assert (ours[:, 0] - (theirs[:, 1] - theirs[:, 0])).abs().max() <= 1e-4
    else:
        assert ours.shape == theirs.shape and (ours - theirs).abs().max() <= 1e-4


FAMILY_LENGTHS = {
    "bert": [[512], [400, 257, 31]],
    "esm": [[256], [200, 77, 5]],
    "big_bird": [[700], [300, 120], [1200, 900, 770]],  # full-attention fallback (<= 704 tokens), block-sparse
}


@pytest.mark.parametrize("labels", [SOFTMAX_2, MULTI_LABEL], ids=["softmax2", "multilabel"])
@pytest.mark.parametrize("family", ["bert", "big_bird", "esm"])
def test_sequence_classifier_logit_parity(family, labels, real_data, tmp_path):
    source = classifier_source(family, labels, tmp_path / "src", real_data)
    convert_checkpoint(tmp_path / "src", tmp_path / "out")
    converted = GenolongForSequenceClassification.from_pretrained(str(tmp_path / "out")).eval()
    config = converted.config
    assert config.classifier_pooler == {"bert": "tanh", "esm": "tanh", "big_bird": "gelu_tanh"}[family]
    assert config.problem_type == "multi_label_classification"
    assert list(config.id2label.values()) == (["promoter"] if labels is SOFTMAX_2 else ["a", "b", "c"])
    for seed, lengths in enumerate(FAMILY_LENGTHS[family]):
        if family == "big_bird":
            source.bert.set_attention_type("block_sparse")  # transformers keeps its full-attention fallback once taken
        assert_same_probabilities(*compare(source, converted, lengths, family, seed), softmax=labels is SOFTMAX_2)


def test_big_bird_classifier_at_4096_tokens(real_data, tmp_path):
    """GENA-LM BigBird's full length, block-sparse with transformers' eval-time random layout."""
    source = classifier_source("big_bird", SOFTMAX_2, tmp_path / "src", real_data)
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    source.bert.set_attention_type("block_sparse")
    assert_same_probabilities(*compare(source, converted, [4096, 3000], "big_bird", seed=5), softmax=True)


def gena_pre_ln_classifier_state(config: dict, seed: int = 1, classes: int = 2) -> dict[str, torch.Tensor]:
    """GENA-LM's pre-LN BertForSequenceClassification: their encoder, the pooler, a ``classifier`` of ``classes`` outputs."""
    state = {k: v for k, v in gena_pre_ln_state(config, last_layer_norm=True).items() if not k.startswith("cls.")}
    generator = torch.Generator().manual_seed(seed)
    n = config["hidden_size"]
    for name, shape in (("bert.pooler.dense", (n, n)), ("classifier", (classes, n))):
        state[f"{name}.weight"] = torch.randn(shape, generator=generator) * 0.3
        state[f"{name}.bias"] = torch.randn(shape[:1], generator=generator) * 0.3
    return state


def test_gena_pre_ln_bert_classifier(real_data, tmp_path):
    """The reference: GENA-LM's encoder (test_convert's implementation of their modeling file), then
    BertForSequenceClassification's head, ``classifier(tanh(pooler.dense(h[:, 0])))``."""
    config = gena_config(real_data, PRE_LN, architectures=["BertForSequenceClassification"], **SOFTMAX_2)
    state = gena_pre_ln_classifier_state(config)
    save_source(tmp_path / "src", config, state, safetensors=False)
    copy_gena_tokenizer(real_data, tmp_path / "src")
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert converted.config.pre_layer_norm and converted.config.final_layer_norm
    ids, mask = token_batch([512, 300, 17], VOCAB, seed=4)
    with torch.no_grad():
        hidden = gena_pre_ln_states(state, config, ids, mask, last_layer_norm=True)[-1]
        pooled = torch.tanh(F.linear(hidden[:, 0], state["bert.pooler.dense.weight"], state["bert.pooler.dense.bias"]))
        theirs = F.linear(pooled, state["classifier.weight"], state["classifier.bias"])
        ours = converted(input_ids=ids, attention_mask=mask).logits
    assert_same_probabilities(ours, theirs, softmax=True)


@pytest.mark.parametrize("family", ["esm", "big_bird"])
def test_a_head_that_is_not_a_sequence_classifier_is_refused(family, real_data, tmp_path, capsys):
    """Classifier weights under an architecture that is not ...ForSequenceClassification."""
    source = classifier_source(family, MULTI_LABEL, tmp_path / "src", real_data)
    edit_config(tmp_path / "src", architectures=[type(source).__name__.replace("Sequence", "Token")])
    code, captured = run_convert(tmp_path / "src", tmp_path / "out", capsys)
    assert code == 2 and "ForTokenClassification is not supported" in captured.err, captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


@pytest.mark.parametrize(
    "source, extra, message",
    [
        ("classifier", ["--task", "promoter"], "--task and --window-bp go together"),
        ("masked_lm", ["--task", "promoter", "--window-bp", "251"], "--task promoter needs a sequence-classification"),
        ("classifier", ["--task", "promoter", "--window-bp", "0"], "--window-bp must be positive"),
    ],
)
def test_task_options_are_checked(source, extra, message, real_data, tmp_path, capsys):
    if source == "classifier":
        classifier_source("bert", SOFTMAX_2, tmp_path / "src", real_data)
    else:
        esm_source(tmp_path / "src")
    code = main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_converted_promoter_classifier_predicts(real_data, tmp_path, capsys):
    """A two-class BigBird classifier converted with --task promoter: `predict-promoter --model`
    scores real mouse promoters, and the directory's probabilities are the source's softmax."""
    source = classifier_source("big_bird", SOFTMAX_2, tmp_path / "src", real_data)
    source.bert.set_attention_type("block_sparse")
    out = tmp_path / "classifier"
    assert main(["convert", str(tmp_path / "src"), "--out", str(out), "--task", "promoter", "--window-bp", "251"]) == 0
    assert "a promoter classifier (1 sigmoid output)" in capsys.readouterr().out
    records = [r for _, r in zip(range(12), read_fasta(real_data / "promoters" / "Mouse_tata.fa"), strict=False)]
    write_fasta(tmp_path / "test.fa", [(f"p{i}", r.sequence) for i, r in enumerate(records)])
    assert main(["predict-promoter", str(tmp_path / "test.fa"), "--model", str(out),
                 "--out", str(tmp_path / "predictions.tsv")]) == 0
    rows = read_tsv(tmp_path / "predictions.tsv")
    assert len(rows) == len(records) and all(0.0 <= float(row["probability"]) <= 1.0 for row in rows)

    classifier = Classifier.load(out, task="promoter", device="cpu")
    assert classifier.info.label_names == ["promoter"] and classifier.info.threshold == 0.5
    sequences = [r.sequence for r in records]
    batch = classifier.encode(sequences)
    with torch.no_grad():
        theirs = source(**batch).logits.softmax(-1)[:, 1]
    assert abs(classifier.probabilities(sequences)[:, 0] - theirs.numpy()).max() <= 1e-4


def test_an_auto_model_loads_a_converted_classifier_without_a_task(tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification

    esm_source(tmp_path / "src", classifier_labels=MULTI_LABEL)
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 0
    assert "for AutoModelForSequenceClassification and fine-tuning" in capsys.readouterr().out
    assert not (tmp_path / "out" / "genolong_task.json").exists()
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "out"))
    assert isinstance(model, GenolongForSequenceClassification) and model.config.num_labels == 3
