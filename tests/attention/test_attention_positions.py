"""Rotary and ALiBi positions under the block-sparse backbones (BigBird, Longformer, LSG).

In float64: where the pattern covers every key (short inputs) a sparse attention equals full
attention with the same positions, forward and backward; on long inputs the gathered-blocks
path (and flex, forward-only on CPU) equals the dense masked reference with the same bias.
Rotary positions are applied by the encoder before the attention, so they are checked on a
tiny model, against the same weights with full attention in every layer and with the dense
path. Planted mistakes (a wrong slope, a misplaced position, a wrong rotary base) must fail.
"""

from __future__ import annotations

import copy

import pytest
import torch
from helpers.attention_paths import (
    COVERING_UNITS,
    HEAD_DIM,
    HEADS,
    LSG,
    VARIANTS,
    length,
    max_error,
    output_and_grads,
    padding,
    qkv,
    run,
)
from helpers.model import tiny_config

from genolong.attention import attention_config, build_attention, paths
from genolong.attention.alibi import alibi_bias, alibi_slopes, token_positions
from genolong.core.errors import ConfigError
from genolong.model.modeling import GenolongModel

#: The variants of the path tests, BigBird's two layouts that move or copy tokens, and its full attention below a length.
ALIBI_VARIANTS = {
    **VARIANTS,
    "bigbird-itc-ends": ("bigbird", dict(block_size=8, num_random_blocks=2, global_token_location="itc_ends")),
    "bigbird-transformers-eval": ("bigbird", dict(block_size=8, num_random_blocks=2, random_layout="transformers_eval")),
    "bigbird-full-when-short": ("bigbird", dict(block_size=8, num_random_blocks=2, full_attention_max_tokens=128)),
}
#: transformers_eval's copies weigh the first block more than full attention does: no short-input equality.
COVERING_VARIANTS = [v for v in ALIBI_VARIANTS if v != "bigbird-transformers-eval"]


def alibi(variant: str, position: str = "alibi", dim: int = HEAD_DIM):
    """The attention of ``variant`` with ``position`` positions, and its config."""
    backbone, params = ALIBI_VARIANTS[variant]
    config = attention_config(backbone, num_attention_heads=HEADS, hidden_size=HEADS * dim,
                              max_position_embeddings=128, position_embedding_type=position, **params)
    return build_attention(config), config


def full_like(config):
    """Full attention with ``config``'s heads, prepended tokens and ALiBi slopes."""
    return build_attention(config, name="full")


def full_output_and_grads(config, q, k, v, mask):
    out = full_like(config)(q, k, v, mask)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    return out, torch.autograd.grad((out * weights).sum(), (q, k, v))


# --------------------------------------------------------------------------- ALiBi, attention level


@pytest.mark.parametrize("variant", COVERING_VARIANTS)
def test_alibi_short_input_equals_full_attention_forward_and_backward(variant):
    attn, config = alibi(variant)
    q, k, v = qkv(2, length(config, COVERING_UNITS[config.backbone]), requires_grad=True)
    mask = padding(2, q.shape[2], pads=(0, 3))
    expected, expected_grads = full_output_and_grads(config, q, k, v, mask)
    for impl in ("gather", "dense"):
        out, grads = output_and_grads(attn, impl, q, k, v, mask)
        assert max_error(out, expected) < 1e-10
        for grad, ref in zip(grads, expected_grads, strict=True):
            assert max_error(grad, ref) < 1e-10


@pytest.mark.parametrize("variant", ALIBI_VARIANTS)
@pytest.mark.parametrize("chunk_bytes", [paths.GATHER_CHUNK_BYTES, 1])
def test_alibi_gather_path_matches_dense_reference_outputs_and_gradients(variant, chunk_bytes, monkeypatch):
    """Long padded inputs, in one chunk of query blocks and in one block per chunk."""
    monkeypatch.setattr(paths, "GATHER_CHUNK_BYTES", chunk_bytes)
    attn, config = alibi(variant)
    q, k, v = qkv(2, length(config, 12), requires_grad=True)
    mask = padding(2, q.shape[2])
    out, grads = output_and_grads(attn, "gather", q, k, v, mask)
    ref, ref_grads = output_and_grads(attn, "dense", q, k, v, mask)
    assert max_error(out, ref) < 1e-10
    for grad, ref_grad in zip(grads, ref_grads, strict=True):
        assert max_error(grad, ref_grad) < 1e-10
    absolute, _ = alibi(variant, "absolute")  # the bias changes the result
    assert max_error(run(absolute, "dense", q, k, v, mask), ref) > 1e-3


