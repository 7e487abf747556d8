"""The encoder shared by every backbone: embeddings, one Block, the stack.

The attention, what varies between backbones, is built from the registry
(:func:`genolong.attention.build_attention`); backbones that also reorder or cut the sequence
subclass :class:`Encoder` (:mod:`genolong.model.sled`, :mod:`genolong.model.vcc`). ``config`` is a
:class:`~genolong.model.configuration.GenolongConfig` or any object with the same fields.

Shapes: B = batch, L = tokens, N = hidden size, H = heads, D = N / H, G = extra global tokens.
input_ids (B, L) int64, attention_mask (B, L) 1/True = real token; hidden states (B, L, N);
inside the attention q, k, v are (B, H, L', D), L' = G + L padded to the ``length_multiple``.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from genolong.attention import attention_class, build_attention, layer_backbone
from genolong.core.errors import UserError
from genolong.model.rotary import RotaryEmbedding

#: Activation functions by their ``config.hidden_act`` name.
ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


class Embeddings(nn.Module):
    """Token + learned absolute position embeddings (no table with rotary or ALiBi positions),
    LayerNorm (unless ``config.embedding_layer_norm`` is False, as in ESM) and dropout.

    With ``config.local_conv_kernel = K`` (odd), ``t + gelu(conv(t))`` over the token embeddings
    (padding rows zeroed first) before the positions: N motif detectors of K bp at every
    position, the convolutional stem of DNA models (DeepSEA, Basenji, Enformer; Avsec et al. 2021).

    Shapes: input_ids (B, L), padding_mask (B, L) bool True = real token or None -> (B, L, N).
    """

    def __init__(self, config: Any):
        super().__init__()
        self.token = nn.Embedding(config.vocab_size, config.hidden_size)
        kernel = getattr(config, "local_conv_kernel", None)
        self.local_conv = (
            nn.Conv1d(config.hidden_size, config.hidden_size, kernel, padding=kernel // 2) if kernel else None
        )
        absolute = getattr(config, "position_embedding_type", "absolute") == "absolute"
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size) if absolute else None
        self.norm = layer_norm(config) if getattr(config, "embedding_layer_norm", True) else nn.Identity()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        tokens = self.token(input_ids)  # (B, L, N)
        if self.local_conv is not None:
            real = tokens if padding_mask is None else tokens * padding_mask.unsqueeze(-1).to(tokens.dtype)
            tokens = tokens + F.gelu(self.local_conv(real.transpose(1, 2))).transpose(1, 2)
        if self.position is not None:
            tokens = tokens + self.position(torch.arange(input_ids.shape[1], device=input_ids.device))
        return self.dropout(self.norm(tokens))


class FeedForward(nn.Module):
    """Position-wise MLP, (..., N) -> (..., N) through I = ``intermediate_size`` features:
    ``down(act(up(x)))``, or with ``config.gated_feed_forward`` (GLU variants, Shazeer 2020: GeGLU,
    SwiGLU) ``down(act(u1) * u2)`` with ``up`` giving 2 I features ``[u1; u2]``."""

    def __init__(self, config: Any):
        super().__init__()
        self.gated = bool(getattr(config, "gated_feed_forward", False))
        width = config.intermediate_size * (2 if self.gated else 1)
        self.up = nn.Linear(config.hidden_size, width, bias=getattr(config, "mlp_in_bias", True))
        self.down = nn.Linear(config.intermediate_size, config.hidden_size, bias=getattr(config, "mlp_out_bias", True))
        self.activation = ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.gated:
            return self.down(self.activation(self.up(x)))
        gate, value = self.up(x).chunk(2, dim=-1)
        return self.down(self.activation(gate) * value)


class Block(nn.Module):
    """One transformer layer: attention and feed-forward, each with a residual and a LayerNorm,
    post-LN ``x = norm(x + f(x))`` (BERT, BigBird) or with ``config.pre_layer_norm``
    ``x = x + f(norm(x))`` (GENA-LM); ``first_layer_attention_norm`` False: no norm before
    layer 0's attention (ModernBERT). Rotary queries and keys: :func:`layer_rotary`.

    Shapes: x (B, L, N); padding_mask (B, L) bool, True = real, or None; output (B, L, N).
    """

    def __init__(self, config: Any, layer_idx: int):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.pre_layer_norm = config.pre_layer_norm
        bias = getattr(config, "attention_bias", True)
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=bias)
        self.attention = build_attention(config, layer_idx)
        self.rotary = layer_rotary(config, layer_idx)
        self.out = nn.Linear(config.hidden_size, config.hidden_size, bias=bias)
        self.feed_forward = FeedForward(config)
        skip = layer_idx == 0 and config.pre_layer_norm and not getattr(config, "first_layer_attention_norm", True)
        self.attention_norm = nn.Identity() if skip else layer_norm(config)
        self.feed_forward_norm = layer_norm(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def attend(self, x: torch.Tensor, padding_mask: torch.Tensor | None, queries: int | None = None) -> torch.Tensor:
        """Multi-head self-attention, (B, L, N) -> (B, Q, N) for the first Q = ``queries`` tokens
        (default all L); keys and values are always all L tokens."""
        batch, length, hidden = x.shape
        # (B, L, 3N) -> (B, L, 3, H, D) -> (3, B, H, L, D)
        qkv = self.qkv(x).view(batch, length, 3, self.num_heads, hidden // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        if queries is not None:
            q = q[:, :, :queries]  # (B, H, Q, D)
        if self.rotary is not None:
            q, k = self.rotary(q, k, self.attention.num_prepended)
        context = self.attention(q, k, v, padding_mask)  # (B, H, Q, D)
        return self.out(context.transpose(1, 2).reshape(batch, q.shape[2], hidden))

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None,
                queries: int | None = None) -> torch.Tensor:
        """(B, L, N) -> (B, Q, N): the outputs of the first ``queries`` tokens (default all; a
        subset only for attentions that accept one, ``full``)."""
        residual = x if queries is None else x[:, :queries]
        if self.pre_layer_norm:
            x = residual + self.dropout(self.attend(self.attention_norm(x), padding_mask, queries))
            return x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))
        x = self.attention_norm(residual + self.dropout(self.attend(x, padding_mask, queries)))
        return self.feed_forward_norm(x + self.dropout(self.feed_forward(x)))


class Encoder(nn.Module):
    """Embeddings, ``num_hidden_layers`` Blocks and a final LayerNorm (``config.final_layer_norm``;
    None: with pre-LN only). Shapes: input_ids (B, L); attention_mask (B, L) or None -> (B, L, N).

    The attention class asks for G = ``num_extra_global_tokens(config)`` learned global tokens
    (BigBird ETC, LSG), prepended to the embedded sequence and stripped from the output, and a
    ``length_multiple(config)`` M: the input is right-padded (masked) to a multiple of M and the
    output cut back.
    """

    def __init__(self, config: Any):
        super().__init__()
        attention = attention_class(config.backbone)
        self.length_multiple = attention.length_multiple(config)
        self.pad_token_id = config.pad_token_id if config.pad_token_id is not None else 0
        self.max_length = int(config.max_position_embeddings)
        self.embeddings = Embeddings(config)
        num_global = attention.num_extra_global_tokens(config)
        self.global_tokens = nn.Parameter(torch.zeros(num_global, config.hidden_size)) if num_global else None
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.num_hidden_layers))
        final = getattr(config, "final_layer_norm", None)  # None: with pre-LN only
        self.final_norm = layer_norm(config) if (config.pre_layer_norm if final is None else final) else None
        self.gradient_checkpointing = False
        self._gradient_checkpointing_func = functools.partial(checkpoint, use_reentrant=False)

    def init_learned_vectors(self, std: float) -> None:
        """Draw the prepended global tokens, if any, from N(0, std)."""
        if self.global_tokens is not None:
            nn.init.normal_(self.global_tokens, mean=0.0, std=std)

    def check_length(self, length: int) -> None:
        """Refuse an input longer than ``max_position_embeddings`` (UserError)."""
        if length > self.max_length:
            raise UserError(f"input of {length} tokens is longer than max_position_embeddings="
                            f"{self.max_length}", hint="cut the input into windows or use a model trained on "
                            "longer inputs")

    @property
    def supports_first_token_only(self) -> bool:
        """Whether ``forward(first_token_only=True)`` is exact for this encoder."""
        return (type(self) is Encoder and self.global_tokens is None and self.length_multiple == 1
                and self.blocks[-1].attention.accepts_query_subset)

    def run_block(self, block: Block, x: torch.Tensor, mask: torch.Tensor | None,
                  queries: int | None = None) -> torch.Tensor:
        """``block(x, mask, queries)``, or under gradient checkpointing (all queries) recomputed in the
        backward pass, replaying its generators (:func:`replay_generators`)."""
        if self.gradient_checkpointing and self.training:
            replay = functools.partial(replay_generators, block)
            return self._gradient_checkpointing_func(block, x, mask, context_fn=replay)
        return block(x, mask, queries=queries)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                first_token_only: bool = False) -> torch.Tensor:
        """(B, L) -> (B, L, N), or (B, 1, N) with ``first_token_only``: the last layer computes
        the [CLS] row alone (same values; see :attr:`Encoder.supports_first_token_only`)."""
        if first_token_only and not self.supports_first_token_only:
            raise UserError("first_token_only needs dense attention without global tokens")
        batch, length = input_ids.shape
        self.check_length(length)
        padding_mask = None if attention_mask is None else attention_mask.bool()
        padding = -length % self.length_multiple
        if padding:
            input_ids = F.pad(input_ids, (0, padding), value=self.pad_token_id)
            if padding_mask is None:
                padding_mask = input_ids.new_ones(batch, length, dtype=torch.bool)
            padding_mask = F.pad(padding_mask, (0, padding), value=False)  # (B, L + padding)
        x = self.embeddings(input_ids, padding_mask)  # (B, L + padding, N)
        num_global = 0 if self.global_tokens is None else self.global_tokens.shape[0]
        if num_global:
            x = torch.cat([self.global_tokens.expand(batch, -1, -1).to(x.dtype), x], dim=1)
            if padding_mask is not None:
                padding_mask = F.pad(padding_mask, (num_global, 0), value=True)  # (B, G + L + padding)
        for index, block in enumerate(self.blocks):
            last = index == len(self.blocks) - 1
            x = self.run_block(block, x, padding_mask, queries=1 if first_token_only and last else None)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x[:, num_global : num_global + length]


def layer_norm(config: Any) -> nn.LayerNorm:
    """A LayerNorm over the hidden size, with ``layer_norm_eps`` and a bias unless ``norm_bias`` is False."""
    return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, bias=getattr(config, "norm_bias", True))


def layer_rotary(config: Any, layer_idx: int) -> RotaryEmbedding | None:
    """The rotary embedding of layer ``layer_idx`` (None without rotary positions): base
    ``local_rotary_base`` in a local-window layer of a per-layer plan when set, else ``rotary_base``."""
    if getattr(config, "position_embedding_type", "absolute") != "rotary":
        return None
    local = getattr(config, "full_attention_layers", None) and layer_backbone(config, layer_idx) != "full"
    base = config.local_rotary_base if local and config.local_rotary_base is not None else config.rotary_base
    return RotaryEmbedding(config.hidden_size // config.num_attention_heads, base)


def replay_generators(module: nn.Module):
    """``context_fn`` of non-reentrant checkpointing: the recomputation of ``module`` starts from
    the states its explicit generators (``.generator`` attributes) had in the forward pass, and
    leaves them as the forward pass left them."""
    generators = [
        m.generator for m in module.modules() if isinstance(getattr(m, "generator", None), torch.Generator)
    ]
    forward_states = [g.get_state() for g in generators]

    @contextlib.contextmanager
    def replay():
        after_forward = [g.get_state() for g in generators]
        for generator, state in zip(generators, forward_states, strict=True):
            generator.set_state(state)
        try:
            yield
        finally:
            for generator, state in zip(generators, after_forward, strict=True):
                generator.set_state(state)

    return contextlib.nullcontext(), replay()
