"""SLED: sliding-window encoding with a short-context encoder (Ivgi, Shaham & Berant 2022,
arXiv 2208.00748), for an encoder-only model.

SLED assumes "information locality" (§3): a token is well contextualised by its neighbours, and
what crosses long distances can be fused afterwards. So the input is cut into overlapping chunks
of c = ``sled_chunk_size`` tokens (:func:`sled_windows`, §3 and App. A); every chunk is encoded
independently by the same short encoder (positions restarting in each chunk; optionally after
``sled_prefix_tokens`` learned prefix tokens, §3 step (b)); each token keeps
its vector from the one chunk where it lies in the middle (§3 step (d)), one vector per input
token, in order. The paper fuses them with a pretrained decoder; an encoder-only classifier uses
:class:`SledFusion` instead (by default a learned query cross-attending to every kept vector).
MLM predicts each masked token from its kept vector. The parameters are the plain
:class:`~genolong.model.encoder.Encoder`'s (and the prefix tokens), so a short ``full``
checkpoint loads unchanged.

Shapes: B = batch, L = tokens, N = hidden, T = chunks of the batch, c = chunk length.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from genolong.core.errors import UserError
from genolong.model.backbones import register_encoder, register_pooling
from genolong.model.encoder import Encoder, FeedForward
from genolong.model.heads import pool_tokens


def sled_windows(length: int, chunk_size: int, context_padding: float) -> list[tuple[int, int, int, int]]:
    """SLED's chunks of n = ``length`` tokens (§3 and App. A): ``(start, end, keep_start, keep_end)``
    per chunk, 0-based half-open; 1 + ceil((n - c) / (c - 2P)) chunks for n > c, one for 0 < n <= c.

    Chunks have c = ``chunk_size`` tokens, P = floor(alpha c / 2) (alpha = ``context_padding`` in
    [0, 0.5]) at each side context only; the first keeps from token 0, the last is ``[n - c, n)``
    and keeps all after the previous kept span: the kept spans cover every token once, in order.
    """
    if length <= chunk_size:
        return [(0, length, 0, length)] if length else []
    pad = int(context_padding * chunk_size / 2)
    stride = chunk_size - 2 * pad
    windows = [(0, chunk_size, 0, chunk_size - pad)]
    start, kept_until = 0, chunk_size - pad
    while start + chunk_size < length:
        if start + stride + chunk_size >= length:
            windows.append((length - chunk_size, length, kept_until, length))
            break
        start += stride
        windows.append((start, start + chunk_size, kept_until, start + chunk_size - pad))
        kept_until = start + chunk_size - pad
    return windows


@register_encoder("sled")
class SledEncoder(Encoder):
    """The genolong encoder applied to SLED's chunks: inputs of any length, chunks planned per
    row from its real length (padding and batching never change them).

    Shapes: input_ids (B, L) int64; attention_mask (B, L) or None (right padding); output
    (B, L, N), one kept vector per token (zeros at padding).
    """

    def __init__(self, config: Any):
        super().__init__(config)
        self.chunk_size = config.sled_chunk_size
        self.context_padding = config.sled_context_padding
        self.chunks_per_call = config.sled_chunks_per_call

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        batch, length = input_ids.shape
        device = input_ids.device
        position = torch.arange(length, device=device)
        lengths = torch.full((batch,), length, device=device)
        if attention_mask is not None:
            lengths = attention_mask.bool().sum(dim=1)
            if not torch.equal(attention_mask.bool(), position < lengths[:, None]) or not bool(lengths.all()):
                raise UserError("sled: attention_mask must mark a run of real tokens followed by padding, in "
                                "every row")
        rows, chunk_positions, chunk_real, keep_index = self.plan_chunks(lengths, length)
        chunk_ids = input_ids[rows[:, None], chunk_positions.clamp(max=length - 1)]  # (T, c)
        chunk_ids = chunk_ids.masked_fill(~chunk_real, self.pad_token_id)
        encoded = self.encode_chunks(chunk_ids, chunk_real)  # (T, c, N)
        kept = encoded.reshape(-1, encoded.shape[-1])[keep_index]  # (B, L, N)
        return kept * (position < lengths[:, None])[..., None].to(kept.dtype)

    def plan_chunks(self, lengths: torch.Tensor, length: int) -> tuple[torch.Tensor, ...]:
        """Every row's chunks (:func:`sled_windows` of its real length, ``lengths`` (B,)), stacked:
        ``(rows, positions, real, keep_index)``, (T,) the row of each chunk; (T, c) the input
        position of each chunk slot, c = min(chunk size, L); (T, c) bool, the slot is inside its
        chunk; (B, L) int64, the flat index ``chunk * c + slot`` each token keeps (0 at padding)."""
        chunk_length = min(self.chunk_size, length)
        rows, starts, ends = [], [], []
        keep_index = torch.zeros(len(lengths), length, dtype=torch.long)
        for row, n in enumerate(lengths.tolist()):
            for start, end, keep_start, keep_end in sled_windows(n, self.chunk_size, self.context_padding):
                kept = torch.arange(keep_start, keep_end)
                keep_index[row, keep_start:keep_end] = len(starts) * chunk_length + kept - start
                rows.append(row)
                starts.append(start)
                ends.append(end)
        device = lengths.device
        positions = torch.tensor(starts, device=device)[:, None] + torch.arange(chunk_length, device=device)
        real = positions < torch.tensor(ends, device=device)[:, None]
        return torch.tensor(rows, device=device), positions, real, keep_index.to(device)

    def encode_chunks(self, chunk_ids: torch.Tensor, chunk_real: torch.Tensor) -> torch.Tensor:
        """The plain encoder on chunks, ``sled_chunks_per_call`` at a time: (T, c) -> (T, c, N)."""
        per_call = self.chunks_per_call or len(chunk_ids)
        outputs = []
        for first in range(0, len(chunk_ids), per_call):
            real = chunk_real[first : first + per_call]
            outputs.append(super().forward(chunk_ids[first : first + per_call], None if real.all() else real))
        return torch.cat(outputs)


@register_pooling("sled")
class SledFusion(nn.Module):
    """Fuses SLED's kept token vectors into one for a classifier, by ``sled_fusion``:
    ``"attention"`` (default), a learned query cross-attends (multi-head, pre-LN) to every kept
    vector, then a residual feed-forward and a LayerNorm, at O(L N); ``"mean"`` / ``"max"`` over
    the real tokens; ``"cls"``, the first token's vector. Shapes: hidden (B, L, N); attention_mask
    (B, L) or None; output (B, 1, N), read as the [CLS] row by the classifier."""

    def __init__(self, config: Any):
        super().__init__()
        self.mode = config.sled_fusion
        self.num_heads = config.num_attention_heads
        hidden = config.hidden_size
        if self.mode == "attention":
            self.query = nn.Parameter(torch.zeros(1, 1, hidden))
            self.key_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
            self.q = nn.Linear(hidden, hidden)
            self.kv = nn.Linear(hidden, 2 * hidden)
            self.out = nn.Linear(hidden, hidden)
            self.feed_forward_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
            self.feed_forward = FeedForward(config)
            self.norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
            self.dropout = nn.Dropout(config.hidden_dropout_prob)
            self.attention_dropout = config.attention_probs_dropout_prob

    def init_learned_vectors(self, std: float) -> None:
        """Draw the learned query, if any, from N(0, std)."""
        if self.mode == "attention":
            nn.init.normal_(self.query, mean=0.0, std=std)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.mode != "attention":
            return pool_tokens(hidden, attention_mask, self.mode)
        return self.cross_attend(hidden, None if attention_mask is None else attention_mask.bool())

    def cross_attend(self, hidden: torch.Tensor, real: torch.Tensor | None) -> torch.Tensor:
        """The learned query's cross-attention block: (B, L, N) -> (B, 1, N)."""
        batch, length, size = hidden.shape
        dim = size // self.num_heads
        # (B, L, 2N) -> (B, L, 2, H, D) -> (2, B, H, L, D)
        k, v = self.kv(self.key_norm(hidden)).view(batch, length, 2, self.num_heads, dim).permute(
            2, 0, 3, 1, 4)
        q = self.q(self.query).view(1, 1, self.num_heads, dim).transpose(1, 2).expand(batch, -1, -1, -1)
        mask = None if real is None else real[:, None, None, :]  # (B, 1, 1, L)
        dropout = self.attention_dropout if self.training else 0.0
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)  # (B, H, 1, D)
        fused = self.query + self.dropout(self.out(context.transpose(1, 2).reshape(batch, 1, size)))
        fused = fused + self.dropout(self.feed_forward(self.feed_forward_norm(fused)))
        return self.norm(fused)
