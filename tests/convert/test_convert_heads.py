"""``genolong convert`` of transformers sequence classifiers of every problem type: a two-class
softmax (one sigmoid), a softmax over three classes, multi-label sigmoids, regression with one
and with two outputs, and configs without ``problem_type`` (read as transformers reads them).
The converted model's logits are the source's to 1e-5, and ``genolong task predict`` on the
directory converted with ``--task labelled`` writes the source's outputs through the problem
type's activation.

Sources: GENA-LM's real BERT and BigBird configs scaled down (2 layers, hidden 32), random
weights, GENA-LM's real tokenizer (``tests/helpers/convert.py``).
"""

from __future__ import annotations

import csv
import logging

import pytest
import torch
import torch.nn.functional as F
from helpers.convert import copy_gena_tokenizer, gena_config, save_source, token_batch
from test_convert import VOCAB, esm_source, gena_pre_ln_states
from test_convert_classifier import (
    MULTI_LABEL,
    SOFTMAX_2,
    SOFTMAX_3,
    classifier_source,
    compare,
    gena_pre_ln_classifier_state,
)
from test_convert_cli import PRE_LN

from genolong.classifier.directory import Classifier, TaskInfo
from genolong.cli.main import main
from genolong.convert import convert_checkpoint
from genolong.dna.sequence import read_fasta, write_fasta
from genolong.model.modeling import GenolongForSequenceClassification

REGRESSION_1 = {"num_labels": 1, "problem_type": "regression", "id2label": {0: "activity"},
                "label2id": {"activity": 0}}
REGRESSION_2 = {"num_labels": 2, "problem_type": "regression", "id2label": {0: "gc", 1: "motifs"},
                "label2id": {"gc": 0, "motifs": 1}}
SOFTMAX_3_STATED = SOFTMAX_3 | {"problem_type": "single_label_classification"}
UNSET_1 = {"num_labels": 1}
#: Source head -> (the converted problem type, its output names).
HEADS = {
    "softmax2": (SOFTMAX_2, "multi_label_classification", ["promoter"]),
    "softmax3": (SOFTMAX_3_STATED, "single_label_classification", ["a", "b", "c"]),
    "multilabel": (MULTI_LABEL, "multi_label_classification", ["a", "b", "c"]),
    "regression1": (REGRESSION_1, "regression", ["activity"]),
    "regression2": (REGRESSION_2, "regression", ["gc", "motifs"]),
    "unset1": (UNSET_1, "regression", ["LABEL_0"]),
    "unset3": (SOFTMAX_3, "single_label_classification", ["a", "b", "c"]),
}
ACTIVATION = {"multi_label_classification": torch.sigmoid, "regression": lambda x: x,
              "single_label_classification": lambda x: x.softmax(-1)}


def source_logits_as_converted(theirs: torch.Tensor, head: str) -> torch.Tensor:
    """The source's logits (B, C) as the converted head has them: a two-class softmax's ``l1 - l0``."""
    return theirs[:, 1:] - theirs[:, :1] if head == "softmax2" else theirs


#: BigBird's heads beyond these three run with the slow tests (the head code is the same as BERT's).
BIG_BIRD_DEFAULT = ("softmax3", "regression2", "unset1")


@pytest.mark.parametrize("family, head", [("bert", head) for head in HEADS] + [
    pytest.param("big_bird", head, marks=() if head in BIG_BIRD_DEFAULT else pytest.mark.slow) for head in HEADS])
def test_every_head_type_converts_with_the_source_logits(family, head, real_data, tmp_path, caplog):
    labels, problem_type, names = HEADS[head]
    source = classifier_source(family, labels, tmp_path / "src", real_data)
    with caplog.at_level(logging.INFO, logger="genolong.convert.classification"):
        convert_checkpoint(tmp_path / "src", tmp_path / "out")
    stated = "problem_type" in labels
    assert ("config.json sets no problem_type: read as" in caplog.text) is not stated, caplog.text
    converted = GenolongForSequenceClassification.from_pretrained(str(tmp_path / "out")).eval()
    assert converted.config.problem_type == problem_type
    assert list(converted.config.id2label.values()) == names
    ours, theirs = compare(source, converted, [300, 120, 17], family, seed=3)
    assert (ours - source_logits_as_converted(theirs, head)).abs().max() <= 1e-5


