"""A plain dense reference of DNABERT-2's architecture (MosaicBERT), written from its published
definition for the conversion tests: the source's modelling code is not in transformers and is
not copied here. What it pins (the conventions of ``bert_layers.py`` at the hub revision recorded
in ``shared/refs/dnabert2-117m/PROVENANCE.md``):

* state-dict names of the hub checkpoint (``bert.embeddings.*``, ``bert.encoder.layer.{i}.attention.self.Wqkv``,
  ``...attention.output.{dense,LayerNorm}``, ``...mlp.{gated_layers,wo,layernorm}``, ``bert.pooler.dense``,
  ``cls.predictions.*``, ``classifier``);
* embeddings: word + token type 0, LayerNorm, no positions;
* a fused ``Wqkv`` whose output splits as (3, heads, head size);
* ALiBi: slopes of Press et al. (``2 ** (-8 / n)`` powers, the interleaved extension for head counts
  that are not powers of two), bias ``-m_h |i - j|`` added to ``q k / sqrt(d)``, padded keys at -10000;
* post-LN; the gated MLP: ``gated_layers`` without bias, exact GELU on the first half times the second;
* BERT's masked-LM head (dense, GELU, LayerNorm, decoder tied to the word embeddings, bias) and
  BERT's pooler (dense, tanh on the first token) before ``classifier``.
"""

from __future__ import annotations

import json
import lzma
import math
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F

from helpers.convert import save_source

