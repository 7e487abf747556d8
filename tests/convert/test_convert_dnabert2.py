"""DNABERT-2 (MosaicBERT) -> genolong: the hub's real config scaled down and its real tokenizer,
random weights saved as the hub saves them (``pytorch_model.bin``, config.json without
``model_type``), against the plain dense reference of tests/helpers/mosaic_bert.py."""

from __future__ import annotations

import pytest
import torch
from helpers import mosaic_bert
from helpers.convert import token_batch
from helpers.converted import every_command

from genolong.convert import LongSpec, convert_checkpoint

SPECIAL = (1, 2, 3)  # [CLS], [SEP], [PAD] of DNABERT-2's tokenizer
LENGTHS = [[37], [37, 20, 9]]  # one row; a padded batch


@pytest.fixture(scope="module")
def masked_lm(real_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("dnabert2")
    config, state = mosaic_bert.write_checkpoint(real_data, root / "src")
    return config, state, convert_checkpoint(root / "src", root / "out"), root


@pytest.mark.parametrize("lengths", LENGTHS)
def test_masked_lm_logits_equal_the_reference(masked_lm, lengths):
    config, state, model, _ = masked_lm
    ids, mask = token_batch(lengths, config["vocab_size"], special=SPECIAL)
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask).logits
    theirs = mosaic_bert.reference_logits(state, config, ids, mask)
    real = mask.bool()
    assert (ours[real] - theirs[real]).abs().max().item() <= 1e-4


def test_the_converted_config_states_the_architecture(masked_lm):
    _, _, model, _ = masked_lm
    config = model.config
    assert (config.position_embedding_type, config.gated_feed_forward, config.mlp_in_bias, config.pre_layer_norm) == (
        "alibi", True, False, False)
    assert config.converted_from["model_type"] == "mosaic_bert" and config.pad_token_id == 3
    assert not config.tie_word_embeddings  # token type 0 folded into the tokens, the decoder keeps the words


@pytest.mark.parametrize("num_labels", [2, 3])
def test_sequence_classifier_logits_equal_the_reference(real_data, tmp_path, num_labels):
    config, state = mosaic_bert.write_checkpoint(real_data, tmp_path / "src", num_labels=num_labels, seed=1)
    model = convert_checkpoint(tmp_path / "src", tmp_path / "out")
    ids, mask = token_batch([30, 12], config["vocab_size"], seed=1, special=SPECIAL)
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask).logits
    theirs = mosaic_bert.reference_logits(state, config, ids, mask)
    if num_labels == 2:  # a two-class softmax becomes one sigmoid of l1 - l0
        theirs = theirs[:, 1:] - theirs[:, :1]
    assert (ours - theirs).abs().max().item() <= 1e-4


def test_planted_mistakes_are_caught(masked_lm):
    """A slope of the wrong head count's formula, or the gate taken from the second half, changes the
    logits far beyond the tolerance: the parity test pins both conventions."""
    config, state, model, _ = masked_lm
    ids, mask = token_batch([37], config["vocab_size"], special=SPECIAL)
    with torch.no_grad():
        ours = model(input_ids=ids, attention_mask=mask).logits
    power_of_two_slopes = mosaic_bert.press_slopes(16)[:12]  # not the interleaved extension
    wrong_slopes = mosaic_bert.reference_logits(state, config, ids, mask, slopes=power_of_two_slopes)
    inner = config["intermediate_size"]
    swapped = dict(state)
    for i in range(config["num_hidden_layers"]):
        gate = state[f"bert.encoder.layer.{i}.mlp.gated_layers.weight"]
        swapped[f"bert.encoder.layer.{i}.mlp.gated_layers.weight"] = torch.cat([gate[inner:], gate[:inner]])
    wrong_gate = mosaic_bert.reference_logits(swapped, config, ids, mask)
    assert (ours - wrong_slopes).abs().max().item() > 1e-2
    assert (ours - wrong_gate).abs().max().item() > 1e-2


def test_the_real_tokenizer_is_carried_over(masked_lm):
    from transformers import AutoTokenizer

    _, _, model, root = masked_lm
    sequence = "ACGTTGCAAATTTGGGCCCNACGTAGCTAGCTAGGATCCATGCATGCAAAAAAAAAAT"
    source, converted = (AutoTokenizer.from_pretrained(str(root / name)) for name in ("src", "out"))
    assert converted(sequence)["input_ids"] == source(sequence)["input_ids"]
    assert len(converted) == model.config.vocab_size == 4096


def test_every_command_serves_the_converted_model(masked_lm, real_data, tmp_path):
    _, _, _, root = masked_lm
    every_command(root / "out", tmp_path, real_data, long=("lsg", 1024))


def test_made_long_with_lsg_it_still_gives_the_sources_logits_where_lsg_covers_every_key(masked_lm, tmp_path):
    config, state, _, root = masked_lm
    long = convert_checkpoint(root / "out", tmp_path / "long", long=LongSpec("lsg", 2048))
    assert (long.config.backbone, long.config.max_position_embeddings) == ("lsg", 2048)
    ids, mask = token_batch([37, 20], config["vocab_size"], special=SPECIAL)  # within two LSG blocks
    with torch.no_grad():
        ours = long(input_ids=ids, attention_mask=mask).logits
    theirs = mosaic_bert.reference_logits(state, config, ids, mask)
    assert (ours[mask.bool()] - theirs[mask.bool()]).abs().max().item() <= 1e-4