@pytest.mark.parametrize("head", ["softmax3", "regression2"])
def test_gena_pre_ln_bert_heads_keep_their_problem_type(head, real_data, tmp_path):
    """GENA-LM's pre-LN BERT (test_convert's implementation of their modeling file) with a 3-class
    softmax or a 2-output regression head: the converted logits are the reference's."""
    labels, problem_type, names = HEADS[head]
    config = gena_config(real_data, PRE_LN, architectures=["BertForSequenceClassification"], **labels)
    state = gena_pre_ln_classifier_state(config, classes=len(names))
    save_source(tmp_path / "src", config, state, safetensors=False)
    copy_gena_tokenizer(real_data, tmp_path / "src")
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert converted.config.problem_type == problem_type and list(converted.config.id2label.values()) == names
    ids, mask = token_batch([300, 17], VOCAB, seed=4)
    with torch.no_grad():
        hidden = gena_pre_ln_states(state, config, ids, mask, last_layer_norm=True)[-1]
        pooled = torch.tanh(F.linear(hidden[:, 0], state["bert.pooler.dense.weight"], state["bert.pooler.dense.bias"]))
        theirs = F.linear(pooled, state["classifier.weight"], state["classifier.bias"])
        ours = converted(input_ids=ids, attention_mask=mask).logits
    assert (ours - theirs).abs().max() <= 1e-5


def write_promoters(real_data, path, count=6):
    records = [r for _, r in zip(range(count), read_fasta(real_data / "promoters" / "Mouse_tata.fa"), strict=False)]
    write_fasta(path, [(f"p{i}", r.sequence) for i, r in enumerate(records)])
    return [r.sequence for r in records]


@pytest.mark.parametrize("head", ["softmax3", "regression2"])
def test_task_predict_reads_a_converted_labelled_classifier(head, real_data, tmp_path, capsys):
    """--task labelled: a classifier directory that `genolong task predict` scores with the source's
    softmax, values or sigmoids (TSV with 6 significant digits)."""
    labels, problem_type, names = HEADS[head]
    source = classifier_source("bert", labels, tmp_path / "src", real_data)
    out = tmp_path / "classifier"
    assert main(["convert", str(tmp_path / "src"), "--out", str(out), "--task", "labelled", "--window-bp", "251"]) == 0
    assert "a labelled classifier" in capsys.readouterr().out
    info = TaskInfo.read(out)
    assert info.task == "labelled" and info.label_names == names and info.threshold is None
    sequences = write_promoters(real_data, tmp_path / "test.fa")
    assert main(["task", "predict", str(tmp_path / "test.fa"), "--model", str(out),
                 "--out", str(tmp_path / "predictions.tsv")]) == 0
    with open(tmp_path / "predictions.tsv", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert list(rows[0]) == ["record", "id", "length", "windows", *names, "error"] and len(rows) == len(sequences)
    assert {row["windows"] for row in rows} == {"1"}  # records of the model's window: one window each
    written = torch.tensor([[float(row[name]) for name in names] for row in rows])
    batch = Classifier.load(out, device="cpu").encode(sequences)
    with torch.no_grad():
        expected = ACTIVATION[problem_type](source(**batch).logits)
    assert torch.allclose(written, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "task, labels, message",
    [
        ("promoter", SOFTMAX_3, "--task promoter reads independent sigmoid outputs; this checkpoint's head is a "
                                "softmax over 3 classes"),
        ("chromatin", REGRESSION_2, "--task chromatin reads independent sigmoid outputs; this checkpoint's head is "
                                    "2 regression outputs"),
    ],
)
def test_sigmoid_tasks_refuse_other_heads(task, labels, message, real_data, tmp_path, capsys):
    classifier_source("bert", labels, tmp_path / "src", real_data)
    code = main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--task", task,
                 "--window-bp", "251"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "--task labelled" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_masked_lm_checkpoint_for_your_own_task_is_pointed_to_task_finetune(tmp_path, capsys):
    esm_source(tmp_path / "src")
    code = main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--task", "labelled",
                 "--window-bp", "251"])
    err = capsys.readouterr().err
    assert code == 2 and "--task labelled needs a sequence-classification checkpoint" in err, err
    assert "`genolong task finetune`" in err and not (tmp_path / "out").exists()


def test_one_unset_output_is_a_sigmoid_for_the_promoter_commands(real_data, tmp_path, caplog):
    """As before the other problem types converted: promoter's commands read one output of an
    unset problem type as a sigmoid logit, threshold 0.5."""
    classifier_source("bert", UNSET_1, tmp_path / "src", real_data)
    with caplog.at_level(logging.INFO, logger="genolong.convert.classification"):
        converted = convert_checkpoint(tmp_path / "src", tmp_path / "out", task="promoter", window_bp=251)
    assert converted.config.problem_type == "multi_label_classification"
    assert "the sigmoid the task's commands read" in caplog.text
    assert TaskInfo.read(tmp_path / "out").threshold == 0.5


def test_convert_task_choices_are_the_converter_tasks():
    from genolong.cli.commands.convert import TASK_CHOICES
    from genolong.convert import TASKS

    assert tuple(TASKS) == TASK_CHOICES
