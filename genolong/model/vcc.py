"""VCC: VIP-token centric compression (Zeng et al. 2023, arXiv 2305.04241), as an encoder.

A few *VIP* tokens P, the ones whose outputs the task reads, stay uncompressed; every other token
(the part C) is compressed before each layer and the layer's update copied back after it, so a
compressed layer costs O(r) rows instead of O(n):

1. **VIP tokens** (§3.1): [CLS], a central window of ``vcc_central_vip_tokens`` tokens and the
   positions of ``vip_mask`` (for MLM the masked tokens).
2. **Warm-up** (§4): the first ``vcc_warmup_layers`` layers attend inside independent segments.
3. **Reordering** (eq. 6): a stable sort puts the VIPs first, ``[P; C]``, undone at the output.
4. **Compressed layers** (§3.2-§3.3, §4's two-resolution instance): C is cut into blocks of
   k = ``vcc_block_size`` tokens, a block's row its mean (eq. 13); the VIPs score the blocks with
   the layer's own W_Q, W_K (eq. 53); the h = ``vcc_fine_blocks`` best stay at token resolution;
   the *unchanged* layer runs on the r = n_p + h k + (nb - h) rows ``Z = [P; fine tokens; block
   means]``, ``log s`` added to the logit of a key that pools s tokens (D of Prop. 6.2); then
   (eq. 7, Prop. 6.3) VIP and fine tokens take their rows' outputs and every token of a pooled
   block adds that block's update, ``x_j <- x_j + (Z'_b - Z_b)``.

The residual form is the paper's X_new = S^+ gamma(S X) + X, exact for pre-LN layers; with
post-LN layers a pooled block's update is a difference of normalised outputs, an approximation
the paper does not discuss. Not done: the multi-resolution tree T(C) (§3.4; here C is
materialised in every layer, O(n N) extra memory-bound work) and the official code's random
exploration and straight-through scores (not in the paper): selection is a plain top-h.

Shapes: B = batch, L = tokens, N = hidden, H = heads, k = block size, nb = blocks of C,
n_p = VIP slots, R = n_p + nb k (the reordered sequence, with empty slots), r = compressed rows.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from genolong.attention.vcc import num_warmup_layers
from genolong.core.errors import UserError
from genolong.model.backbones import register_encoder
from genolong.model.encoder import Block, Encoder

log = logging.getLogger(__name__)


def default_vip_mask(attention_mask: torch.Tensor, num_central: int) -> torch.Tensor:
    """[CLS] (position 0) and the central ``num_central`` real tokens of each row: (B, L) bool
    among the real tokens of ``attention_mask`` (B, L) bool (right padding)."""
    batch, length = attention_mask.shape
    vip = torch.zeros(batch, length, dtype=torch.bool, device=attention_mask.device)
    vip[:, 0] = True
    if num_central:
        real = attention_mask.sum(dim=1, keepdim=True)  # (B, 1)
        start = ((real - num_central) // 2).clamp(min=0)
        position = torch.arange(length, device=attention_mask.device)
        vip |= (position >= start) & (position < start + num_central)
    return vip & attention_mask


@dataclass(frozen=True)
class VipLayout:
    """Where each token sits in the reordered sequence ``[P; C]`` of a batch (§3.1, eq. 6).

    Row ``b`` holds its VIPs in the first ``num_vip`` (n_p) slots, its other tokens after them,
    both in order, C padded to ``num_blocks * block_size`` (nb k) rows; slots without a token are
    *empty*. A row's blocks depend on its own tokens only (batching never changes them).

    Attributes:
        order: (B, R) int64, the original position held by each slot; L for an empty slot.
        inverse: (B, L) int64, the slot of each original position.
        real: (B, R) bool, the slot holds a real (non-padding) token.
    """

    order: torch.Tensor
    inverse: torch.Tensor
    real: torch.Tensor
    num_vip: int
    block_size: int

    @classmethod
    def build(cls, vip: torch.Tensor, attention_mask: torch.Tensor, block_size: int) -> VipLayout:
        """The layout for VIPs ``vip`` (B, L) bool among the real tokens ``attention_mask`` (B, L) bool."""
        batch, length = vip.shape
        device = vip.device
        vip = vip & attention_mask
        vips_per_row = vip.sum(dim=1, keepdim=True)  # (B, 1)
        num_vip = int(vips_per_row.max())
        num_blocks = math.ceil((length - int(vips_per_row.min())) / block_size)
        slots = num_vip + num_blocks * block_size
        # stable sort: each row's VIP positions first, then its other positions, both in order
        by_rank = torch.argsort((~vip).to(torch.int8), dim=1, stable=True)  # (B, L)
        rank = torch.arange(length, device=device).expand(batch, -1)
        slot = torch.where(rank < vips_per_row, rank, rank - vips_per_row + num_vip)  # (B, L)
        order = torch.full((batch, slots), length, dtype=torch.long, device=device)
        order.scatter_(1, slot, by_rank)
        inverse = torch.empty_like(by_rank).scatter_(1, by_rank, slot)
        real = F.pad(attention_mask, (0, 1), value=False).gather(1, order)  # (B, R)
        return cls(order, inverse, real, num_vip, block_size)

    @property
    def num_blocks(self) -> int:
        return (self.order.shape[1] - self.num_vip) // self.block_size

    @property
    def voters(self) -> torch.Tensor:
        """(B, n_p) bool: the VIP slots that hold a real VIP token (they score the blocks)."""
        return self.real[:, : self.num_vip]

    @property
    def block_tokens_real(self) -> torch.Tensor:
        """(B, nb, k) bool: which slots of each block of C hold a real token."""
        return self.real[:, self.num_vip :].view(-1, self.num_blocks, self.block_size)

    def reorder(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, N) in original order -> (B, R, N) as ``[P; C]``, empty slots zero."""
        x = F.pad(x, (0, 0, 0, 1))  # row L: the zero row of the empty slots
        return x.gather(1, self.order[..., None].expand(-1, -1, x.shape[-1]))

    def restore(self, x: torch.Tensor) -> torch.Tensor:
        """(B, R, N) as ``[P; C]`` -> (B, L, N) in original order."""
        return x.gather(1, self.inverse[..., None].expand(-1, -1, x.shape[-1]))


