"""The sparse patterns themselves, checked against the papers' definitions written out
independently; seeded random layouts; LSG's sparse tokens on hand-checked cases; config errors.
"""

from __future__ import annotations

import io

import pytest
import torch

from genolong.attention import attention_class, attention_config, build_attention
from genolong.attention.bigbird import random_blocks
from genolong.attention.lsg import lsh_average, pool, select_in_blocks
from genolong.core.errors import ConfigError

CPU = torch.device("cpu")


def config(backbone: str, heads: int = 3, max_len: int = 128, **params):
    return attention_config(
        backbone, num_attention_heads=heads, hidden_size=8 * heads, max_position_embeddings=max_len, **params
    )


# --------------------------------------------------------------------------- BigBird


def test_bigbird_pattern_is_global_plus_window_plus_random_blocks():
    block, num_random, heads = 4, 2, 3
    attn = build_attention(config("bigbird", heads=heads, block_size=block, num_random_blocks=num_random))
    seq_len, num_global = 64, 2 * block  # ITC: the first two blocks are global
    mask = attn.pattern_for(seq_len, CPU).dense_mask()  # (H, L, L)
    assert mask.shape == (heads, seq_len, seq_len)
    assert mask[:, :num_global].all() and mask[:, :, :num_global].all()
    sparse = mask[:, num_global:, num_global:]
    blocks = sparse[:, ::block, ::block]  # (H, nb, nb): one entry per block pair
    assert torch.equal(sparse, blocks.repeat_interleave(block, 1).repeat_interleave(block, 2))
    nb = blocks.shape[1]
    distance = (torch.arange(nb)[:, None] - torch.arange(nb)).abs()
    assert blocks[:, distance <= 1].all()  # the window
    random_count = (blocks & (distance > 1)).sum(-1)  # blocks outside the window
    assert (random_count == num_random).all()
    assert not torch.equal(blocks[0], blocks[1])  # each head draws its own random blocks


@pytest.mark.parametrize("num_blocks", range(0, 14))
def test_random_blocks_are_distinct_candidates_outside_the_window(num_blocks):
    draws = torch.rand(5, 16, 3, generator=torch.Generator().manual_seed(num_blocks))
    picks = random_blocks(draws, num_blocks, radius=1)  # (H, nb, r)
    assert picks.shape == (5, num_blocks, 3)
    for i in range(num_blocks):
        candidates = set(range(num_blocks)) - {i - 1, i, i + 1}
        for row in picks[:, i].tolist():
            chosen = [b for b in row if b >= 0]
            assert len(chosen) == len(set(chosen)) == min(3, len(candidates))
            assert set(chosen) <= candidates
            assert row[len(chosen) :] == [-1] * (3 - len(chosen))  # missing picks come last


def test_random_blocks_reach_every_candidate():
    draws = torch.rand(1, 400, 3, generator=torch.Generator().manual_seed(0))
    picks = random_blocks(draws.view(400, 1, 3).expand(-1, 10, -1), 10, radius=1)  # 400 layouts of 10 blocks
    for i in range(10):
        assert set(picks[:, i].flatten().tolist()) == set(range(10)) - {i - 1, i, i + 1}


def test_random_layout_is_seeded_per_layer_and_saved_with_the_model():
    cfg = config("bigbird", block_size=4)
    first, again, other_layer = build_attention(cfg, 0), build_attention(cfg, 0), build_attention(cfg, 1)
    other_seed = build_attention(config("bigbird", block_size=4, attention_seed=7), 0)
    draws = first.random_block_draws
    assert torch.equal(draws, again.random_block_draws)
    assert not torch.equal(draws, other_layer.random_block_draws)
    assert not torch.equal(draws, other_seed.random_block_draws)
    assert "random_block_draws" in first.state_dict()
    # Loading another layer's state replaces the layout, also after a pattern was cached.
    units = first.pattern_for(64, CPU).key_units
    first.load_state_dict(other_layer.state_dict())
    assert torch.equal(first.pattern_for(64, CPU).key_units, other_layer.pattern_for(64, CPU).key_units)
    assert not torch.equal(first.pattern_for(64, CPU).key_units, units)


