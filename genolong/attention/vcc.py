"""The attention of VCC's layers (Zeng et al. 2023, "VCC: Scaling Transformers to 128K Tokens or
More by Prioritizing Important Tokens", arXiv 2305.04241).

VCC is a *layer* type: :class:`genolong.model.vcc.VCCEncoder` compresses the sequence before each of
its layers and decompresses the layer's update after it. Its layers run two attentions:

* **warm-up layers** (the first ``vcc_warmup_layers``, §4): vanilla attention inside independent
  segments of ``vcc_warmup_window`` tokens (the paper: 4 of 12 layers, 512-token segments);
* **compressed layers**: dense softmax attention over the compressed rows ``[P; S_c C]``, with a float
  *key bias* instead of the padding mask: ``log s`` for a row that pools ``s`` tokens (the matrix D of
  Prop. 6.2, so it counts ``s`` times in the softmax), 0 for a single token, ``-inf`` for padding.

Built by the plain :class:`~genolong.model.encoder.Encoder`, the same layers give VCC's uncompressed
reference (warm-up segments, then dense attention over all tokens), which the tests compare against.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from genolong.attention import register_attention
from genolong.attention.base import Attention, require_int
from genolong.core.errors import ConfigError
from genolong.core.values import is_integer

#: Query rows per piece of :func:`dropout_attention`.
DROPOUT_QUERY_CHUNK = 1024


def num_warmup_layers(config: Any) -> int:
    """``vcc_warmup_layers``, or when it is None a third of the layers (the paper's 4 of 12, §4)."""
    warmup = config.vcc_warmup_layers
    return round(config.num_hidden_layers / 3) if warmup is None else warmup


def windowed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, padding_mask: torch.Tensor | None,
                       window: int, dropout: float) -> torch.Tensor:
    """Dense attention inside independent segments of ``window`` tokens (VCC's warm-up, §4).

    The sequence is right-padded to a multiple of ``window`` with masked keys; a segment of padding only
    attends within itself unmasked, so that no softmax row is empty.

    Shapes: q, k, v (B, H, L, D); padding_mask (B, L) bool, True = real, or None; out (B, H, L, D).
    """
    batch, heads, length, dim = q.shape
    padding = -length % window
    if padding:
        q, k, v = (F.pad(t, (0, 0, 0, padding)) for t in (q, k, v))
        if padding_mask is None:
            padding_mask = torch.ones(batch, length, dtype=torch.bool, device=q.device)
        padding_mask = F.pad(padding_mask, (0, padding), value=False)
    segments = (length + padding) // window
    # (B, H, S * W, D) -> (B, H * S, W, D): one attention problem per head and segment
    q, k, v = (t.reshape(batch, heads * segments, window, dim) for t in (q, k, v))
    mask = None
    if padding_mask is not None:
        mask = padding_mask.view(batch, segments, window)
        mask = mask | ~mask.any(dim=-1, keepdim=True)  # all-padding segments: unmasked
        mask = mask[:, None].expand(batch, heads, segments, window)
        mask = mask.reshape(batch, heads * segments, 1, window)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
    return out.view(batch, heads, segments * window, dim)[:, :, :length]


def dropout_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None,
                      dropout: float) -> torch.Tensor:
    """Dense attention with dropout in O(chunk x L) memory under autograd on CPU.

    ``scaled_dot_product_attention``'s CPU math kernel (the only one with dropout) keeps (B, H, L, L)
    probabilities for the backward pass, 1 GB per layer at L = 8K. Here the queries go in pieces of
    ``DROPOUT_QUERY_CHUNK`` rows, each recomputed in the backward pass (``checkpoint`` restores the RNG
    state, so with the same dropout mask).

    Shapes: q (B, H, Lq, D); k, v (B, H, L, D); key_mask (B, 1, 1, L) bool or float, or None.
    """
    pieces = [checkpoint(F.scaled_dot_product_attention, q[:, :, first : first + DROPOUT_QUERY_CHUNK], k, v,
                         attn_mask=key_mask, dropout_p=dropout, use_reentrant=False)
              for first in range(0, q.shape[2], DROPOUT_QUERY_CHUNK)]
    return torch.cat(pieces, dim=2)


@register_attention("vcc")
class VCCAttention(Attention):
    """Segment-local attention in warm-up layers, dense attention with a key bias after them.

    Shapes: q, k, v (B, H, L, D); ``padding_mask`` (B, L) is either bool (True = real token) or,
    from the compressed layers, a float key bias added to the attention logits; out (B, H, L, D).

    Parameters (``GenolongConfig`` fields; defaults from the paper, §4 and Table 3):

    * ``vcc_block_size`` k = 16: tokens per block of the compressed part C;
    * ``vcc_fine_blocks`` h = 90: blocks kept at token resolution in each compressed layer;
    * ``vcc_warmup_layers`` = None: uncompressed warm-up layers (None: a third of the layers, 4 of 12);
    * ``vcc_warmup_window`` = 512: segment length of the warm-up layers;
    * ``vcc_central_vip_tokens`` = 0: a window of this many tokens at the centre of each sequence is
      VIP besides [CLS] (chromatin profiles: the label is about the central 200 bp).

    No global tokens ([CLS] is a VIP token) and any length (padded internally); a masked-LM model
    passes its masked tokens as VIPs (§3.1).
    """

    config_defaults: dict[str, Any] = {"vcc_block_size": 16, "vcc_fine_blocks": 90, "vcc_warmup_layers": None,
                                       "vcc_warmup_window": 512, "vcc_central_vip_tokens": 0}
    masked_tokens_input = "vip_mask"
    #: the compressed layers reorder and pool tokens, which rotary and ALiBi positions do not follow
    position_types = ("absolute",)

    def __init__(self, config: Any, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.window = config.vcc_warmup_window if layer_idx < num_warmup_layers(config) else None

    @classmethod
    def validate_config(cls, config: Any) -> None:
        """k >= 1, h >= 0, a window >= 1, 0 <= warm-up layers <= layers, central VIPs >= 0."""
        minimums = {"vcc_block_size": 1, "vcc_fine_blocks": 0, "vcc_warmup_window": 1,
                    "vcc_central_vip_tokens": 0}
        for name, minimum in minimums.items():
            require_int(config, name, minimum, "vcc")
        warmup = config.vcc_warmup_layers
        if warmup is not None and not is_integer(warmup, 0, config.num_hidden_layers):
            raise ConfigError(f"vcc: vcc_warmup_layers must be None or an integer in [0, num_hidden_layers="
                              f"{config.num_hidden_layers}], got {warmup!r}")

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        dropout = self.dropout if self.training else 0.0
        if self.window is not None:
            return windowed_attention(q, k, v, padding_mask, self.window, dropout)
        mask = None
        if padding_mask is not None:
            mask = padding_mask[:, None, None, :]  # (B, 1, 1, L)
            if mask.is_floating_point():
                mask = mask.to(q.dtype)
        if dropout and q.device.type == "cpu" and torch.is_grad_enabled():
            return dropout_attention(q, k, v, mask, dropout)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
