"""The k-mer component of a classifier directory and the network + k-mer ensemble: hand-checked
k-mer logits, the baseline pipeline's logits on real promoters, the stacking fit, the same
ensemble in every scoring path, and its calibration measured on sources the fit never saw."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss, roc_auc_score

from genolong.classifier.directory import Classifier, default_promoter_model
from genolong.classifier.kmer_component import COMPONENT_FILE, KmerComponent, kmer_index
from genolong.core.errors import InputError, UserError
from genolong.datasets.promoter import load_split
from genolong.evaluation.calibration import BackwardsRanking, fit_logit_stack
from genolong.evaluation.cross_source import source_balanced_weights
from genolong.evaluation.kmer_baseline import KmerBaselineConfig, fit_kmer_baseline, kmer_features
from genolong.evaluation.kmer_ensemble import fit_kmer_ensemble, fit_kmer_experts, negative_kind, score_splits
from genolong.evaluation.metrics import expected_calibration_error
from genolong.inference.loop import ScanModule
from genolong.inference.variants.scoring import ClassifierEffects
from genolong.prep.negatives import derive_negatives
from genolong.prep.promoters import read_fasta_records
from genolong.prep.source_split import build_source_split_dataset, load_source_split_config

SMALL = KmerBaselineConfig(Cs=(1e-3,))


def test_kmer_logits_hand_checked():
    component = KmerComponent(["AC", "CG", "A"], [1.0, 3.0, 6.0], bias=0.5)
    # ACGNAC: 2-mers AC, CG, AC (GN and NA hold an N); 1-mers A twice (C, G not in training: uncounted)
    expected = (2 * 1.0 + 3.0 + 2 * 6.0) / 5 + 0.5
    np.testing.assert_allclose(component.logits(["ACGNAC", "TTT", ""])[:, 0], [expected, 0.5, 0.5])
    assert kmer_index("A") == 0 and kmer_index("TG") == 14 and kmer_index("ACGT") == 27
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


def test_component_of_the_baseline_pipeline_gives_its_logits(mouse):
    pipeline, _ = fit_kmer_baseline(mouse[::2], mouse[1::2], SMALL)
    sequences = [r.sequence for r in mouse[1::2]]
    expected = pipeline.decision_function(sequences)
    component = KmerComponent.from_pipeline(pipeline, scale=0.5, offset=-1.0)
    np.testing.assert_allclose(component.logits(sequences)[:, 0], 0.5 * expected - 1.0, rtol=1e-9, atol=1e-9)


@pytest.fixture(scope="module")
def mouse_by_kind(mouse):
    """The ``mouse`` records tagged as a source-split dataset tags them, with substitution negatives."""
    promoters = [replace(r, source="mouse/Mouse_tata") for r in mouse if r.label == 1]
    real = [replace(r, source="mouse/Mouse_nonprom") for r in mouse if r.label == 0]
    derived = [
        replace(r, source="mouse/Mouse_tata|substitution")
        for r in derive_negatives(promoters, "substitution", np.random.default_rng(0))
    ]
    return promoters + real + derived


def test_components_of_pipelines_on_one_vocabulary_add_up(mouse_by_kind):
    train, valid = mouse_by_kind[::2], mouse_by_kind[1::2]
    experts = fit_kmer_experts(train, valid, SMALL)
    assert list(experts) == ["real", "substitution"]
    sequences = [r.sequence for r in valid]
    real, substitution = (experts[kind].decision_function(sequences) for kind in ("real", "substitution"))
    pipelines = [experts["real"], experts["substitution"]]
    linear = KmerComponent.from_pipelines(pipelines, [0.7, 0.2])
    assert linear.weights.shape[0] == 1  # folded into one k-mer model
    np.testing.assert_allclose(linear.logits(sequences)[:, 0], 0.7 * real + 0.2 * substitution, rtol=1e-9, atol=1e-9)
    vetoes = KmerComponent.from_pipelines(pipelines, [0.7, 0.2], link="logsigmoid")
    np.testing.assert_allclose(vetoes.scores(sequences), np.column_stack([real, substitution]), rtol=1e-9, atol=1e-9)
    expected = -0.7 * np.logaddexp(0, -real) - 0.2 * np.logaddexp(0, -substitution)
    np.testing.assert_allclose(vetoes.logits(sequences)[:, 0], expected, rtol=1e-9, atol=1e-9)
    few = [r for r in train if r.label == 1][:5] + [r for r in train if r.label == 0][:5]
    own_vocabulary, _ = fit_kmer_baseline(few, valid, SMALL)  # the k-mers of its 10 records: not all 6-mers
    with pytest.raises(ValueError, match="same k-mers"):
        KmerComponent.from_pipelines([experts["real"], own_vocabulary])


def test_each_expert_is_fitted_on_the_promoters_and_its_kind_of_negative(mouse_by_kind):
    assert [negative_kind(r) for r in mouse_by_kind[-2:]] == ["substitution"] * 2
    assert negative_kind(next(r for r in mouse_by_kind if r.label == 0)) == "real"
    train = mouse_by_kind[::2]
    experts = fit_kmer_experts(train, mouse_by_kind[1::2], SMALL)
    for kind, pipeline in experts.items():
        fitted_on = [r for r in train if r.label == 1 or negative_kind(r) == kind]
        refit = kmer_features(SMALL, pipeline.named_steps["kmer_counts"].vocabulary_).fit(
            [r.sequence for r in fitted_on]
        )
        np.testing.assert_allclose(pipeline.named_steps["scale"].scale_, refit.named_steps["scale"].scale_)
    # the substitution expert separates promoters from their substitution negatives better than the real one does
    valid = [r for r in mouse_by_kind[1::2] if r.label == 1 or negative_kind(r) == "substitution"]
    labels, sequences = [r.label for r in valid], [r.sequence for r in valid]
    assert roc_auc_score(labels, experts["substitution"].decision_function(sequences)) > roc_auc_score(
        labels, experts["real"].decision_function(sequences)
    )


def test_the_ensemble_adds_each_experts_log_sigmoid_to_the_scaled_network(mouse_by_kind):
    train, valid = mouse_by_kind[::2], mouse_by_kind[1::2]
    classifier = Classifier.load(default_promoter_model(), device="cpu")
    classifier.kmer = None
    sequences = [r.sequence for r in valid[::10]]
    network = classifier.logits(sequences)[:, 0].numpy()
    stacking = fit_kmer_ensemble(classifier, train, valid, SMALL)
    assert max(stacking["expert_weights"].values()) > 0 and classifier.kmer.link == "logsigmoid"
    experts = fit_kmer_experts(train, valid, SMALL)
    expected = stacking["network_weight"] * network + stacking["offset"]
    for kind, weight in stacking["expert_weights"].items():
        expected -= weight * np.logaddexp(0, -experts[kind].decision_function(sequences))
    np.testing.assert_allclose(classifier.logits(sequences)[:, 0].numpy(), expected, rtol=1e-4, atol=1e-4)


def test_a_validation_split_every_model_ranks_backwards_leaves_the_classifier_as_it_is(mouse_by_kind):
    classifier = Classifier.load(default_promoter_model(), device="cpu")
    classifier.kmer = None
    train, valid = mouse_by_kind[::2], mouse_by_kind[1::2]
    flipped = [replace(r, label=1 - r.label) for r in valid]  # what every model ranks backwards
    sequences = [r.sequence for r in valid[:8]]
    before = classifier.logits(sequences)
    stacking = fit_kmer_ensemble(classifier, train, flipped, SMALL)
    assert stacking["method"].startswith("none") and "backwards" in stacking["method"]
    assert stacking["network_weight"] == 1 and not any(stacking["expert_weights"].values())
    assert classifier.kmer is None
    torch.testing.assert_close(classifier.logits(sequences), before)


def test_a_record_longer_than_the_window_is_stacked_as_the_windows_predict_promoter_scans(mouse_by_kind):
    """Validation records of 351 bp, scanned by the 300-bp shipped network in windows at 0 and 51,
    give the stacking that the same windows as records of their own give (every record scanned
    in two windows, so the shares of weight are equal), and score their best window."""
    train, valid = mouse_by_kind[::2], mouse_by_kind[1::2]
    longer = [replace(r, sequence=r.sequence + valid[i - 1].sequence[:100]) for i, r in enumerate(valid)]
    as_windows = [replace(r, sequence=r.sequence[start : start + 300]) for r in longer for start in (0, 51)]
    fits = []
    for records in (longer, as_windows):
        classifier = Classifier.load(default_promoter_model(), device="cpu")
        classifier.kmer = None
        fits.append((fit_kmer_ensemble(classifier, train, records, SMALL), classifier))
    (scanned, classifier), (windows, _) = fits
    for key in ("network_weight", "offset"):
        assert scanned[key] == pytest.approx(windows[key], rel=1e-3, abs=1e-4)
    assert scanned["expert_weights"] == pytest.approx(windows["expert_weights"], rel=1e-3, abs=1e-4)
    test = longer[1::6]
    report = score_splits(classifier, {"valid": longer[::6], "test": test})
    pairs = [w.sequence for i in range(1, len(longer), 6) for w in as_windows[2 * i : 2 * i + 2]]
    best = classifier.probabilities(pairs)[:, 0].reshape(-1, 2).max(axis=1)
    assert report["test"]["auroc"] == pytest.approx(roc_auc_score([r.label for r in test], best))


def test_source_balanced_weights_hand_checked():
    labels = [1, 1, 1, 0, 0, 0, 0]
    sources = ["a", "a", "b", "n", "n", "n", "m"]
    # promoters: a (2 records) and b (1) weigh 1/4 each; non-promoters: n (3) and m (1) 1/4 each; times 7
    np.testing.assert_allclose(
        source_balanced_weights(labels, sources), 7 * np.array([1 / 8, 1 / 8, 1 / 4, 1 / 12, 1 / 12, 1 / 12, 1 / 4])
    )


def test_token_rows_read_as_their_bases(mouse):
    classifier = Classifier.load(default_promoter_model(), device="cpu")
    component = KmerComponent(["ACG", "TATA", "GG"], [1.0, -2.0, 0.5], 0.1).bind(classifier.tokenizer)
    sequences = [r.sequence for r in mouse[:5]] + ["ACGTNNNNNNTATAAA"]
    ids = classifier.encode(sequences)["input_ids"]
    np.testing.assert_allclose(component.token_logits(ids).numpy(), component.logits(sequences), rtol=1e-6)


def test_fit_logit_stack_recovers_weights_and_drops_backwards_models():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 1.5, size=(20000, 2))
    labels = (rng.random(20000) < 1 / (1 + np.exp(-(logits @ [2.0, 0.5] - 1.0)))).astype(int)
    weights, offset = fit_logit_stack(logits, labels)
    np.testing.assert_allclose(weights, [2.0, 0.5], atol=0.1)
    assert offset == pytest.approx(-1.0, abs=0.1)
    weights, _ = fit_logit_stack(logits * [-1, 1], labels)  # the first model counts backwards
    assert weights[0] == 0 and weights[1] > 0
    with pytest.raises(BackwardsRanking, match="backwards"):
        fit_logit_stack(-logits, labels)
    # a weight of 2 is a record counted twice
    doubled = np.arange(20000) < 5000
    weighted = fit_logit_stack(logits, labels, np.where(doubled, 2.0, 1.0))
    repeated = fit_logit_stack(np.r_[logits, logits[doubled]], np.r_[labels, labels[doubled]])
    np.testing.assert_allclose(weighted[0], repeated[0], rtol=1e-4)
    assert weighted[1] == pytest.approx(repeated[1], rel=1e-4)


def test_classifier_adds_the_component_in_every_path_and_saves_it(tmp_path, mouse):
    network = Classifier.load(default_promoter_model(), device="cpu")
    network.kmer = None
    sequences = [r.sequence for r in mouse[:6]]
    component = KmerComponent(["TATA", "CG"], [4.0, -3.0], 0.2)
    ensemble = Classifier(network.model, network.tokenizer, network.info, "cpu", component.bind(network.tokenizer))
    expected = network.logits(sequences)[:, 0].numpy() + component.logits(sequences)[:, 0]
    np.testing.assert_allclose(ensemble.logits(sequences)[:, 0].numpy(), expected, rtol=1e-5)

    ensemble.save(tmp_path / "model")
    loaded = Classifier.load(tmp_path / "model", device="cpu")
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


@pytest.mark.slow
def test_ensemble_is_fitted_on_valid_and_measured_on_other_sources(shared_data, tmp_path):
    """On the default spec's real data (subsampled): the stacking sees only ``valid`` and lowers
    its source-balanced log loss there; its ECE and the ranking are measured on ``test`` and
    ``random_test``, which share no sequence with it."""
    build_source_split_dataset(load_source_split_config("default", shared_data), tmp_path / "data")
    rng = np.random.default_rng(0)
    splits = {
        name: [records[i] for i in rng.permutation(len(records))[:size]]
        for name, size in (("train", 1500), ("valid", 800), ("test", 800), ("random_test", 400))
        for records in [load_split(tmp_path / "data", name)]
    }
    assert not {r.sequence for r in splits["valid"]} & {r.sequence for r in splits["test"] + splits["random_test"]}
    classifier = Classifier.load(default_promoter_model(), device="cpu")
    classifier.kmer = None
    network = {name: classifier.probabilities([r.sequence for r in splits[name]])[:, 0] for name in ("valid", "test")}
    stacking = fit_kmer_ensemble(classifier, splits["train"], splits["valid"], SMALL)
    assert set(stacking["expert_weights"]) == {"real", "substitution", "shuffle"}
    assert stacking["network_weight"] > 0 and max(stacking["expert_weights"].values()) > 0
    assert classifier.kmer is not None
    report = score_splits(classifier, splits)
    valid_labels = [r.label for r in splits["valid"]]
    balanced = source_balanced_weights(valid_labels, [r.source for r in splits["valid"]])  # the fit's objective
    ensemble_valid = classifier.probabilities([r.sequence for r in splits["valid"]])[:, 0]
    assert log_loss(valid_labels, ensemble_valid, sample_weight=balanced) < log_loss(
        valid_labels, network["valid"], sample_weight=balanced
    )
    assert set(report["by_source"]) == {"test", "valid", "random_test"}
    for split in ("test", "random_test"):  # measured on records the fit never saw
        labels = [r.label for r in splits[split]]
        probabilities = classifier.probabilities([r.sequence for r in splits[split]])[:, 0]
        assert report["by_source"][split]["all"]["ece"] == pytest.approx(
            expected_calibration_error(labels, probabilities), abs=1e-6
        )
    # the shipped model: 0.86 on all of valid, which includes shuffle negatives
    assert report["by_source"]["valid"]["all"]["auroc"] > 0.77