@dataclass(frozen=True)
class Compressed:
    """One layer's compressed input ``Z = [P; fine tokens; pooled block means]`` (§3.2, §4).

    Attributes:
        rows: (B, r, N) the rows Z, r = n_p + h k + (nb - h), h = ``num_fine`` (at most nb).
        key_bias: (B, r) float, ``log s`` per row (D of Prop. 6.2): 0 for a token, log of the
            number of real tokens for a block mean, -inf for an empty slot or empty block.
        block_order: (B, nb) int64, the pooled blocks then the fine blocks, each in order.
    """

    rows: torch.Tensor
    key_bias: torch.Tensor
    block_order: torch.Tensor
    num_fine: int


def block_means(x: torch.Tensor, layout: VipLayout) -> tuple[torch.Tensor, torch.Tensor]:
    """``(means, sizes)`` of the real tokens of each block of C (eq. 13) in x (B, R, N) ``[P; C]``:
    (B, nb, N) (zero for a block without real tokens) and (B, nb) int64 real-token counts."""
    batch, _, hidden = x.shape
    blocks = x[:, layout.num_vip :].view(batch, layout.num_blocks, layout.block_size, hidden)
    real = layout.block_tokens_real  # (B, nb, k)
    sizes = real.sum(dim=-1)  # (B, nb)
    means = (blocks * real[..., None]).sum(dim=2) / sizes.clamp(min=1)[..., None]
    return means, sizes


