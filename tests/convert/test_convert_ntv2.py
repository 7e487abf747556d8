"""``genolong convert`` on Nucleotide Transformer v2: ESM with rotary positions and a SwiGLU
feed-forward without biases, its 6-mer EsmTokenizer without ``<eos>``.

InstaDeep's modelling code is not in transformers (and its licence keeps it out of this
repository), so the oracle is transformers' own ``EsmForMaskedLM`` / ``EsmForSequenceClassification``
with rotary positions (ESM-2's rotate-half over the whole head, base 10,000, which NT v2's code
inherits) whose layers' feed-forwards are replaced by NT v2's (:mod:`genolong.experiments.bench.nucleotide_transformer`,
written from the published definition): ``intermediate.dense`` (2 I, N) without bias, ``silu(x1) * x2`` with ``x1``
the first half, ``output.dense`` (N, I) without bias. The checkpoint is saved in NT v2's layout:
``config.json`` with its keys (``add_bias_fnn: false``, an ``auto_map`` to its remote code, no
``rope_theta``), one ``rotary_embeddings.inv_freq`` buffer per layer, ``esm.``-prefixed weights, and
a ``vocab.txt`` in NT v2's token order. Sizes scaled down (2 layers, hidden 32, 4 heads), random
weights; logits and every layer's hidden states agree to 1e-4 in float32 at real tokens.
"""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from helpers.convert import assert_same_outputs, genolong_hidden_states, randomize, save_source, token_batch
from test_convert import transformers_outputs
from torch import nn

import genolong.model  # noqa: F401  (registers the genolong Auto classes)
from genolong.convert import ConversionError, convert_checkpoint
from genolong.experiments.bench.nucleotide_transformer import with_swiglu
from genolong.model.modeling import GenolongForMaskedLM, GenolongForSequenceClassification
from genolong.model.rotary import RotaryEmbedding

#: NT v2's token order: special tokens, the 4,096 6-mers in product("ATCG") order, single bases.
NTV2_VOCAB = ["<unk>", "<pad>", "<mask>", "<cls>", "<eos>", "<bos>",
              *("".join(k) for k in itertools.product("ATCG", repeat=6)), "A", "T", "C", "G", "N"]
SMALL = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64}
#: NT v2's config keys (v2-500m's values but the sizes), and its remote code, which genolong never runs.
NTV2_CONFIG = {"add_bias_fnn": False, "position_embedding_type": "rotary", "emb_layer_norm_before": False,
               "token_dropout": False, "layer_norm_eps": 1e-12, "pad_token_id": 1, "mask_token_id": 2,
               "tie_word_embeddings": False, "max_position_embeddings": 258, "vocab_size": len(NTV2_VOCAB),
               "auto_map": {"AutoConfig": "esm_config.EsmConfig", "AutoModelForMaskedLM": "modeling_esm.EsmForMaskedLM",
                            "AutoModelForSequenceClassification": "modeling_esm.EsmForSequenceClassification"}}
MULTI_LABEL = {"num_labels": 3, "problem_type": "multi_label_classification"}
SPECIAL = (3, 4, 1)  # <cls>, <eos>, <pad>
LENGTHS = ([9], [256], [200, 77, 5])


def ntv2_oracle(classifier: dict | None = None, seed: int = 0) -> nn.Module:
    """transformers' ESM with rotary positions and NT v2's SwiGLU feed-forwards, random weights."""
    from transformers import EsmConfig, EsmForMaskedLM, EsmForSequenceClassification

    config = EsmConfig(**{k: v for k, v in NTV2_CONFIG.items() if k not in ("add_bias_fnn", "auto_map")},
                       **SMALL, **(classifier or {}))
    return randomize(with_swiglu((EsmForMaskedLM if classifier is None else EsmForSequenceClassification)(config)), seed)


def save_ntv2(oracle: nn.Module, out, **config_changes) -> None:
    """``oracle`` as NT v2's hub files: config.json, pytorch_model.bin, vocab.txt, tokenizer_config.json."""
    from transformers import EsmTokenizer

    config = {k: v for k, v in oracle.config.to_dict().items() if k != "rope_theta"} | NTV2_CONFIG | {
        "architectures": [type(oracle).__name__], **SMALL}
    state = {k: v for k, v in oracle.state_dict().items() if "rotary_embeddings" not in k}
    inv_freq = oracle.esm.rotary_embeddings.inv_freq
    state |= {f"esm.encoder.layer.{i}.attention.self.rotary_embeddings.inv_freq": inv_freq for i in range(2)}
    save_source(out, {k: v for k, v in (config | config_changes).items() if v is not None}, state, safetensors=False)
    (out / "vocab.txt").write_text("\n".join(NTV2_VOCAB) + "\n")
    EsmTokenizer(str(out / "vocab.txt"), eos_token=None).save_pretrained(str(out))


@pytest.fixture(scope="module")
def masked_lm(tmp_path_factory):
    """(oracle EsmForMaskedLM, converted GenolongForMaskedLM as loaded from its directory)."""
    out = tmp_path_factory.mktemp("ntv2")
    oracle = ntv2_oracle()
    save_ntv2(oracle, out / "src")
    convert_checkpoint(out / "src", out / "out")
    return oracle, GenolongForMaskedLM.from_pretrained(str(out / "out")).eval()


def worst_difference(converted, oracle, lengths, seed=0) -> float:
    ids, mask = token_batch(lengths, len(NTV2_VOCAB), seed, special=SPECIAL)
    ours, theirs = genolong_hidden_states(converted, ids, mask), transformers_outputs(oracle, ids, mask)
    return (ours[0] - theirs[0])[mask.bool()].abs().max().item()


