"""The one scoring primitive (genolong/classifier/scoring.py): its determinism rule, the k-mer
component and strand averaging, on the shipped promoter model and real mouse promoters (the
[CLS]-only last layer is tested in test_scan.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from genolong.classifier.directory import Classifier, default_promoter_model
from genolong.classifier.scoring import (
    MIN_ROWS,
    average_strands,
    token_logits,
    token_outputs,
)
from genolong.dna.sequence import read_fasta


@pytest.fixture(scope="module")
def classifier() -> Classifier:
    return Classifier.load(default_promoter_model(), device="cpu")


@pytest.fixture(scope="module")
def sequences(real_data) -> list[str]:
    records = read_fasta(real_data / "promoters" / "Mouse_tata.fa", unique_names=False)
    return [record.sequence for _, record in zip(range(16), records, strict=False)]


@pytest.mark.parametrize(("rows", "padded"), [(3, True), (MIN_ROWS + 4, True), (MIN_ROWS + 4, False)])
def test_a_batch_scores_the_same_bytes_on_any_thread_count(classifier, sequences, rows, padded):
    """Rows of unequal token counts (padded) or all cropped to max_len, fewer and more than MIN_ROWS."""
    batch = classifier.encode([s[: 80 + 13 * i] if padded else s for i, s in enumerate(sequences[:rows])])
    assert bool(batch["attention_mask"].all()) is not padded
    threads = torch.get_num_threads()
    try:
        outputs = []
        for count in (1, 2):
            torch.set_num_threads(count)
            outputs.append(classifier.token_outputs(batch).tobytes())
    finally:
        torch.set_num_threads(threads)
    assert outputs[0] == outputs[1]


def test_commands_other_than_scan_score_with_the_full_last_layer(classifier, sequences):
    """predict, score-variants, explain and evaluation write the bytes of the model's plain forward
    (the [CLS]-only last layer rounds differently and is scan's alone)."""
    batch = classifier.encode(sequences[:MIN_ROWS])  # unpadded, MIN_ROWS rows: no fill, no kernel choice
    assert bool(batch["attention_mask"].all())
    with torch.inference_mode():
        plain = classifier.model(input_ids=batch["input_ids"]).logits
    network = token_logits(classifier.model, batch["input_ids"], batch["attention_mask"])
    assert torch.equal(network, plain)


def test_the_kmer_component_adds_its_logit_and_outputs_follow_the_problem_type(classifier, sequences):
    assert classifier.kmer is not None
    batch = classifier.encode(sequences[:4])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    network = token_logits(classifier.model, ids, mask)
    stacked = token_logits(classifier.model, ids, mask, kmer=classifier.kmer)
    torch.testing.assert_close(stacked - network, classifier.kmer.token_logits(ids))
    torch.testing.assert_close(token_outputs(classifier.model, ids, mask, kmer=classifier.kmer), torch.sigmoid(stacked))
    np.testing.assert_array_equal(classifier.probabilities(sequences[:4]), torch.sigmoid(stacked).numpy())


def test_strands_are_averaged_pairwise():
    outputs = np.array([[1.0, 0.0], [2.0, 4.0], [3.0, 2.0], [5.0, 0.0]], dtype=np.float32)
    assert average_strands(outputs).tolist() == [[2.0, 1.0], [3.5, 2.0]]
    assert average_strands(torch.from_numpy(outputs)).tolist() == [[2.0, 1.0], [3.5, 2.0]]