#: DNABERT-2's real config.json (shared/refs/dnabert2-117m) scaled down: 12 heads as the real model
#: (not a power of two, so the interleaved slopes are used), head size 4.
SMALL = {"hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 12, "intermediate_size": 64}


def press_slopes(heads: int) -> list[float]:
    """ALiBi slopes as Press et al.'s reference code computes them."""
    if math.log2(heads).is_integer():
        start = 2 ** (-(2 ** -(math.log2(heads) - 3)))
        return [start * start**i for i in range(heads)]
    closest = 2 ** math.floor(math.log2(heads))
    return press_slopes(closest) + press_slopes(2 * closest)[0::2][: heads - closest]


def write_checkpoint(real_data: Path, out: Path, num_labels: int | None = None, seed: int = 0) -> tuple[dict, dict]:
    """A DNABERT-2 checkpoint directory as the hub has it: the real config.json (:data:`SMALL`), the
    real tokenizer, random weights as ``pytorch_model.bin``; with ``num_labels`` a sequence
    classifier (``architectures`` and ``model_type: bert``, as their fine-tuning saves it).
    Returns the config and the weights."""
    hub = real_data / "checkpoints" / "dnabert2_117m"
    config = json.loads((hub / "config.json").read_text()) | SMALL
    if num_labels is not None:
        config |= {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
                   "id2label": {str(i): f"class_{i}" for i in range(num_labels)}}
    state = random_state(config, num_labels, seed)
    save_source(out, config, state, safetensors=False)
    shutil.copy(hub / "tokenizer_config.json", out / "tokenizer_config.json")
    (out / "tokenizer.json").write_bytes(lzma.decompress((hub / "tokenizer.json.xz").read_bytes()))
    return config, state


def random_state(config: dict, num_labels: int | None = None, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights in the hub's layout: a masked-LM checkpoint, or with ``num_labels`` a sequence classifier."""
    generator = torch.Generator().manual_seed(seed)
    hidden, inner, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]

    def rand(*shape, one=False):
        return torch.randn(shape, generator=generator) * 0.1 + (1.0 if one else 0.0)

    state = {"bert.embeddings.word_embeddings.weight": rand(vocab, hidden),
             "bert.embeddings.token_type_embeddings.weight": rand(config["type_vocab_size"], hidden),
             "bert.embeddings.LayerNorm.weight": rand(hidden, one=True), "bert.embeddings.LayerNorm.bias": rand(hidden)}
    for i in range(config["num_hidden_layers"]):
        layer = f"bert.encoder.layer.{i}"
        state |= {f"{layer}.attention.self.Wqkv.weight": rand(3 * hidden, hidden),
                  f"{layer}.attention.self.Wqkv.bias": rand(3 * hidden),
                  f"{layer}.attention.output.dense.weight": rand(hidden, hidden),
                  f"{layer}.attention.output.dense.bias": rand(hidden),
                  f"{layer}.attention.output.LayerNorm.weight": rand(hidden, one=True),
                  f"{layer}.attention.output.LayerNorm.bias": rand(hidden),
                  f"{layer}.mlp.gated_layers.weight": rand(2 * inner, hidden),
                  f"{layer}.mlp.wo.weight": rand(hidden, inner), f"{layer}.mlp.wo.bias": rand(hidden),
                  f"{layer}.mlp.layernorm.weight": rand(hidden, one=True), f"{layer}.mlp.layernorm.bias": rand(hidden)}
    if num_labels is None:
        return state | {"cls.predictions.transform.dense.weight": rand(hidden, hidden),
                        "cls.predictions.transform.dense.bias": rand(hidden),
                        "cls.predictions.transform.LayerNorm.weight": rand(hidden, one=True),
                        "cls.predictions.transform.LayerNorm.bias": rand(hidden),
                        "cls.predictions.decoder.weight": state["bert.embeddings.word_embeddings.weight"],
                        "cls.predictions.decoder.bias": rand(vocab)}
    return state | {"bert.pooler.dense.weight": rand(hidden, hidden), "bert.pooler.dense.bias": rand(hidden),
                    "classifier.weight": rand(num_labels, hidden), "classifier.bias": rand(num_labels)}


def _norm(x, state, name, eps):
    return F.layer_norm(x, x.shape[-1:], state[f"{name}.weight"], state[f"{name}.bias"], eps)


def _linear(x, state, name):
    return F.linear(x, state[f"{name}.weight"], state.get(f"{name}.bias"))


@torch.no_grad()
def reference_logits(state: dict, config: dict, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     slopes: list[float] | None = None) -> torch.Tensor:
    """MLM logits (B, L, V), or a classifier's logits (B, C) when ``state`` has one."""
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]
    hidden_size = config["hidden_size"]
    size = hidden_size // heads
    x = state["bert.embeddings.word_embeddings.weight"][input_ids] + state["bert.embeddings.token_type_embeddings.weight"][0]
    x = _norm(x, state, "bert.embeddings.LayerNorm", eps)
    length = input_ids.shape[1]
    distance = (torch.arange(length)[None, :] - torch.arange(length)[:, None]).abs()
    alibi = -torch.tensor(slopes or press_slopes(heads))[:, None, None] * distance  # (H, L, L)
    bias = alibi[None] + (1.0 - attention_mask[:, None, None, :].float()) * -10000.0  # (B, H, L, L)
    for i in range(config["num_hidden_layers"]):
        layer = f"bert.encoder.layer.{i}"
        qkv = _linear(x, state, f"{layer}.attention.self.Wqkv").view(*x.shape[:2], 3, heads, size)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # (B, H, L, D) each
        scores = q @ k.transpose(-1, -2) / math.sqrt(size) + bias
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
        x = _norm(_linear(context, state, f"{layer}.attention.output.dense") + x, state,
                  f"{layer}.attention.output.LayerNorm", eps)
        gated = _linear(x, state, f"{layer}.mlp.gated_layers")
        inner = config["intermediate_size"]
        mlp = F.gelu(gated[..., :inner]) * gated[..., inner:]
        x = _norm(_linear(mlp, state, f"{layer}.mlp.wo") + x, state, f"{layer}.mlp.layernorm", eps)
    if "classifier.weight" in state:
        pooled = torch.tanh(_linear(x[:, 0], state, "bert.pooler.dense"))
        return _linear(pooled, state, "classifier")
    h = F.gelu(_linear(x, state, "cls.predictions.transform.dense"))
    h = _norm(h, state, "cls.predictions.transform.LayerNorm", eps)
    return _linear(h, state, "cls.predictions.decoder")