@pytest.mark.parametrize("variant", ["bigbird-itc", "longformer", "lsg-norm"])
def test_alibi_padding_and_batch_do_not_change_real_rows(variant):
    attn, config = alibi(variant)
    q, k, v = qkv(3, length(config, 12))
    mask = padding(3, q.shape[2])
    noise = qkv(3, q.shape[2], seed=1)
    garbage = [torch.where(mask[:, None, :, None], x, 1e3 * n) for x, n in zip((q, k, v), noise, strict=True)]
    real = mask[:, None, :, None].expand_as(q)
    together = run(attn, "gather", q, k, v, mask)
    assert max_error(together[real], run(attn, "gather", *garbage, mask)[real]) < 1e-10
    for i in range(3):
        alone = run(attn, "gather", q[i : i + 1], k[i : i + 1], v[i : i + 1], mask[i : i + 1])
        assert max_error(together[i : i + 1], alone) < 1e-10


def test_alibi_bfloat16_gather_path_is_close_to_the_float64_reference():
    attn, config = alibi("lsg-pooling")
    q, k, v = qkv(2, length(config, 12))
    mask = padding(2, q.shape[2])
    out = run(attn, "gather", *(x.bfloat16() for x in (q, k, v)), mask)
    real = mask[:, None, :, None].expand_as(q)
    assert max_error(out.double()[real], run(attn, "dense", q, k, v, mask)[real]) < 5e-2


@pytest.mark.parametrize("variant", [pytest.param("bigbird-itc-ends", marks=pytest.mark.slow), "longformer", "lsg-pooling"])
def test_alibi_flex_forward_on_cpu_matches_dense_reference(variant):
    attn, config = alibi(variant)
    q, k, v = qkv(2, length(config, 12))
    mask = padding(2, q.shape[2])
    with torch.no_grad():
        out = run(attn, "flex", *(x.float() for x in (q, k, v)), mask)
    assert max_error(out.double(), run(attn, "dense", q, k, v, mask)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["bigbird-itc-ends", "bigbird-transformers-eval", "longformer", "lsg-pooling"])
def test_alibi_flex_on_cuda_trains_like_the_gather_path(variant):
    attn, config = alibi(variant, dim=16)  # flex on CUDA needs head_dim >= 16
    attn = attn.cuda()
    q, k, v = (x.to("cuda", torch.float32).requires_grad_() for x in qkv(2, length(config, 12), dim=16))
    mask = padding(2, q.shape[2]).cuda()
    out, grads = output_and_grads(attn, "flex", q, k, v, mask)
    ref, ref_grads = output_and_grads(attn, "gather", q, k, v, mask)
    real = mask[:, None, :, None].expand_as(q)
    assert max_error(out[real], ref[real]) < 1e-4
    for grad, ref_grad in zip(grads, ref_grads, strict=True):
        assert max_error(grad, ref_grad) < 1e-3


def test_lsg_sparse_tokens_stand_at_the_mean_position_of_the_tokens_they_compress():
    attn, config = alibi("lsg-pooling")
    seq = torch.tensor([-1.0, -1.0, 0, 1, 2, 3, 4, 5, 6, 7])
    assert torch.equal(attn.extra_positions(seq, 2, 4), torch.tensor([0.5, 2.5, 4.5, 6.5]))
    copies, _ = alibi("bigbird-transformers-eval")
    first_block = torch.arange(8.0)
    assert torch.equal(copies.extra_positions(torch.arange(40.0), 16, 16), torch.cat([first_block, first_block]))


def lsg_pooling_reference(q, k, v, pattern, slopes, pooled_positions):
    """Dense attention over the sequence and its pooled tokens, written out: the pooled keys and
    values are means of 2 tokens (no padding), every key biased by ALiBi at the given positions."""
    g = pattern.num_global
    pooled_k, pooled_v = (x[:, :, g:].unflatten(2, (-1, 2)).mean(3) for x in (k, v))
    keys, values = torch.cat([k, pooled_k], 2), torch.cat([v, pooled_v], 2)
    positions = torch.cat([token_positions(q.shape[2], g).double(), pooled_positions])
    scores = q @ keys.transpose(-1, -2) / q.shape[-1] ** 0.5 + alibi_bias(slopes, positions[: q.shape[2]], positions)
    return scores.masked_fill(~pattern.dense_mask(), float("-inf")).softmax(-1) @ values


def test_lsg_pooled_tokens_match_a_reference_written_out_and_a_misplaced_position_fails():
    attn, config = alibi("lsg-pooling")
    q, k, v = qkv(1, length(config, 12))
    pattern = attn.pattern_for(q.shape[2], q.device)
    slopes = attn.alibi_slopes.double()
    assert torch.equal(slopes, alibi_slopes(HEADS).float().double())
    centres = torch.arange(pattern.num_extra, dtype=torch.float64) * 2 + 0.5
    out = run(attn, "gather", q, k, v, None)
    assert max_error(out, lsg_pooling_reference(q, k, v, pattern, slopes, centres)) < 1e-10
    assert max_error(out, lsg_pooling_reference(q, k, v, pattern, slopes, centres + 1)) > 1e-4