def block_scores(block: Block, vips: torch.Tensor, means: torch.Tensor, voters: torch.Tensor,
                 block_real: torch.Tensor) -> torch.Tensor:
    """How much the VIPs attend to each block (eq. 53 and §3.3), with ``block``'s own W_Q, W_K
    (and, for pre-LN, its LayerNorm): per head and VIP a softmax over the blocks of the logits from
    the VIP to the block means, averaged over heads and real VIPs.

    Shapes: vips (B, n_p, N); means (B, nb, N); voters (B, n_p) bool, the real VIPs; block_real
    (B, nb) bool -> (B, nb) scores in [0, 1], -inf for a block without real tokens.
    """
    batch, num_vip, hidden = vips.shape
    heads = block.num_heads
    dim = hidden // heads
    if block.pre_layer_norm:
        vips, means = block.attention_norm(vips), block.attention_norm(means)
    weight, bias = block.qkv.weight, block.qkv.bias  # rows [W_Q; W_K; W_V]
    q = F.linear(vips, weight[:hidden], bias[:hidden]).view(batch, num_vip, heads, dim).transpose(1, 2)
    k = F.linear(means, weight[hidden : 2 * hidden], bias[hidden : 2 * hidden])
    k = k.view(batch, -1, heads, dim).transpose(1, 2)  # (B, H, nb, D)
    weights = (voters / voters.sum(dim=1, keepdim=True).clamp(min=1)).to(q.dtype)  # (B, n_p)
    scores = torch.zeros(batch, k.shape[2], dtype=q.dtype, device=q.device)
    for head in range(heads):  # one head at a time: (B, n_p, nb) is large for MLM's many VIPs
        logits = (q[:, head] @ k[:, head].transpose(-1, -2)) / math.sqrt(dim)  # (B, n_p, nb)
        probabilities = logits.masked_fill(~block_real[:, None], -math.inf).softmax(dim=-1)
        scores += torch.einsum("bpn,bp->bn", probabilities, weights) / heads
    return scores.masked_fill(~block_real, -math.inf)


def compress(x: torch.Tensor, layout: VipLayout, means: torch.Tensor, sizes: torch.Tensor,
             scores: torch.Tensor, num_fine_blocks: int) -> Compressed:
    """The rows Z for one layer of x (B, R, N) ``[P; C]``: VIPs, the tokens of the top-h =
    ``num_fine_blocks`` blocks by ``scores`` (B, nb), the ``means`` (B, nb, N) of the others."""
    batch, _, hidden = x.shape
    n_p, k, num_blocks = layout.num_vip, layout.block_size, layout.num_blocks
    h = min(num_fine_blocks, num_blocks)
    is_fine = torch.zeros(batch, num_blocks, dtype=torch.bool, device=x.device)
    is_fine.scatter_(1, scores.topk(h, dim=1).indices, True)
    block_order = torch.argsort(is_fine.to(torch.int8), dim=1, stable=True)  # pooled, then fine
    pooled, fine = block_order[:, : num_blocks - h], block_order[:, num_blocks - h :]

    blocks = x[:, n_p:].view(batch, num_blocks, k, hidden)
    fine_tokens = blocks.gather(1, fine[..., None, None].expand(-1, -1, k, hidden))
    fine_tokens = fine_tokens.reshape(batch, h * k, hidden)
    pooled_means = means.gather(1, pooled[..., None].expand(-1, -1, hidden))  # (B, nb - h, N)
    rows = torch.cat([x[:, :n_p], fine_tokens, pooled_means], dim=1)

    fine_real = layout.block_tokens_real.gather(1, fine[..., None].expand(-1, -1, k)).reshape(batch, h * k)
    token_real = torch.cat([layout.voters, fine_real], dim=1)
    token_bias = torch.zeros(token_real.shape, dtype=x.dtype, device=x.device)
    token_bias = token_bias.masked_fill(~token_real, -math.inf)
    pooled_bias = sizes.gather(1, pooled).to(x.dtype).log()  # log s; log 0 = -inf for an empty block
    return Compressed(rows, torch.cat([token_bias, pooled_bias], dim=1), block_order, h)


