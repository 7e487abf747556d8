"""Tiny model configurations and a probe attention for the model tests."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from genolong.attention import ATTENTIONS, Attention
from genolong.core.errors import ConfigError
from genolong.model.configuration import GenolongConfig


def tiny_config(**overrides: Any) -> GenolongConfig:
    """A 2-layer, hidden-32 model over a 64-token vocabulary; dropout off for exact comparisons."""
    fields = dict(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=1024,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    fields.update(overrides)
    return GenolongConfig(**fields)


class ProbeAttention(Attention):
    """Dense attention that asks the encoder for extra global tokens and a length multiple,
    and records the shapes and masks it is called with."""

    config_defaults: dict[str, Any] = {"probe_globals": 2, "probe_multiple": 16}

    def __init__(self, config: Any, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.calls: list[tuple[tuple[int, ...], torch.Tensor | None]] = []

    @classmethod
    def validate_config(cls, config: Any) -> None:
        if config.probe_multiple < 1:
            raise ConfigError(f"probe_multiple must be positive, got {config.probe_multiple}")

    @classmethod
    def num_extra_global_tokens(cls, config: Any) -> int:
        return config.probe_globals

    @classmethod
    def length_multiple(cls, config: Any) -> int:
        return config.probe_multiple

    def forward(self, q, k, v, padding_mask=None):
        self.calls.append((tuple(q.shape), padding_mask))
        mask = None if padding_mask is None else padding_mask[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.fixture
def probe_attention(monkeypatch):
    """Register ProbeAttention as backbone "probe" for the duration of one test."""
    ProbeAttention.attention_name = "probe"
    monkeypatch.setitem(ATTENTIONS.entries, "probe", ProbeAttention)
    return ProbeAttention
