"""Block-sparse attentions against the dense masked reference, on every execution path.

Every backbone variant (BigBird ITC/ETC, Longformer, each LSG sparsity type) runs in float64.
Its outputs and gradients through the gathered-blocks path must match the dense reference
built from the same pattern. We also check the invariances: short input == full attention,
padding contents, batch size. flex_attention runs forward-only on CPU, on two small cases,
because each new shape compiles.
"""

from __future__ import annotations

import logging
import math

import pytest
import torch
from helpers.attention_paths import (
    COVERING_UNITS,
    HEAD_DIM,
    HEADS,
    VARIANTS,
    length,
    max_error,
    output_and_grads,
    padding,
    qkv,
    run,
)

from genolong.attention import attention_config, build_attention, flex, paths
from genolong.core.errors import ConfigError


def build(variant: str, layer_idx: int = 0, dim: int = HEAD_DIM, **params):
    backbone, defaults = VARIANTS[variant]
    config = attention_config(
        backbone,
        num_attention_heads=HEADS,
        hidden_size=HEADS * dim,
        max_position_embeddings=128,
        **{**defaults, **params},
    )
    return build_attention(config, layer_idx), config


@pytest.mark.parametrize("variant", VARIANTS)
def test_gather_path_matches_dense_reference_outputs_and_gradients(variant):
    attn, config = build(variant)
    q, k, v = qkv(2, length(config, 12), requires_grad=True)
    mask = padding(2, q.shape[2])
    out, grads = output_and_grads(attn, "gather", q, k, v, mask)
    ref, ref_grads = output_and_grads(attn, "dense", q, k, v, mask)
    assert max_error(out, ref) < 1e-6
    for grad, ref_grad in zip(grads, ref_grads, strict=True):
        assert max_error(grad, ref_grad) < 1e-6
    assert ref.abs().max() > 0.1  # the comparison is not between zeros


@pytest.mark.parametrize("variant", VARIANTS)
def test_gather_path_on_strided_views_in_many_chunks_matches_dense_reference(variant, monkeypatch):
    """As in the model: q, k, v are strided views of the fused QKV projection's output, and a
    long input runs in many chunks of query blocks (here one block per chunk)."""
    monkeypatch.setattr(paths, "GATHER_CHUNK_BYTES", 1)
    attn, config = build(variant)
    seq_len = length(config, 12)
    gen = torch.Generator().manual_seed(0)
    fused = torch.randn(2, seq_len, 3, HEADS, HEAD_DIM, generator=gen, dtype=torch.float64)
    q, k, v = fused.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, L, D) each, not contiguous
    assert not k.is_contiguous()
    mask = padding(2, seq_len)
    assert max_error(run(attn, "gather", q, k, v, mask), run(attn, "dense", q, k, v, mask)) < 1e-6


@pytest.mark.parametrize("variant", VARIANTS)
def test_short_input_equals_full_attention(variant):
    attn, config = build(variant)
    full = build_attention(
        attention_config(
            "full", num_attention_heads=HEADS, hidden_size=HEADS * HEAD_DIM, max_position_embeddings=128
        )
    )
    q, k, v = qkv(2, length(config, COVERING_UNITS[config.backbone]))
    mask = padding(2, q.shape[2], pads=(0, 3))
    expected = full(q, k, v, mask)
    for impl in ("gather", "dense"):
        assert max_error(run(attn, impl, q, k, v, mask), expected) < 1e-6


@pytest.mark.parametrize("variant", VARIANTS)
def test_padding_contents_do_not_change_real_token_outputs(variant):
    attn, config = build(variant)
    q, k, v = qkv(3, length(config, 12))
    mask = padding(3, q.shape[2])
    noise = qkv(3, q.shape[2], seed=1)
    garbage = [torch.where(mask[:, None, :, None], x, 1e3 * n) for x, n in zip((q, k, v), noise, strict=True)]
    real = mask[:, None, :, None].expand_as(q)
    out, out_garbage = run(attn, "gather", q, k, v, mask), run(attn, "gather", *garbage, mask)
    assert max_error(out[real], out_garbage[real]) < 1e-10


@pytest.mark.parametrize("variant", VARIANTS)
def test_batch_size_invariance(variant):
    attn, config = build(variant)
    q, k, v = qkv(3, length(config, 12))
    mask = padding(3, q.shape[2])
    together = run(attn, "gather", q, k, v, mask)
    for i in range(3):
        alone = run(attn, "gather", q[i : i + 1], k[i : i + 1], v[i : i + 1], mask[i : i + 1])
        assert max_error(together[i : i + 1], alone) < 1e-10


def test_bfloat16_gather_path_is_close_to_the_float64_reference():
    attn, config = build("bigbird-itc")
    q, k, v = qkv(2, length(config, 12))
    mask = padding(2, q.shape[2])
    out = run(attn, "gather", *(x.bfloat16() for x in (q, k, v)), mask)
    ref = run(attn, "dense", q, k, v, mask)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    real = mask[:, None, :, None].expand_as(q)
    assert max_error(out.double()[real], ref[real]) < 5e-2