def test_a_pickled_layer_keeps_its_layout():
    attn = build_attention(config("lsg", block_size=8, sparse_block_size=8, sparsity_type="lsh"), 4)
    buffer = io.BytesIO()
    torch.save(attn, buffer)
    buffer.seek(0)
    restored = torch.load(buffer, weights_only=False)
    assert torch.equal(restored.lsh_projections, attn.lsh_projections)


def test_eval_uses_the_layout_of_training():
    attn = build_attention(config("bigbird", block_size=4))
    trained = attn.train().pattern_for(64, CPU).key_units
    assert torch.equal(attn.eval().pattern_for(64, CPU).key_units, trained)


def test_per_step_redraw_comes_from_the_layer_generator_not_the_global_rng():
    cfg = config("bigbird", block_size=4, redraw_random_per_step=True)
    attn, twin = build_attention(cfg, 2).train(), build_attention(cfg, 2).train()
    rng = torch.get_rng_state()
    steps = [attn.pattern_for(64, CPU).key_units for _ in range(3)]
    assert torch.equal(torch.get_rng_state(), rng)
    assert not torch.equal(steps[0], steps[1]) and not torch.equal(steps[1], steps[2])
    assert all(torch.equal(s, twin.pattern_for(64, CPU).key_units) for s in steps)  # same seed, same sequence
    stored = build_attention(config("bigbird", block_size=4), 2).pattern_for(64, CPU).key_units
    assert torch.equal(attn.eval().pattern_for(64, CPU).key_units, stored)


@pytest.mark.parametrize(
    "backbone, params",
    [
        ("bigbird", dict(block_size=4)),
        ("lsg", dict(block_size=8, sparse_block_size=8, sparsity_type="lsh")),
    ],
)
def test_forward_never_touches_the_global_rng(backbone, params):
    for redraw in (False, True):
        cfg = config(backbone, redraw_random_per_step=redraw, **params)
        attn = build_attention(cfg).train()
        q = torch.randn(1, 3, attention_class(backbone).num_extra_global_tokens(cfg) + 64, 8)
        rng = torch.get_rng_state()
        attn(q, q, q, None)
        assert torch.equal(torch.get_rng_state(), rng)


# --------------------------------------------------------------------------- Longformer


def test_longformer_pattern_is_the_band_plus_global_tokens():
    attn = build_attention(config("longformer", attention_window=12, num_global_tokens=3))
    seq_len, num_global, reach = 3 + 48, 3, 6
    mask = attn.pattern_for(seq_len, CPU).dense_mask()[0]
    position = torch.arange(seq_len)
    band = (position[:, None] - position).abs() <= reach
    expected = band | (position[:, None] < num_global) | (position < num_global)
    assert torch.equal(mask, expected)


# --------------------------------------------------------------------------- LSG