@pytest.mark.parametrize("lengths", LENGTHS)
def test_masked_lm_logits_and_hidden_states_are_the_sources(masked_lm, lengths):
    oracle, converted = masked_lm
    config = converted.config
    assert (config.position_embedding_type, config.rotary_base, config.gated_feed_forward, config.hidden_act) == (
        "rotary", 10000.0, True, "silu")
    assert not (config.mlp_in_bias or config.mlp_out_bias) and config.max_position_embeddings == 256
    ids, mask = token_batch(lengths, len(NTV2_VOCAB), seed=len(lengths), special=SPECIAL)
    assert_same_outputs(genolong_hidden_states(converted, ids, mask), transformers_outputs(oracle, ids, mask), mask)


def test_classifier_logits_are_the_sources(tmp_path):
    oracle = ntv2_oracle(MULTI_LABEL, seed=1)
    save_ntv2(oracle, tmp_path / "src")
    convert_checkpoint(tmp_path / "src", tmp_path / "out")
    converted = GenolongForSequenceClassification.from_pretrained(str(tmp_path / "out")).eval()
    assert converted.config.classifier_pooler == "tanh"
    for lengths in LENGTHS:
        ids, mask = token_batch(lengths, len(NTV2_VOCAB), seed=len(lengths), special=SPECIAL)
        with torch.no_grad():
            ours = converted(input_ids=ids, attention_mask=mask).logits
            theirs = oracle(input_ids=ids, attention_mask=mask).logits
        assert (ours - theirs).abs().max().item() <= 1e-4


def test_a_swapped_gate_is_caught(masked_lm):
    """The oracle gating the second half instead of the first: far outside the tolerance."""
    oracle, converted = masked_lm
    for layer in oracle.esm.encoder.layer:
        layer.intermediate.gate_first = False
    try:
        assert worst_difference(converted, oracle, [200, 77]) > 1e-2
    finally:
        for layer in oracle.esm.encoder.layer:
            layer.intermediate.gate_first = True
    assert worst_difference(converted, oracle, [200, 77]) <= 1e-4


def test_a_wrong_rotary_base_is_caught(masked_lm, tmp_path):
    """A rotary base other than 10,000 in the converted model gives other logits; and a config
    whose ``rope_theta`` contradicts the saved frequencies is refused."""
    oracle, converted = masked_lm
    head_dim = converted.config.hidden_size // converted.config.num_attention_heads
    blocks = converted.genolong.encoder.blocks
    rotaries = [block.rotary for block in blocks]
    for block in blocks:
        block.rotary = RotaryEmbedding(head_dim, 1000.0)
    try:
        assert worst_difference(converted, oracle, [200, 77]) > 1e-2
    finally:
        for block, rotary in zip(blocks, rotaries, strict=True):
            block.rotary = rotary
    save_ntv2(oracle, tmp_path / "src", rope_theta=1000.0)
    with pytest.raises(ConversionError, match="rotary frequencies of another base"):
        convert_checkpoint(tmp_path / "src", tmp_path / "out")


def test_feed_forward_width_must_match_the_config(masked_lm, tmp_path):
    oracle, _ = masked_lm
    save_ntv2(oracle, tmp_path / "src", intermediate_size=48)
    with pytest.raises(ConversionError, match=r"intermediate.dense has \[128\] output features"):
        convert_checkpoint(tmp_path / "src", tmp_path / "out")


def test_the_tokenizer_is_ntv2s(masked_lm, tmp_path, real_data):
    """The converted directory's tokenizer.json gives EsmTokenizer's ids for NT v2's vocab.txt:
    6-mers from the left, leftover bases and N one token each, <cls> first and no <eos>; genolong's
    commands end an input with the vocabulary's <eos>."""
    from transformers import EsmTokenizer

    from genolong.classifier.directory import TokenEncoder
    from genolong.dna.sequence import read_fasta
    from genolong.model.loading import load_model_tokenizer

    oracle, _ = masked_lm
    save_ntv2(oracle, tmp_path / "src")
    converted = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    fast = load_model_tokenizer(tmp_path / "out", converted.config)
    slow = EsmTokenizer.from_pretrained(str(tmp_path / "src"))
    assert slow.eos_token is None and (converted.config.cls_token_id, converted.config.sep_token_id) == (3, 4)
    genome = next(read_fasta(real_data / "genomes" / "chr17.hg19.part.fa")).sequence.upper()
    pieces = [genome[1_500 * length : 1_500 * length + length] for length in range(1, 41)]
    pieces += ["ACGTN" * 5, "NNNNNNNACGTAC", "ACGTACGTACG", "N", "GATTACANNNNNNG"]
    assert {len(p) % 6 for p in pieces} == set(range(6)) and any("N" in p for p in pieces)
    expected = [slow(piece)["input_ids"] for piece in pieces]
    assert [fast(piece)["input_ids"] for piece in pieces] == expected
    assert expected[-1] == [3, *[NTV2_VOCAB.index(t) for t in ("GATTAC", "A", "N", "N", "N", "N", "N", "N", "G")]]
    framed = TokenEncoder(fast, max_len=64)(pieces[-3:])
    for row, ids in zip(framed["input_ids"].tolist(), expected[-3:], strict=True):
        assert row[: len(ids) + 1] == [*ids, 4]


def test_the_config_names_the_ntv2_keys_it_reads(masked_lm, tmp_path):
    """add_bias_fnn true with weights saved without biases: refused, not loaded with zero biases."""
    oracle, _ = masked_lm
    save_ntv2(oracle, tmp_path / "src", add_bias_fnn=True)
    with pytest.raises(ConversionError, match="left parameters unset"):
        convert_checkpoint(tmp_path / "src", tmp_path / "out")
    assert json.loads((tmp_path / "src" / "config.json").read_text())["auto_map"]
