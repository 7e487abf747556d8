"""The default recipe of ``genolong task finetune`` for short sequences (``labelled_tiny``): a
convolutional stem read by max pooling, trained on both strands (reverse-complement
augmentation, :class:`~genolong.training.finetune.TrainingInputs`)."""

from __future__ import annotations

import torch

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


def test_a_model_trained_on_both_strands_is_also_reported_as_predict_rc_scores_it(tmp_path):
    import json

    import numpy as np
    from sklearn.metrics import matthews_corrcoef, roc_auc_score

    from genolong.classifier.directory import Classifier, StrandAveraged
    from genolong.cli.main import main
    from tests.training.test_task_finetune import micro_preset, motif_rows

    rows = [(s, int(y == 0)) for s, y in motif_rows(160, 60, seed=4)]
    (tmp_path / "rows.tsv").write_text("sequence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.tsv"), "--out", str(tmp_path / "data")]) == 0
    out = tmp_path / "run"
    preset = micro_preset(tmp_path / "micro.yaml", max_steps=4, val_every_steps=2)
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out), "--config", str(preset),
                 "--set", "augment_reverse_complement=true"]) == 0
    report = json.loads((out / "report.json").read_text())
    both = report["both_strands"]
    labels = np.array([int(line.split("\t")[2]) for line in (tmp_path / "data" / "test.tsv").read_text().splitlines()[1:]])
    for rc, expected in ((["--rc"], both["saved_model"]), ([], report)):
        table = tmp_path / f"predicted{len(rc)}.tsv"
        assert main(["task", "predict", str(tmp_path / "data" / "test.tsv"), "--model", str(out / "model"),
                     "--out", str(table), *rc]) == 0
        header, *lines = [line.split("\t") for line in table.read_text().splitlines()]
        probabilities = np.array([float(line[header.index("label")]) for line in lines])
        assert abs(roc_auc_score(labels, probabilities) - expected["test"]["auroc"]) < 1e-6
        called = probabilities >= expected["valid"]["threshold"]
        assert abs(matthews_corrcoef(labels, called) - expected["test"]["mcc"]) < 1e-9
    network = Classifier.load(out / "model", device="cpu")
    network.kmer = None
    sequences = [line.split("\t")[1] for line in (tmp_path / "data" / "test.tsv").read_text().splitlines()[1:]]
    for scorer, expected in ((StrandAveraged(network), both["network"]), (network, report["network"])):
        auroc = roc_auc_score(labels, scorer.probabilities(sequences)[:, 0])
        assert abs(auroc - expected["test"]["auroc"]) < 1e-6