def lsg_reference_mask(seq_len: int, num_global: int, block: int, factor: int, sparse_block: int):
    """LSG's pattern straight from the spec (Sec. 3 and the authors' reshape_to_sparse_block):
    local = blocks k-1..k+1; sparse = compressed indices [(k-1) bt/f - sbs, (k-1) bt/f) and
    [(k+2) bt/f, (k+2) bt/f + sbs); globals see and are seen by the sequence."""
    n = seq_len - num_global
    extra = n // factor
    q = torch.arange(seq_len)[:, None]
    kv = torch.arange(seq_len + extra)[None, :]
    q_block, k_block = (q - num_global) // block, (kv - num_global) // block
    compressed = kv - seq_len  # index among the sparse tokens
    start_left = (q_block - 1) * (block // factor) - sparse_block
    start_right = (q_block + 2) * (block // factor)
    local = (kv >= num_global) & (kv < seq_len) & ((q_block - k_block).abs() <= 1)
    sparse = (compressed >= 0) & (
        ((compressed >= start_left) & (compressed < start_left + sparse_block))
        | ((compressed >= start_right) & (compressed < start_right + sparse_block))
    )
    global_rows = (q < num_global) & (kv < seq_len)
    return global_rows | (kv < num_global) | ((q >= num_global) & (local | sparse))


@pytest.mark.parametrize(
    "block, factor, sparse_block", [(8, 2, 8), (8, 4, 8), (8, 2, 4), (8, 2, 16), (4, 1, 4)]
)
def test_lsg_pattern_matches_the_paper_definition(block, factor, sparse_block):
    attn = build_attention(
        config(
            "lsg",
            block_size=block,
            sparsity_factor=factor,
            sparse_block_size=sparse_block,
            sparsity_type="pooling",
            num_global_tokens=2,
        )
    )
    seq_len = 2 + 10 * block
    mask = attn.pattern_for(seq_len, CPU).dense_mask()[0]
    assert torch.equal(mask, lsg_reference_mask(seq_len, 2, block, factor, sparse_block))


def test_lsg_without_sparsity_is_local_plus_global():
    attn = build_attention(config("lsg", block_size=8, sparsity_type="none", num_global_tokens=1))
    mask = attn.pattern_for(1 + 80, CPU).dense_mask()[0]
    assert mask.shape == (81, 81)
    assert torch.equal(mask, lsg_reference_mask(81, 1, 8, 1, 0)[:, :81])


def positions(length: int, heads: int = 1) -> torch.Tensor:
    """(1, H, N, 1) keys whose value is their position."""
    return torch.arange(length, dtype=torch.float64).view(1, 1, length, 1).expand(1, heads, -1, -1).clone()


def test_pooling_averages_real_tokens_and_masks_all_padding_groups():
    x = positions(8)
    real = torch.tensor([[True] * 5 + [False] * 3])
    keys, values, valid = pool(x, x, real, factor=2)
    assert keys.flatten()[:3].tolist() == [0.5, 2.5, 4.0]  # the group (4, 5) averages token 4 only
    assert valid.flatten().tolist() == [True, True, True, False]


def test_stride_and_block_stride_pick_the_papers_positions():
    x = positions(8, heads=3)
    stride = torch.arange(2) * 2 + torch.arange(3).view(1, 3, 1, 1) % 2  # f=2, bt=4, c=2
    keys, _, _ = select_in_blocks(x, x, None, stride, block=4)
    assert keys[0, :, :, 0].tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [0, 2, 4, 6]]
    block_stride = (torch.arange(3).view(1, 3, 1, 1) * 2 + torch.arange(2)) % 4
    keys, _, _ = select_in_blocks(x, x, None, block_stride, block=4)
    assert keys[0, :, :, 0].tolist() == [[0, 1, 4, 5], [2, 3, 6, 7], [0, 1, 4, 5]]


def test_max_norm_picks_the_largest_keys_and_never_padding_first():
    attn = build_attention(
        config("lsg", heads=1, block_size=4, sparsity_factor=2, sparse_block_size=2, sparsity_type="norm")
    )
    keys = torch.tensor([1.0, 5.0, 3.0, 2.0, 0.0, 0.5, 0.2, 0.1], dtype=torch.float64).view(1, 1, 8, 1)
    picked, _, valid = attn.sparse_tokens(keys, keys, None)
    assert sorted(picked.flatten()[:2].tolist()) == [3.0, 5.0]
    real = torch.tensor([[True, False, True, True, True, True, False, False]])
    picked, _, valid = attn.sparse_tokens(keys, keys, real)
    assert sorted(picked.flatten()[:2].tolist()) == [2.0, 3.0]  # the padded 5.0 is not picked
    assert valid.flatten().tolist() == [True, True, True, True]
    assert sorted(picked.flatten()[2:].tolist()) == [0.0, 0.5]


def test_lsh_averages_the_keys_of_each_bucket():
    gen = torch.Generator().manual_seed(3)
    keys, values = torch.randn(2, 2, 16, 4, generator=gen), torch.randn(2, 2, 16, 4, generator=gen)
    projections = torch.randn(2, 4, 2, generator=gen)  # c = 4 buckets per block of 8
    real = torch.ones(2, 16, dtype=torch.bool)
    real[1, 13:] = False
    out_k, out_v, valid = lsh_average(keys, values, real, projections, block=8)
    for b in range(2):
        for h in range(2):
            rotated = torch.nn.functional.normalize(keys[b, h], dim=-1) @ projections[h]
            bucket = torch.cat([rotated, -rotated], -1).argmax(-1)
            for blk in range(2):
                for c in range(4):
                    members = [t for t in range(8 * blk, 8 * blk + 8) if bucket[t] == c and real[b, t]]
                    assert valid[b, h, 4 * blk + c] == bool(members)
                    if members:
                        torch.testing.assert_close(out_k[b, h, 4 * blk + c], keys[b, h, members].mean(0))
                        torch.testing.assert_close(out_v[b, h, 4 * blk + c], values[b, h, members].mean(0))


# --------------------------------------------------------------------------- configuration


def test_defaults_follow_the_papers():
    assert {
        k: attention_class("bigbird").config_defaults[k]
        for k in (
            "block_size",
            "num_window_blocks",
            "num_random_blocks",
            "num_global_blocks",
            "global_token_location",
        )
    } == dict(
        block_size=64,
        num_window_blocks=3,
        num_random_blocks=3,
        num_global_blocks=2,
        global_token_location="itc",
    )  # BigBird App. F, Table 21
    assert attention_class("longformer").config_defaults["attention_window"] == 512
    assert attention_class("lsg").config_defaults["sparsity_type"] == "norm"


@pytest.mark.parametrize(
    "backbone, params, extra_globals, multiple",
    [
        ("full", {}, 0, 1),
        ("bigbird", {}, 0, 64),
        ("bigbird", dict(global_token_location="etc"), 128, 64),
        ("longformer", {}, 1, 64),
        ("longformer", dict(attention_window=200, num_global_tokens=4), 4, 50),
        ("lsg", {}, 1, 128),
    ],
)
def test_what_the_encoder_must_do(backbone, params, extra_globals, multiple):
    cfg = config(backbone, max_len=4096, **params)
    cls = attention_class(backbone)
    assert (cls.num_extra_global_tokens(cfg), cls.length_multiple(cfg)) == (extra_globals, multiple)


@pytest.mark.parametrize(
    "backbone, params, message",
    [
        ("bigbird", dict(block_size=48), "block_size 48 does not divide max_position_embeddings 128"),
        ("bigbird", dict(block_size=0), "block_size must be an integer >= 1"),
        ("bigbird", dict(block_size=8, num_window_blocks=2), "num_window_blocks must be odd"),
        ("bigbird", dict(block_size=32, num_window_blocks=5), "larger than the sequence"),
        ("bigbird", dict(block_size=8, global_token_location="middle"), "global_token_location must be one of itc, itc_ends, etc"),
        ("bigbird", dict(block_size=32, num_global_blocks=4), "no sparse part"),
        ("bigbird", dict(block_size=8, attention_impl="triton"), "unknown attention_impl 'triton'"),
        ("longformer", dict(attention_window=15), "attention_window must be even"),
        ("longformer", dict(attention_window=256), "attention_window 256 is larger than the sequence"),
        ("longformer", dict(attention_window=[16, 16]), "must be one integer"),
        ("lsg", dict(block_size=8, sparsity_type="bos_pooling"), "unknown sparsity_type 'bos_pooling'"),
        ("lsg", dict(block_size=8, sparsity_factor=3), "sparsity_factor 3 does not divide block_size 8"),
        ("lsg", dict(block_size=8, sparse_block_size=6), "sparse_block_size 6 is not a multiple"),
        (
            "lsg",
            dict(block_size=8, sparsity_factor=8, sparse_block_size=8, sparsity_type="lsh"),
            "even number of buckets",
        ),
        ("lsg", dict(block_size=48), "block_size 48 does not divide"),
    ],
)
def test_impossible_configurations_raise_config_errors(backbone, params, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        build_attention(config(backbone, **params))


def test_unknown_names_are_config_errors():
    with pytest.raises(ConfigError, match="unknown attention 'bigfoot'"):
        attention_class("bigfoot")
    with pytest.raises(ConfigError, match="window_size: not parameters of attention 'bigbird'"):
        config("bigbird", window_size=3)
