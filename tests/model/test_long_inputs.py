"""Inputs longer than a model's positions: SLED reads them in chunks, the others refuse with the way
out, and records longer than max_len are never cut silently."""

from __future__ import annotations

import pytest
import torch
from helpers.classify import micro_config, tiny_masked_lm

from genolong.classifier.directory import TokenEncoder
from genolong.core.errors import ConfigError
from genolong.training.model_setup import build_classifier_model

POSITIONS = 128


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A full-attention masked-LM model with 128 positions, and its tokenizer."""
    work = tmp_path_factory.mktemp("pretrained")
    return work, tiny_masked_lm(work, work / "tok", POSITIONS)


def test_sled_fine_tunes_on_inputs_longer_than_the_positions(pretrained):
    """A chunk needs positions, the input does not: max_len 1,000 on a 128-position model."""
    directory, tokenizer = pretrained
    config = micro_config("promoter", max_len=1000, **{"model.backbone": "sled", "model.sled_chunk_size": POSITIONS})
    # the user asks for SLED (a pretrained model's attention changes only when asked)
    model = build_classifier_model(config, 1, tokenizer, directory, asked=["backbone", "sled_chunk_size"]).eval()
    ids = torch.randint(5, len(tokenizer), (2, 1000), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert model(input_ids=ids).logits.shape == (2, 1)


def test_other_backbones_refuse_and_name_the_conversion(pretrained):
    directory, tokenizer = pretrained
    with pytest.raises(ConfigError, match="exceeds the model's max_position_embeddings=128") as raised:
        build_classifier_model(micro_config("promoter", max_len=256), 1, tokenizer, directory)
    assert "--backbone lsg --max-length 256" in raised.value.hint and "--backbone sled" in raised.value.hint
    too_long_chunk = micro_config("promoter", max_len=1000, **{"model.backbone": "sled", "model.sled_chunk_size": 256})
    with pytest.raises(ConfigError, match="a chunk needs a position per token"):
        build_classifier_model(too_long_chunk, 1, tokenizer, directory, asked=["backbone", "sled_chunk_size"])


def test_cropping_is_described_with_the_share_left_out(pretrained):
    """Hand-checked: records of n1 and n2 tokens read as their central 8 tokens leave out
    1 - 16 / (n1 + n2) of their tokens; a record that fits is not counted."""
    _, tokenizer = pretrained
    encoder = TokenEncoder(tokenizer, max_len=10)
    records = ["ACGTTGCA" * 8, "GATTACA" * 20, "ACG"]
    lengths = [len(tokenizer(r, add_special_tokens=False)["input_ids"]) for r in records]
    assert lengths[0] > 8 and lengths[1] > 8 and lengths[2] <= 8
    described = encoder.describe_cropping(records, "records")
    share = 1 - 16 / (lengths[0] + lengths[1])
    assert described == (f"2 of 3 records are longer than max_len=10 tokens: each is read as its central 8 tokens "
                         f"(+[CLS], [SEP]), leaving out {share:.0%} of their tokens (up to {max(lengths)} tokens per record)")
    assert encoder.describe_cropping(records[2:], "records") is None