def tiles_from(num_blocks: torch.Tensor, indices: torch.Tensor, k_tiles: int) -> torch.Tensor:
    """(H, q tiles, k tiles) bool from a BlockMask's counts (1, H, Q) and indices (1, H, Q, K)."""
    rank = torch.arange(indices.shape[-1])
    dense = torch.zeros(*indices.shape[1:3], k_tiles + 1, dtype=torch.bool)
    dense.scatter_(2, torch.where(rank < num_blocks[0, ..., None], indices[0].long(), k_tiles), True)
    return dense[..., :k_tiles]


@pytest.mark.parametrize("variant", VARIANTS)
def test_flex_block_mask_tiles_match_the_dense_pattern(variant):
    tile = 16
    attn, config = build(variant)
    pattern = attn.pattern_for(length(config, 12), torch.device("cpu"))
    aligned = pattern.with_global_padding(
        -pattern.num_global % math.gcd(pattern.query_block, pattern.unit, tile)
    )
    block_mask = flex.flex_block_mask(aligned, block=tile)
    dense = aligned.dense_mask()  # (Hp, L, L + E)
    q_tiles, k_tiles = -(-dense.shape[1] // tile), -(-dense.shape[2] // tile)
    dense = torch.nn.functional.pad(
        dense, (0, k_tiles * tile - dense.shape[2], 0, q_tiles * tile - dense.shape[1])
    )
    cells = dense.view(dense.shape[0], q_tiles, tile, k_tiles, tile)
    full = tiles_from(block_mask.full_kv_num_blocks, block_mask.full_kv_indices, k_tiles)
    partial = tiles_from(block_mask.kv_num_blocks, block_mask.kv_indices, k_tiles)
    assert torch.equal(full, cells.all(4).all(2))
    assert torch.equal(partial, cells.any(4).any(2) & ~cells.all(4).all(2))


@pytest.mark.parametrize("variant", [pytest.param("bigbird-itc", marks=pytest.mark.slow), "longformer", "lsg-stride"])
def test_flex_forward_on_cpu_matches_dense_reference(variant):
    """Longformer's 98 tokens (2 global + 6 alignment padding + 90) end in a partial tile of
    flex's 16: the case where the CPU kernel, given it, read stale scores. Two calls must agree
    exactly, the result did change from call to call."""
    attn, config = build(variant)
    q, k, v = qkv(2, length(config, 12))
    mask = padding(2, q.shape[2])
    with torch.no_grad():
        out, again = (run(attn, "flex", *(x.float() for x in (q, k, v)), mask) for _ in range(2))
    ref = run(attn, "dense", q, k, v, mask)
    assert max_error(out.double(), ref) < 1e-5
    assert torch.equal(out, again)


def test_auto_runs_gather_on_cpu_and_logs_the_choice_once(caplog, monkeypatch):
    monkeypatch.setattr(paths, "_logged", set())
    attn, config = build("bigbird-itc")
    q, k, v = qkv(1, length(config, 12))
    with caplog.at_level(logging.INFO, logger="genolong.attention"):
        run(attn, "auto", q, k, v, None)
        run(attn, "auto", q, k, v, None)
    choices = [r.getMessage() for r in caplog.records if "path" in r.getMessage()]
    assert choices == ["bigbird attention: gather path on cpu for inference (attention_impl='auto')"]


def test_flex_cannot_train_on_cpu():
    attn, config = build("bigbird-itc")
    q, k, v = qkv(1, length(config, 12), dtype=torch.float32, requires_grad=True)
    with pytest.raises(ConfigError, match="no backward pass"):
        run(attn, "flex", q, k, v, None)


def test_flex_refuses_float64_on_cpu():
    attn, config = build("bigbird-itc")
    with pytest.raises(ConfigError, match="not float64"):
        run(attn, "flex", *qkv(1, length(config, 12)), None)


def test_flex_refuses_attention_dropout():
    attn, config = build("bigbird-itc", attention_probs_dropout_prob=0.1)
    attn.train()
    with pytest.raises(ConfigError, match="no attention dropout"), torch.no_grad():
        run(attn, "flex", *qkv(1, length(config, 12), dtype=torch.float32), None)


def test_sequence_length_off_the_length_multiple_is_an_error():
    attn, config = build("lsg-pooling")
    with pytest.raises(ValueError, match="do not split into query blocks of 8"):
        run(attn, "gather", *qkv(1, length(config, 12) + 3), None)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["bigbird-itc", "bigbird-etc", "longformer", "lsg-norm", "lsg-lsh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_flex_on_cuda_trains_like_the_gather_path(variant, dtype):
    attn, config = build(variant, dim=16)  # flex on CUDA needs head_dim >= 16
    attn = attn.cuda()
    q, k, v = (x.to("cuda", dtype).requires_grad_() for x in qkv(2, length(config, 12), dim=16))
    mask = padding(2, q.shape[2]).cuda()
    out, grads = output_and_grads(attn, "flex", q, k, v, mask)
    ref, ref_grads = output_and_grads(attn, "gather", q, k, v, mask)
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    real = mask[:, None, :, None].expand_as(q)
    assert max_error(out[real].float(), ref[real].float()) < tolerance
    for grad, ref_grad in zip(grads, ref_grads, strict=True):
        assert max_error(grad.float(), ref_grad.float()) < tolerance * 10