@pytest.mark.parametrize("variant", ["bigbird-itc-ends", "longformer", "lsg-norm"])
def test_alibi_planted_mistakes_break_the_short_input_equality(variant, monkeypatch):
    attn, config = alibi(variant)
    q, k, v = qkv(2, length(config, COVERING_UNITS[config.backbone]))
    expected = full_like(config)(q, k, v, None)
    wrong_slopes, _ = alibi(variant)
    wrong_slopes.alibi_slopes = attn.alibi_slopes.flip(0)  # the heads' slopes in the wrong order
    assert max_error(run(wrong_slopes, "gather", q, k, v, None), expected) > 1e-3
    shifted = token_positions(q.shape[2], attn.num_prepended)
    shifted[-3:] += 1  # the last three tokens one place too far
    for module in ("blocksparse", "bigbird"):
        monkeypatch.setattr(f"genolong.attention.{module}.token_positions", lambda *args: shifted)
    assert max_error(run(attn, "gather", q, k, v, None), expected) > 1e-3


# --------------------------------------------------------------------------- rotary and ALiBi, encoder level

BACKBONES = {
    "bigbird": dict(backbone="bigbird", block_size=8, num_random_blocks=1),
    "longformer": dict(backbone="longformer", attention_window=16, num_global_tokens=1),
    "lsg": dict(backbone="lsg", **dict(LSG, sparsity_type="pooling", num_global_tokens=1)),
}
#: Input lengths at which each pattern covers every key (the encoder pads to the length unit).
SHORT = {"bigbird": 27, "longformer": 8, "lsg": 13}


def encoder(backbone: str, position: str, **overrides) -> GenolongModel:
    """A tiny float64 model; weights larger than the default so that positions change the scores much."""
    torch.manual_seed(0)
    config = tiny_config(max_position_embeddings=128, position_embedding_type=position, initializer_range=0.2,
                         **{**BACKBONES[backbone], **overrides})
    return GenolongModel(config).double()


def same_weights(model: GenolongModel, **overrides) -> GenolongModel:
    """A model with ``model``'s config changed by ``overrides`` and its weights."""
    config = copy.deepcopy(model.config)
    for name, value in overrides.items():
        setattr(config, name, value)
    other = GenolongModel(config).double()
    missing, _ = other.load_state_dict(model.state_dict(), strict=False)  # the layers' random draws stay behind
    assert not missing
    return other


def hidden_and_grads(model: GenolongModel, ids: torch.Tensor, mask: torch.Tensor):
    model.zero_grad()
    hidden = model(ids, mask).last_hidden_state
    real = mask[:, :, None].to(hidden.dtype)
    weights = torch.linspace(-1, 1, hidden.numel(), dtype=hidden.dtype).view_as(hidden)
    (hidden * weights * real).sum().backward()
    return hidden * real, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def batch(lengths: tuple[int, ...]):
    ids = torch.randint(5, 64, (len(lengths), max(lengths)), generator=torch.Generator().manual_seed(1))
    mask = torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]
    return ids, mask


def assert_same(a, b, tolerance: float = 1e-9):
    (hidden_a, grads_a), (hidden_b, grads_b) = a, b
    assert max_error(hidden_a, hidden_b) < tolerance
    assert grads_a.keys() == grads_b.keys() and grads_a
    for name, grad in grads_a.items():
        assert max_error(grad, grads_b[name]) < tolerance, name


@pytest.mark.parametrize("position", ["rotary", "alibi"])
@pytest.mark.parametrize("backbone", BACKBONES)
def test_encoder_short_input_equals_full_attention_in_every_layer(backbone, position):
    model = encoder(backbone, position)
    dense = same_weights(model, full_attention_layers=[0, 1])
    ids, mask = batch((SHORT[backbone], SHORT[backbone] - 5))
    assert_same(hidden_and_grads(model, ids, mask), hidden_and_grads(dense, ids, mask))


@pytest.mark.parametrize("position", ["rotary", "alibi"])
@pytest.mark.parametrize("backbone", BACKBONES)
def test_encoder_long_input_gather_path_equals_dense_reference(backbone, position):
    model = encoder(backbone, position, attention_impl="gather")
    reference = same_weights(model, attention_impl="dense")
    ids, mask = batch((96, 83))
    assert_same(hidden_and_grads(model, ids, mask), hidden_and_grads(reference, ids, mask))


def test_encoder_with_a_wrong_rotary_base_differs_from_the_full_attention_model():
    model = encoder("lsg", "rotary")
    ids, mask = batch((13, 8))
    hidden, _ = hidden_and_grads(model, ids, mask)
    wrong, _ = hidden_and_grads(same_weights(model, full_attention_layers=[0, 1], rotary_base=500.0), ids, mask)
    assert max_error(hidden, wrong) > 1e-3


@pytest.mark.parametrize("position", ["rotary", "alibi"])
def test_vcc_refuses_rotary_and_alibi_positions(position):
    with pytest.raises(ConfigError, match=f"vcc attention does not support position_embedding_type '{position}'"):
        tiny_config(backbone="vcc", position_embedding_type=position)
