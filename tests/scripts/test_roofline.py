"""benchmarks/attention_roofline.py counts BigBird's FLOPs from the pattern: check it against the dense mask."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from genolong.attention.bigbird import BigBirdAttention
from genolong.experiments.bench.attention import BenchSize
from genolong.model.modeling import GenolongConfig

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "attention_roofline.py"


@pytest.fixture(scope="module")
def roofline():
    spec = importlib.util.spec_from_file_location("attention_roofline", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("blocks", [6, 9, 20])  # few blocks: some random slots stay empty
def test_attention_flops_count_every_visible_pair_of_the_dense_mask(roofline, blocks):
    heads, block, head_dim = 4, 8, 16
    config = GenolongConfig(
        backbone="bigbird", num_attention_heads=heads, hidden_size=heads * head_dim, block_size=block,
        max_position_embeddings=256,
    )  # fmt: skip
    attention = BigBirdAttention(config)
    length = blocks * block
    pattern = attention.build_pattern(length, torch.device("cpu"))
    pairs = int(pattern.dense_mask().expand(heads, -1, -1).sum())
    flops, keys = roofline.attention_flops(attention, length, head_dim)
    assert flops == 4 * head_dim * pairs
    assert keys == pattern.num_global + block * int((pattern.key_units >= 0).sum(-1).max())


def test_linear_flops_are_the_four_projections_and_the_ffn(roofline):
    size = BenchSize(hidden_size=8, intermediate_size=32)
    assert roofline.linear_flops(size, 10) == 2 * 10 * (4 * 8 * 8 + 2 * 8 * 32)