def decompress(x: torch.Tensor, layout: VipLayout, compressed: Compressed,
               new_rows: torch.Tensor) -> torch.Tensor:
    """x (B, R, N) after the layer whose outputs on ``compressed.rows`` are ``new_rows`` (B, r, N):
    each token plus its row's update, x_j + (Z'_row(j) - Z_row(j)) (eq. 7, Prop. 6.3); VIP and
    fine tokens, their own rows, become the layer's outputs."""
    batch, _, hidden = x.shape
    n_p, k, num_blocks, h = layout.num_vip, layout.block_size, layout.num_blocks, compressed.num_fine
    update = new_rows - compressed.rows  # (B, r, N)
    fine_update = update[:, n_p : n_p + h * k].view(batch, h, k, hidden)
    pooled_update = update[:, n_p + h * k :, None].expand(-1, -1, k, -1)  # (B, nb - h, k, N)
    by_block_order = torch.cat([pooled_update, fine_update], dim=1)  # (B, nb, k, N), in block_order
    unsort = torch.argsort(compressed.block_order, dim=1)
    block_update = by_block_order.gather(1, unsort[..., None, None].expand(-1, -1, k, hidden))
    rest = x[:, n_p:] + block_update.reshape(batch, num_blocks * k, hidden)
    return torch.cat([new_rows[:, :n_p], rest], dim=1)


@register_encoder("vcc")
class VCCEncoder(Encoder):
    """The genolong encoder with VCC's compressed layers. Its parameters are exactly the
    :class:`~genolong.model.encoder.Encoder`'s (§3.3), so a pre-LN checkpoint of another backbone
    loads for continued pretraining, as the paper does from RoBERTa (§4).

    Shapes: input_ids (B, L) int64; attention_mask (B, L) or None (right padding; the first token
    of each row must be real); vip_mask (B, L) bool or None; output (B, L, N).
    """

    def __init__(self, config: Any):
        super().__init__(config)
        self.num_warmup_layers = num_warmup_layers(config)
        self.block_size = config.vcc_block_size
        self.num_fine_blocks = config.vcc_fine_blocks
        self.num_central_vip_tokens = config.vcc_central_vip_tokens
        if not config.pre_layer_norm and self.num_warmup_layers < config.num_hidden_layers:
            log.warning("vcc with post-LN layers: a pooled block's update is a difference of normalised "
                        "outputs, an approximation beyond the paper's; pre_layer_norm=True gives its exact "
                        "residual form")

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                vip_mask: torch.Tensor | None = None) -> torch.Tensor:
        batch, length = input_ids.shape
        self.check_length(length)
        real = attention_mask.bool() if attention_mask is not None else input_ids.new_ones(
            batch, length, dtype=torch.bool)
        if not bool(real[:, 0].all()):
            raise UserError("vcc: every row must start with a real token ([CLS]); put the padding at the end")
        vip = default_vip_mask(real, self.num_central_vip_tokens)
        if vip_mask is not None:
            if vip_mask.shape != input_ids.shape:
                raise UserError(f"vcc: vip_mask has shape {tuple(vip_mask.shape)}, input_ids "
                                f"{tuple(input_ids.shape)}")
            vip |= vip_mask.bool() & real
        x = self.embeddings(input_ids, real)  # (B, L, N)
        for block in self.blocks[: self.num_warmup_layers]:
            x = self.run_block(block, x, real)
        if self.num_warmup_layers < len(self.blocks):
            layout = VipLayout.build(vip, real, self.block_size)
            x = layout.reorder(x)  # (B, R, N)
            for block in self.blocks[self.num_warmup_layers :]:
                means, sizes = block_means(x, layout)
                with torch.no_grad():  # the choice of blocks is discrete: no gradient
                    scores = block_scores(block, x[:, : layout.num_vip], means, layout.voters, sizes > 0)
                compressed = compress(x, layout, means, sizes, scores, self.num_fine_blocks)
                new_rows = self.run_block(block, compressed.rows, compressed.key_bias)
                x = decompress(x, layout, compressed, new_rows)
            x = layout.restore(x)  # (B, L, N)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x
