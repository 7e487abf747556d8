"""The k-mer component of a classifier directory: hand-checked k-mer logits, token rows read as
their bases, the same component in every scoring path and its file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from genolong.classifier.directory import Classifier, default_promoter_model
from genolong.classifier.kmer_component import COMPONENT_FILE, KmerComponent
from genolong.core.errors import InputError, UserError
from genolong.inference.loop import ScanModule
from genolong.inference.variants.scoring import ClassifierEffects
from genolong.prep.promoters import read_fasta_records
from genolong.tasks.task import load_classifier


def test_kmer_logits_hand_checked():
    component = KmerComponent(["AC", "CG", "A"], [1.0, 3.0, 6.0], bias=0.5)
    # ACGNAC: 2-mers AC, CG, AC (GN and NA hold an N); 1-mers A twice (C, G not in training: uncounted)
    expected = (2 * 1.0 + 3.0 + 2 * 6.0) / 5 + 0.5
    np.testing.assert_allclose(component.logits(["ACGNAC", "TTT", ""])[:, 0], [expected, 0.5, 0.5])
    with pytest.raises(UserError):
        KmerComponent(["AN"], [1.0], 0.0)
    with pytest.raises(UserError):
        KmerComponent(["AC", "CG"], [1.0], 0.0)
    # two models on the same k-mers through the log-sigmoid: each score as above, then linked and mixed
    vetoes = KmerComponent(["AC", "CG", "A"], [[1.0, 3.0, 6.0], [-2.0, 0.0, 1.0]], [0.5, -1.0], [2.0, 0.5], "logsigmoid")
    second = (2 * -2.0 + 0.0 + 2 * 1.0) / 5 - 1.0
    np.testing.assert_allclose(vetoes.scores(["ACGNAC", "TTT"]), [[expected, second], [0.5, -1.0]])
    log_sigmoid = lambda x: -np.log1p(np.exp(-x))  # noqa: E731
    np.testing.assert_allclose(
        vetoes.logits(["ACGNAC", "TTT"])[:, 0],
        [2.0 * log_sigmoid(expected) + 0.5 * log_sigmoid(second), 2.0 * log_sigmoid(0.5) + 0.5 * log_sigmoid(-1.0)],
    )
    assert (vetoes.logits(["ACGNAC", "TTT", "GGGG"]) < 0).all()  # a veto only lowers the logit
    for bad in ({"bias": [0.5]}, {"link": "relu"}):
        with pytest.raises(UserError):
            KmerComponent(**{"kmers": ["AC", "CG", "A"], "weights": np.ones((2, 3)), "bias": [0.0, 0.0],
                             "mix": [1.0, 1.0], "link": "logsigmoid"} | bad)


@pytest.fixture(scope="module")
def mouse(real_data):
    promoters = read_fasta_records(real_data / "promoters" / "Mouse_tata.fa", 1)[:300]
    non_promoters = read_fasta_records(real_data / "promoters" / "Mouse_nonprom.fa", 0)[:300]
    return promoters + non_promoters


def test_token_rows_read_as_their_bases(mouse):
    classifier = Classifier.load(default_promoter_model(), device="cpu")
    component = KmerComponent(["ACG", "TATA", "GG"], [1.0, -2.0, 0.5], 0.1).bind(classifier.tokenizer)
    sequences = [r.sequence for r in mouse[:5]] + ["ACGTNNNNNNTATAAA"]
    ids = classifier.encode(sequences)["input_ids"]
    np.testing.assert_allclose(component.token_logits(ids).numpy(), component.logits(sequences), rtol=1e-6)


def test_classifier_adds_the_component_in_every_path_and_saves_it(tmp_path, mouse):
    network = Classifier.load(default_promoter_model(), device="cpu")
    network.kmer = None
    sequences = [r.sequence for r in mouse[:6]]
    component = KmerComponent(["TATA", "CG"], [4.0, -3.0], 0.2)
    ensemble = Classifier(network.model, network.tokenizer, network.info, "cpu", component.bind(network.tokenizer))
    expected = network.logits(sequences)[:, 0].numpy() + component.logits(sequences)[:, 0]
    np.testing.assert_allclose(ensemble.logits(sequences)[:, 0].numpy(), expected, rtol=1e-5)

    ensemble.save(tmp_path / "model")
    loaded = load_classifier(tmp_path / "model", device="cpu")
    np.testing.assert_allclose(loaded.probabilities(sequences), ensemble.probabilities(sequences), rtol=1e-6)
    batch = loaded.encode(sequences)
    scan = ScanModule(loaded.model, rc=False, columns=None, kmer=loaded.kmer)
    with torch.inference_mode():
        scanned = scan.probabilities(batch["input_ids"], batch["attention_mask"]).numpy()
    np.testing.assert_allclose(scanned, ensemble.probabilities(sequences), rtol=1e-5, atol=1e-6)
    bodies = [np.array(e.ids) for e in loaded.tokenizer.backend_tokenizer.encode_batch(sequences, add_special_tokens=False)]
    variant_scores = ClassifierEffects(loaded, [0], batch_size=4)._run([[body] for body in bodies])  # score-variants' pass
    np.testing.assert_allclose(variant_scores, ensemble.probabilities(sequences), rtol=1e-5, atol=1e-6)

    vetoes = KmerComponent(["TATA", "CG"], [[4.0, -3.0], [1.0, 2.0]], [0.2, -0.5], [1.5, 0.3], "logsigmoid")
    vetoes.save(tmp_path / "model")
    reloaded = KmerComponent.load(tmp_path / "model", network.tokenizer)
    assert reloaded.link == "logsigmoid" and reloaded.mix.tolist() == [[1.5, 0.3]]  # one output
    np.testing.assert_allclose(reloaded.logits(sequences), vetoes.logits(sequences), rtol=1e-12)
    # a file written before components held several models: one linear model
    np.savez(tmp_path / "model" / COMPONENT_FILE, kmers=np.array(["TATA", "CG"]), weights=np.array([4.0, -3.0]), bias=0.2)
    older = KmerComponent.load(tmp_path / "model", network.tokenizer)
    assert older.link == "linear" and older.mix.tolist() == [[1.0]]
    np.testing.assert_allclose(older.logits(sequences), component.logits(sequences), rtol=1e-12)
    (tmp_path / "model" / COMPONENT_FILE).write_bytes(b"not an npz")
    with pytest.raises(InputError, match="not a k-mer component"):
        Classifier.load(tmp_path / "model", device="cpu")
