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
