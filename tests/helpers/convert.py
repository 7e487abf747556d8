"""Source checkpoints for the conversion tests: GENA-LM's real configs scaled down, random
weights, saved the way published checkpoints are (config.json, pytorch_model.bin or
model.safetensors, tokenizer files), and a per-layer comparison of two models' hidden states."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import torch

#: The scaled-down size of every test source: the real configs with fewer, narrower layers.
SMALL = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64}
GENA_TOKENIZER = ("tokenizer_config.json", "special_tokens_map.json")  # and tokenizer.json, stored as .xz


def gena_config(real_data: Path, name: str, **overrides) -> dict:
    """GENA-LM's config ``name`` (checkpoints/gena_lm/configs) with ``SMALL`` and ``overrides``."""
    config = json.loads((real_data / "checkpoints" / "gena_lm" / "configs" / name).read_text())
    return config | SMALL | overrides


def copy_gena_tokenizer(real_data: Path, out: Path) -> None:
    """GENA-LM's tokenizer files, unchanged (tokenizer.json decompressed from tests/data's .xz copy)."""
    source = real_data / "checkpoints" / "gena_lm" / "tokenizer_t2t_1000h_multi_32k"
    for name in GENA_TOKENIZER:
        shutil.copy(source / name, out / name)
    (out / "tokenizer.json").write_bytes(lzma.decompress((source / "tokenizer.json.xz").read_bytes()))


@torch.no_grad()
def randomize(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random weights everywhere, LayerNorms included (their init is the identity), in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    for name, parameter in model.named_parameters():
        noise = torch.randn(parameter.shape, generator=generator) * 0.1
        parameter.copy_(noise + 1.0 if "LayerNorm.weight" in name or "layer_norm.weight" in name else noise)
    return model.eval()


def save_source(out: Path, config: dict, state: dict[str, torch.Tensor], *, safetensors: bool) -> Path:
    """A checkpoint directory: config.json and the weights as model.safetensors or pytorch_model.bin."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    state = {name: tensor.clone().contiguous() for name, tensor in state.items()}  # no shared storage
    if safetensors:
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    else:
        torch.save(state, out / "pytorch_model.bin")
    return out


def token_batch(
    lengths: list[int], vocab: int, seed: int = 0, special: tuple[int, int, int] = (1, 2, 3)
) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] random tokens [SEP], right-padded: input_ids and attention_mask (B, max length).
    ``special`` = the ids of [CLS], [SEP] and [PAD] (GENA-LM's by default)."""
    cls, sep, pad = special
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, :length] = torch.randint(max(special) + 1, vocab, (length,), generator=generator)
        ids[row, 0], ids[row, length - 1] = cls, sep
        mask[row, :length] = 1
    return ids, mask


@torch.no_grad()
def genolong_hidden_states(model, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """Logits (B, L, V) and the hidden states (B, L, N) after the embeddings and after every
    layer of a GenolongForMaskedLM, the last one after the final LayerNorm when there is one."""
    encoder = model.genolong.encoder
    captured = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: captured.append(out)) for m in (encoder.embeddings, *encoder.blocks)]
    try:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    finally:
        for hook in hooks:
            hook.remove()
    if encoder.final_norm is not None:
        captured[-1] = encoder.final_norm(captured[-1])
    return logits, [h[:, : input_ids.shape[1]] for h in captured]


def assert_same_outputs(ours, theirs, attention_mask: torch.Tensor, tolerance: float = 1e-4) -> float:
    """Max abs difference of logits and of every layer's hidden states at real tokens; asserts <= tolerance."""
    (our_logits, our_states), (their_logits, their_states) = ours, theirs
    assert len(our_states) == len(their_states)
    real = attention_mask.bool()
    worst = (our_logits[real] - their_logits[real]).abs().max().item()
    assert worst <= tolerance, f"logits differ by {worst:.2e}"
    for layer, (a, b) in enumerate(zip(our_states, their_states, strict=True)):
        difference = (a[real] - b[: a.shape[0], : a.shape[1]][real]).abs().max().item()
        assert difference <= tolerance, f"hidden state {layer} differs by {difference:.2e}"
    return worst
