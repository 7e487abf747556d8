"""`genolong explain` on what fine-tuning saves: the k-mer model alone (the network at weight 0) or a
stack of both, and records of unequal lengths, each with its own window (tiny random models)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.classify import random_classifier, tiny_tokenizer

from genolong.classifier.kmer_component import KmerComponent
from genolong.cli.main import main
from genolong.dna.sequence import write_fasta
from genolong.inference.explain.attributions import gradient_attributions, gradient_parts
from genolong.tasks.task import load_classifier

KMERS = [a + b + c for a in "ACGT" for b in "ACGT" for c in "ACGT"]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def saved_model(directory, tokenizer_dir, network_weight: float):
    """A random classifier (window 150 bp) whose saved logit is ``network_weight * network + 1.5 * k-mer + 0.2``."""
    random_classifier(directory, tokenizer_dir, task="promoter", window_bp=150, min_bp=20, label_names=["y"])
    weights = np.random.default_rng(0).normal(0, 3, len(KMERS))
    KmerComponent(KMERS, weights, 0.3, [[1.5]], "linear", [0.2], [[network_weight]]).save(directory)
    return directory


def sequences(count: int, length: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), length)) for _ in range(count)]


@pytest.mark.parametrize(("network_weight", "parts"), [(0.0, ["k-mer model"]), (0.7, ["network", "k-mer model"])])
def test_gradients_attribute_every_part_the_saved_model_weighs(tokenizer_dir, tmp_path, network_weight, parts):
    """The k-mer model alone gave all-zero gradients: only the network part was attributed."""
    classifier = load_classifier(saved_model(tmp_path / "model", tokenizer_dir, network_weight), device="cpu")
    assert gradient_parts(classifier) == parts
    sequence = sequences(1, 60)[0]
    ids = classifier.encode([sequence])["input_ids"]
    kmer = classifier.kmer
    effect = 1.5 * (kmer.token_scores(ids)[0, 0] - 0.3)  # the k-mer part's logit minus its value without k-mers
    kmer_only = load_classifier(saved_model(tmp_path / "alone", tokenizer_dir, 0.0), device="cpu")
    ig = gradient_attributions(kmer_only, sequence, 0, 60, [0], method="ig", steps=4)
    assert ig.sum() == pytest.approx(effect, rel=1e-5)  # a linear k-mer model: its IG adds up exactly
    for method in ("ig", "input-x-gradient"):
        maps = gradient_attributions(classifier, sequence, 0, 60, [0], method=method, steps=4)
        assert np.abs(maps).sum() > 0
        if network_weight:  # the network's share comes on top of the k-mer model's
            assert not np.allclose(maps, gradient_attributions(kmer_only, sequence, 0, 60, [0], method=method, steps=4))


def test_base_shares_add_up_to_each_models_score():
    rng = np.random.default_rng(1)
    component = KmerComponent(KMERS + ["AC", "GT"], rng.normal(0, 1, (2, len(KMERS) + 2)), [0.1, -0.4],
                              np.eye(2), "logsigmoid")
    for sequence in ("ACGTTGCANNACGTAC", "ACG", "NNNN"):
        shares = component.base_shares(sequence)
        assert shares.shape == (2, len(sequence))
        np.testing.assert_allclose(shares.sum(1), component.scores([sequence])[0] - component.bias, atol=1e-12)
    scores = torch.tensor([[0.3, -2.0]], dtype=torch.float64)
    np.testing.assert_allclose(component.score_logits(scores).numpy(), component.combine(scores.numpy()))


def test_the_explain_command_says_which_parts_it_attributes(tokenizer_dir, tmp_path, capsys):
    model = saved_model(tmp_path / "model", tokenizer_dir, 0.0)
    write_fasta(tmp_path / "in.fa", [("a", sequences(1, 80)[0])])
    assert main(["explain", "--model", str(model), str(tmp_path / "in.fa"), "--out", str(tmp_path / "out"),
                 "--ig-steps", "2"]) == 0
    assert "gradients (ig) attribute the saved model's k-mer model (the network has weight 0" in capsys.readouterr().err
    assert np.abs(np.load(tmp_path / "out" / "0_y" / "gradients.npz")["arr_0"]).sum() > 0
    assert json.loads((tmp_path / "out" / "explain.json").read_text())["gradient_parts"] == ["k-mer model"]


def test_each_record_gets_its_own_window_clipped_to_its_length(tokenizer_dir, tmp_path, capsys):
    """A 50-bp record shrank every record's window to 50 bp."""
    model = saved_model(tmp_path / "model", tokenizer_dir, 0.7)
    long, short = sequences(2, 140)
    write_fasta(tmp_path / "in.fa", [("long", long), ("short", short[:50])])
    assert main(["explain", "--model", str(model), str(tmp_path / "in.fa"), "--out", str(tmp_path / "out"),
                 "--ism-window", "100", "--gradients", "none"]) == 0
    assert "1 of 2 records are shorter than --ism-window 100: each is attributed whole" in capsys.readouterr().err
    lines = [line.split("\t")[:4] for line in (tmp_path / "out" / "records.tsv").read_text().splitlines()[1:]]
    assert lines == [["long", "140", "20", "120"], ["short", "50", "0", "50"]]
    ohe, ism = (np.load(tmp_path / "out" / name)["arr_0"] for name in ("ohe.npz", "0_y/ism.npz"))
    assert ohe.shape == ism.shape == (2, 4, 100)
    assert ohe[1, :, :50].sum() == 50 and not ohe[1, :, 50:].any() and not ism[1, :, 50:].any()
    assert json.loads((tmp_path / "out" / "explain.json").read_text())["clipped"] == ["short"]
    assert main(["explain", "--model", str(model), str(tmp_path / "in.fa"), "--out", str(tmp_path / "default"),
                 "--gradients", "none"]) == 0  # the default window: the model's 150 bp
    assert "2 of 2 records are shorter than --ism-window 150 (the default)" in capsys.readouterr().err
    assert np.load(tmp_path / "default" / "ohe.npz")["arr_0"].shape == (2, 4, 140)
