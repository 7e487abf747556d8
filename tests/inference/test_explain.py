"""`genolong explain`: ISM and gradient maps of a model that detects a motif by construction (its
weights are set so that it reads the motif exactly) put their effects on the motif's bases and
nowhere else, in pieces of real hg19 sequence; the command writes (N, 4, L) arrays and logos for
FASTA and BED input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from genolong.classifier.directory import Classifier, TaskInfo
from genolong.cli.main import main
from genolong.dna.sequence import ALPHABET, read_fasta, write_fasta
from genolong.dna.tokenizer import (
    N_RUN_POWERS,
    SPECIAL_TOKENS,
    TokenizerTrainConfig,
    load_tokenizer,
    train_tokenizer,
)
from genolong.inference.explain.attributions import (
    BASES,
    gradient_attributions,
    mutants,
    one_hot,
    saturation_mutagenesis,
)
from genolong.model.configuration import GenolongConfig
from genolong.model.modeling import GenolongForSequenceClassification
from genolong.resources import sample_genome

MOTIF = "CACGTGACGTCA"
LENGTH = 120


CHR17 = next(r.sequence for r in read_fasta(sample_genome()) if r.name == "chr17_part")


def planted(rng: np.random.Generator, count: int):
    """Random 120-bp pieces of the real hg19 chr17 fragment; every other one carries MOTIF at a
    random position in [30, 78)."""
    sequences, labels, starts = [], [], []
    for i in range(count):
        offset = int(rng.integers(0, len(CHR17) - LENGTH))
        bases = list(CHR17[offset : offset + LENGTH])
        start = int(rng.integers(30, 78))
        if i % 2 == 0:
            bases[start : start + len(MOTIF)] = MOTIF
        sequences.append("".join(bases))
        labels.append(float(i % 2 == 0))
        starts.append(start)
    return sequences, np.array(labels, np.float32), starts


#: The motif detector's output on a full match of MOTIF (about 0 elsewhere), and the logit of a
#: piece that carries MOTIF (``-LOGIT`` on one without it).
SHARPNESS = 10.0
LOGIT = SHARPNESS / 4


def set_motif_detector(model: GenolongForSequenceClassification, tokenizer) -> None:
    """Set ``model``'s weights so that its one logit is ``+LOGIT`` on a sequence that contains
    MOTIF and ``-LOGIT`` (to within 1e-5) on one that does not.

    One token per base: the token embedding of base b is the unit vector e_b (b < 4; other
    tokens and positions 0); channel 4 of the embedding convolution is the matched filter of
    MOTIF (``SHARPNESS`` on each motif base at its offset, bias ``-SHARPNESS * (len(MOTIF) - 1/2)``),
    which after its GELU reads ``SHARPNESS / 2`` where all 12 bases match and within 1e-5 of 0
    elsewhere; the layer adds nothing (its attention and feed-forward outputs are 0, pre-LN
    without a final norm), max pooling takes the best position and the head reads channel 4
    minus ``LOGIT``."""
    embeddings = model.genolong.encoder.embeddings
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        for channel, base in enumerate(BASES):
            embeddings.token.weight[tokenizer.convert_tokens_to_ids(base), channel] = 1.0
        for offset, base in enumerate(MOTIF):
            embeddings.local_conv.weight[4, BASES.index(base), offset] = SHARPNESS
        embeddings.local_conv.bias[4] = -SHARPNESS * (len(MOTIF) - 0.5)
        model.classifier.classifier.weight[0, 4] = 1.0
        model.classifier.classifier.bias[0] = -LOGIT


@pytest.fixture(scope="module")
def motif_model(tmp_path_factory):
    """A classifier directory whose model detects MOTIF by construction (:func:`set_motif_detector`),
    with a one-token-per-base tokenizer (no merges: its vocabulary is the fixed tokens only)."""
    work = tmp_path_factory.mktemp("motif")
    fixed_tokens = len(SPECIAL_TOKENS) + len(ALPHABET) + N_RUN_POWERS
    train_tokenizer(sample_genome(), work / "tokenizer", TokenizerTrainConfig(vocab_size=fixed_tokens, sample_bp=1000),
                    show_progress=False)
    tokenizer = load_tokenizer(work / "tokenizer")
    config = GenolongConfig(vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=8, max_position_embeddings=LENGTH + 8, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0, num_labels=1, problem_type="multi_label_classification",
                            classifier_pooling="max", pre_layer_norm=True, final_layer_norm=False,
                            embedding_layer_norm=False, local_conv_kernel=len(MOTIF) + 1)
    model = GenolongForSequenceClassification(config)
    set_motif_detector(model, tokenizer)
    classifier = Classifier(model, tokenizer, TaskInfo("promoter", LENGTH, LENGTH, LENGTH + 8, ["motif"], threshold=0.5),
                            device="cpu")
    classifier.save(work / "model")
    return work / "model"


def test_mutants_by_hand():
    sequences, where = mutants("ACGT", 1, 2)
    assert sequences == ["AAGT", "AGGT", "ATGT", "ACAT", "ACCT", "ACTT"]
    assert where == [(0, 0), (2, 0), (3, 0), (0, 1), (1, 1), (3, 1)]
    np.testing.assert_array_equal(one_hot("ACGN"), [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]])


def test_the_motif_detector_reads_the_motif_exactly(motif_model, data_seed):
    classifier = Classifier.load(motif_model, device="cpu")
    sequences, labels, _ = planted(np.random.default_rng(data_seed + 200), 64)
    expected = np.where(labels == 1, LOGIT, -LOGIT)
    np.testing.assert_allclose(classifier.logits(sequences)[:, 0].numpy(), expected, atol=1e-4)


def test_ism_and_gradients_fall_on_the_planted_motif_only(motif_model, data_seed):
    """The model reads exactly the motif's 12 bases (:func:`set_motif_detector`), so every
    substitution inside it turns the logit from ``LOGIT`` to ``-LOGIT``, none outside changes it,
    and the gradient maps (integrated gradients, input x gradient) put all their mass on it.
    ``GENOLONG_TEST_DATA_SEED`` draws other pieces and motif positions."""
    classifier = Classifier.load(motif_model, device="cpu")
    sequences, _, starts = planted(np.random.default_rng(data_seed + 1), 16)
    for sequence, start in list(zip(sequences, starts, strict=True))[::2]:  # the 8 that carry the motif
        inside = slice(start, start + len(MOTIF))
        ism = saturation_mutagenesis(classifier, sequence, 0, LENGTH, [0], batch_size=128)[0]
        assert ism.shape == (4, LENGTH)
        assert (ism * one_hot(sequence) == 0).all()  # no effect on the reference base
        substituted = 1 - one_hot(sequence[inside])
        np.testing.assert_allclose(ism[:, inside], -2 * LOGIT * substituted, atol=1e-4)
        np.testing.assert_allclose(np.delete(ism, np.s_[inside], axis=1), 0, atol=1e-4)
        for method in ("ig", "input-x-gradient"):
            per_base = np.abs(gradient_attributions(classifier, sequence, 0, LENGTH, [0], method=method)[0]).sum(0)
            assert per_base[inside].sum() >= 0.999 * per_base.sum(), method
            assert per_base[inside].min() > 0, method


def test_explain_command_writes_arrays_and_logos(motif_model, tmp_path, capsys):
    sequences, _, _ = planted(np.random.default_rng(2), 2)
    write_fasta(tmp_path / "in.fa", [(f"seq{i}", s) for i, s in enumerate(sequences)])
    assert main(["explain", "--model", str(motif_model), str(tmp_path / "in.fa"), "--out",
                 str(tmp_path / "out"), "--ism-window", "60", "--logo-width", "30"]) == 0
    target = tmp_path / "out" / "0_motif"
    ohe, ism, grads = (np.load(p)["arr_0"] for p in (tmp_path / "out" / "ohe.npz", target / "ism.npz",
                                                      target / "gradients.npz"))
    assert ohe.shape == ism.shape == grads.shape == (2, 4, 60)
    np.testing.assert_array_equal(ohe[0], one_hot(sequences[0][30:90]))
    assert sorted(p.name for p in (target / "logos").iterdir()) == ["0_seq0.png", "1_seq1.png"]
    (tmp_path / "regions.bed").write_text("chr17_part\t20000\t20010\tsite\nchrM\t16500\t16560\n")
    assert main(["explain", "--model", str(motif_model), "--regions", str(tmp_path / "regions.bed"), "--genome",
                 str(sample_genome()), "--out", str(tmp_path / "bed"), "--gradients", "none", "--ism-window", "40"]) == 0
    lines = (tmp_path / "bed" / "records.tsv").read_text().splitlines()
    assert lines[1].split("\t") == ["site", "120", "40", "80", "chr17_part:19945-20065"]
    assert np.load(tmp_path / "bed" / "0_motif" / "ism.npz")["arr_0"].shape == (2, 4, 40)
    assert not (tmp_path / "bed" / "0_motif" / "gradients.npz").exists()
    capsys.readouterr()
    assert main(["explain", "--model", str(motif_model), str(tmp_path / "in.fa"), "--out",
                 str(tmp_path / "whole"), "--ism-window", "500", "--gradients", "none"]) == 0
    assert "2 of 2 records are shorter than --ism-window 500: each is attributed whole" in capsys.readouterr().err
    assert np.load(tmp_path / "whole" / "ohe.npz")["arr_0"].shape == (2, 4, LENGTH)


def test_the_default_window_adapts_to_records_shorter_than_the_model_window(motif_model, tmp_path):
    sequences, _, _ = planted(np.random.default_rng(3), 2)
    write_fasta(tmp_path / "in.fa", [("a", sequences[0][10:110]), ("b", sequences[1][:104])])  # window: 120 bp
    assert main(["explain", "--model", str(motif_model), str(tmp_path / "in.fa"), "--out",
                 str(tmp_path / "out"), "--gradients", "none"]) == 0
    assert np.load(tmp_path / "out" / "0_motif" / "ism.npz")["arr_0"].shape == (2, 4, 104)
    lines = (tmp_path / "out" / "records.tsv").read_text().splitlines()
    assert [line.split("\t")[:4] for line in lines[1:]] == [["a", "100", "0", "100"], ["b", "104", "0", "104"]]
