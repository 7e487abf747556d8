"""The default recipe of ``genolong task finetune`` for short sequences (``labelled_tiny``): a
convolutional stem read by max pooling, trained on both strands (reverse-complement
augmentation, :class:`~genolong.training.finetune.TrainingInputs`)."""

from __future__ import annotations

import json

import numpy as np
import torch
from helpers.task_finetune import micro_preset, motif_rows
from sklearn.metrics import matthews_corrcoef, roc_auc_score

from genolong.classifier.directory import Classifier, StrandAveraged
from genolong.classifier.task_info import InferenceSpec, TaskInfo, reads_both_strands
from genolong.cli.main import main
from genolong.dna.sequence import reverse_complement
from genolong.model.modeling import GenolongForSequenceClassification
from genolong.tasks.task import SequenceRows, load_finetune_config
from genolong.training.finetune import TrainingInputs

SEQUENCE = "AACGTTTGCAGGCATC"


def test_reverse_complement_augmentation_gives_either_strand_the_same_way_on_every_read():
    rows = SequenceRows([SEQUENCE], [1.0])
    inputs = TrainingInputs(rows, seed=3, reverse_complement=True)
    read = [inputs[(position, 0)] for position in range(200)]
    flipped = sum(item["sequence"] == reverse_complement(SEQUENCE) for item in read)
    assert all(item["sequence"] in (SEQUENCE, reverse_complement(SEQUENCE)) for item in read)
    assert 60 <= flipped <= 140  # about half
    assert [inputs[(position, 0)]["sequence"] for position in range(200)] == [item["sequence"] for item in read]
    assert all(item["labels"].tolist() == [1.0] for item in read)
    assert {TrainingInputs(rows, seed=3)[(position, 0)]["sequence"] for position in range(50)} == {SEQUENCE}


def test_the_default_recipe_reads_motifs_with_a_convolution_and_max_pooling_on_both_strands():
    config = load_finetune_config("labelled")
    assert config.augment_reverse_complement
    model_config = config.model.genolong_config(max_len=40, vocab_size=22, num_labels=1,
                                                problem_type="multi_label_classification")
    assert model_config.local_conv_kernel == 15 and model_config.classifier_pooling == "max"
    torch.manual_seed(0)
    model = GenolongForSequenceClassification(model_config).eval()
    ids = torch.randint(5, 22, (2, 40))
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert logits.shape == (2, 1) and torch.isfinite(logits).all()


def test_a_model_trained_on_both_strands_is_read_on_both_by_default_and_reported_so(tmp_path):
    """The report's network and saved-model rows average both strands, as `task predict` then reads
    the model by default (and with --rc); `--no-rc` reads the forward strand, as `one_strand` reports."""
    rows = [(s, int(y == 0)) for s, y in motif_rows(160, 60, seed=4)]
    (tmp_path / "rows.tsv").write_text("sequence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.tsv"), "--out", str(tmp_path / "data")]) == 0
    out = tmp_path / "run"
    preset = micro_preset(tmp_path / "micro.yaml", max_steps=4, val_every_steps=2)
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out), "--config", str(preset),
                 "--set", "augment_reverse_complement=true"]) == 0
    report = json.loads((out / "report.json").read_text())
    one = report["one_strand"]
    assert json.loads((out / "model" / "genolong_task.json").read_text())["inference"]["both_strands"] is True
    assert report["threshold"] == report["valid"]["threshold"]
    test_lines = [line.split("\t") for line in (tmp_path / "data" / "test.tsv").read_text().splitlines()[1:]]
    labels = np.array([int(line[2]) for line in test_lines])
    for flags, expected in (([], report), (["--rc"], report), (["--no-rc"], one["saved_model"])):
        table = tmp_path / f"predicted{len(flags)}{''.join(flags)}.tsv"
        assert main(["task", "predict", str(tmp_path / "data" / "test.tsv"), "--model", str(out / "model"),
                     "--out", str(table), *flags]) == 0
        header, *lines = [line.split("\t") for line in table.read_text().splitlines()]
        probabilities = np.array([float(line[header.index("label")]) for line in lines])
        assert abs(roc_auc_score(labels, probabilities) - expected["test"]["auroc"]) < 1e-6
        called = probabilities >= expected["valid"]["threshold"]
        assert abs(matthews_corrcoef(labels, called) - expected["test"]["mcc"]) < 1e-9
    network = Classifier.load(out / "model", device="cpu")
    network.kmer = None
    sequences = [line[1] for line in test_lines]
    for scorer, expected in ((StrandAveraged(network), report["network"]), (network, one["network"])):
        auroc = roc_auc_score(labels, scorer.probabilities(sequences)[:, 0])
        assert abs(auroc - expected["test"]["auroc"]) < 1e-6


def test_a_model_trained_on_one_strand_records_no_strand_key_and_is_read_on_one(tmp_path):
    info = TaskInfo("labelled", 60, 60, 64, ["label"], inference=InferenceSpec.for_problem_type(None, 60))
    info.write(tmp_path)
    assert "both_strands" not in (tmp_path / "genolong_task.json").read_text()
    read = TaskInfo.read(tmp_path)
    assert [reads_both_strands(rc, read) for rc in (None, True, False)] == [False, True, False]
    read.inference.both_strands = True
    assert [reads_both_strands(rc, read) for rc in (None, True, False)] == [True, True, False]
