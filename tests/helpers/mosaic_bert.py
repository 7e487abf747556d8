"""DNABERT-2 checkpoints for the conversion tests: the hub's real config scaled down, its real
tokenizer and random weights, saved as the hub saves them; the oracle is the plain PyTorch
implementation of the published architecture in :mod:`genolong.experiments.bench.mosaic_bert`."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import torch

from genolong.experiments.bench.mosaic_bert import MosaicBertReference, press_slopes
from helpers.convert import randomize, save_source

#: DNABERT-2's real config.json scaled down: 12 heads as the real model (not a power of two, so the
#: interleaved slopes are used), head size 4.
SMALL = {"hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 12, "intermediate_size": 64}

__all__ = ["SMALL", "press_slopes", "reference_logits", "write_checkpoint"]


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
    state = randomize(MosaicBertReference(config, num_labels), seed).state_dict()
    save_source(out, config, state, safetensors=False)
    shutil.copy(hub / "tokenizer_config.json", out / "tokenizer_config.json")
    (out / "tokenizer.json").write_bytes(lzma.decompress((hub / "tokenizer.json.xz").read_bytes()))
    return config, state


@torch.no_grad()
def reference_logits(state: dict, config: dict, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     slopes: list[float] | None = None) -> torch.Tensor:
    """The oracle's masked-LM logits (B, L, V), or a classifier's (B, C) when ``state`` has one."""
    num_labels = state["classifier.weight"].shape[0] if "classifier.weight" in state else None
    model = MosaicBertReference(config, num_labels)
    model.load_state_dict(state)
    if slopes is not None:
        model.slopes = slopes
    return model.eval()(input_ids, attention_mask).logits
