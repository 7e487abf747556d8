"""ModernBERT sources for the conversion tests: modernGENA's config (../shared/refs/moderngena/
PROVENANCE.md) scaled down, random weights, saved by transformers' own ``save_pretrained``
beside GENA-LM's tokenizer (32,000 tokens under an embedding of 32,768 rows, as modernGENA's)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification

from helpers.convert import copy_gena_tokenizer

#: modernGENA-base's settings, with 4 layers of hidden 64 (4 heads) and an 8-token local window.
MODERNGENA_SMALL = {
    "vocab_size": 32768, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
    "intermediate_size": 96, "max_position_embeddings": 1024, "local_attention": 8,
    "global_attn_every_n_layers": 3, "global_rope_theta": 10000.0, "local_rope_theta": 10000.0,
    "hidden_activation": "gelu", "classifier_activation": "silu", "classifier_bias": False, "norm_bias": False,
    "norm_eps": 1e-5, "attention_bias": False, "mlp_bias": False, "decoder_bias": True, "tie_word_embeddings": True,
    "pad_token_id": 3, "cls_token_id": 1, "sep_token_id": 2, "bos_token_id": 50281, "eos_token_id": 50282,
}
GENA_TOKENS = 32000


@torch.no_grad()
def randomize_modernbert(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random weights everywhere, norms around 1, in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    for name, parameter in model.named_parameters():
        noise = torch.randn(parameter.shape, generator=generator) * 0.1
        parameter.copy_(noise + 1.0 if name.endswith("norm.weight") else noise)
    return model.eval()


def moderngena_source(out: Path, real_data: Path, classifier: bool = False, attention: str = "sdpa",
                      **overrides) -> torch.nn.Module:
    """A ModernBertForMaskedLM (or, ``classifier``, ModernBertForSequenceClassification) with
    :data:`MODERNGENA_SMALL` and ``overrides``, saved to ``out`` with GENA-LM's tokenizer."""
    config = ModernBertConfig(**(MODERNGENA_SMALL | overrides), attn_implementation=attention)
    model_class = ModernBertForSequenceClassification if classifier else ModernBertForMaskedLM
    model = randomize_modernbert(model_class(config))
    model.save_pretrained(str(out))
    copy_gena_tokenizer(real_data, out)
    return model
