"""DNABERT-2's architecture (MosaicBERT) in plain PyTorch, from its published definition: the peer of
converted DNABERT-2 models in ``genolong bench attention`` (``ref-dnabert2``) and the oracle of their
parity tests (its conventions: ``shared/refs/dnabert2-117m/PROVENANCE.md``). Attention runs as
DNABERT-2's code does without its Triton kernel (scores materialised, bias added, softmax):

* the hub checkpoint's parameter names; embeddings: word + token type 0, LayerNorm, no positions;
* a fused ``Wqkv`` whose output splits as (3, heads, head size);
* ALiBi: Press et al.'s slopes (the interleaved extension for head counts that are not powers of
  two), bias ``-m_h |i - j|`` added to ``q k / sqrt(d)``, padded keys at -10000;
* post-LN; the gated MLP: ``gated_layers`` without bias, exact GELU of the first half times the second;
* BERT's masked-LM head (decoder tied to the word embeddings) and pooler (tanh on the first token).

Shapes: input_ids, attention_mask (B, L) -> hidden (B, L, N); logits (B, L, V), classifier (B, C).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def press_slopes(heads: int) -> list[float]:
    """ALiBi slopes as Press et al.'s reference code computes them."""
    if math.log2(heads).is_integer():
        start = 2 ** (-(2 ** -(math.log2(heads) - 3)))
        return [start * start**i for i in range(heads)]
    closest = 2 ** math.floor(math.log2(heads))
    return press_slopes(closest) + press_slopes(2 * closest)[0::2][: heads - closest]


def _named(**children: nn.Module) -> nn.Module:
    """A container whose children carry the hub checkpoint's names."""
    return nn.ModuleDict(children)


class MosaicBertConfig(SimpleNamespace):
    """The hub config.json's fields (``model_type`` named for the converter; the hub's has none)."""

    def to_dict(self) -> dict[str, Any]:
        return {"model_type": "mosaic_bert", **vars(self)}


class MosaicBertReference(nn.Module):
    """DNABERT-2's masked-LM model, or with ``num_labels`` its sequence classifier, from the hub
    config.json's fields; the tests plant wrong ALiBi ``slopes``."""

    def __init__(self, config: dict[str, Any], num_labels: int | None = None):
        super().__init__()
        self.config = MosaicBertConfig(**config)
        hidden, inner, eps = config["hidden_size"], config["intermediate_size"], config["layer_norm_eps"]
        self.slopes = press_slopes(config["num_attention_heads"])
        layers = [_named(
            attention=_named(self=_named(Wqkv=nn.Linear(hidden, 3 * hidden)),
                             output=_named(dense=nn.Linear(hidden, hidden), LayerNorm=nn.LayerNorm(hidden, eps=eps))),
            mlp=_named(gated_layers=nn.Linear(hidden, 2 * inner, bias=False), wo=nn.Linear(inner, hidden),
                       layernorm=nn.LayerNorm(hidden, eps=eps)),
        ) for _ in range(config["num_hidden_layers"])]
        embeddings = _named(word_embeddings=nn.Embedding(config["vocab_size"], hidden),
                            token_type_embeddings=nn.Embedding(config["type_vocab_size"], hidden),
                            LayerNorm=nn.LayerNorm(hidden, eps=eps))
        self.bert = _named(embeddings=embeddings, encoder=_named(layer=nn.ModuleList(layers)))
        self.num_labels = num_labels
        if num_labels is None:
            decoder = nn.Linear(hidden, config["vocab_size"])
            decoder.weight = embeddings.word_embeddings.weight
            self.cls = _named(predictions=_named(
                transform=_named(dense=nn.Linear(hidden, hidden), LayerNorm=nn.LayerNorm(hidden, eps=eps)),
                decoder=decoder))
        else:
            self.bert.pooler = _named(dense=nn.Linear(hidden, hidden))
            self.classifier = nn.Linear(hidden, num_labels)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L) -> (B, L, N): the encoder's last hidden states."""
        heads, size = self.config.num_attention_heads, self.config.hidden_size // self.config.num_attention_heads
        embeddings = self.bert.embeddings
        x = embeddings.LayerNorm(embeddings.word_embeddings(input_ids) + embeddings.token_type_embeddings.weight[0])
        length = input_ids.shape[1]
        distance = (torch.arange(length)[None, :] - torch.arange(length)[:, None]).abs().to(x.dtype)
        bias = -torch.tensor(self.slopes, dtype=x.dtype)[:, None, None] * distance  # (H, L, L)
        if attention_mask is not None:
            bias = bias[None] + (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0  # (B, H, L, L)
        for layer in self.bert.encoder.layer:
            qkv = layer.attention.self.Wqkv(x).view(*x.shape[:2], 3, heads, size)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # (B, H, L, D) each
            scores = q @ k.transpose(-1, -2) / math.sqrt(size) + bias
            context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
            x = layer.attention.output.LayerNorm(layer.attention.output.dense(context) + x)
            gate, value = layer.mlp.gated_layers(x).chunk(2, dim=-1)
            x = layer.mlp.layernorm(layer.mlp.wo(F.gelu(gate) * value) + x)
        return x

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> SimpleNamespace:
        """``.logits`` (B, L, V) or (B, C), and ``.loss`` with masked-LM ``labels`` (-100: not masked)."""
        x = self.encode(input_ids, attention_mask)
        if self.num_labels is not None:
            return SimpleNamespace(logits=self.classifier(torch.tanh(self.bert.pooler.dense(x[:, 0]))), loss=None)
        transform = self.cls.predictions.transform
        logits = self.cls.predictions.decoder(transform.LayerNorm(F.gelu(transform.dense(x))))
        loss = None if labels is None else F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return SimpleNamespace(logits=logits, loss=loss, last_hidden_state=x)


class MosaicBertEncoder(nn.Module):
    """The bare encoder of a :class:`MosaicBertReference` (the benchmark's forward phase)."""

    def __init__(self, model: MosaicBertReference):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> SimpleNamespace:
        return SimpleNamespace(last_hidden_state=self.model.encode(input_ids, attention_mask))
