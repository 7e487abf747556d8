"""VCC (Zeng et al. 2023): the compressed layer against the uncompressed one, in float64.

The uncompressed reference is the plain :class:`Encoder` built from the same config: the same
warm-up segments, then dense attention over every token. VCC must equal it whenever compression
loses nothing (all blocks fine, k = 1, or tokens constant within blocks with the log s bias).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers.model import tiny_config

from genolong.attention import vcc as vcc_attention
from genolong.core.errors import ConfigError, UserError
from genolong.model.encoder import Block, Encoder
from genolong.model.heads import IGNORE_INDEX
from genolong.model.modeling import GenolongForMaskedLM, GenolongModel
from genolong.model.vcc import (
    VCCEncoder,
    VipLayout,
    block_means,
    block_scores,
    compress,
    decompress,
    default_vip_mask,
)


def vcc_config(**overrides):
    fields = dict(
        backbone="vcc",
        num_hidden_layers=3,
        pre_layer_norm=True,
        vcc_block_size=4,
        vcc_fine_blocks=3,
        vcc_warmup_layers=1,
        vcc_warmup_window=16,
    )
    return tiny_config(**(fields | overrides))


def random_ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


def vcc_and_reference(**overrides) -> tuple[VCCEncoder, Encoder]:
    """A float64 VCC encoder and the uncompressed encoder with the same weights."""
    torch.manual_seed(0)
    config = vcc_config(**overrides)
    vcc = VCCEncoder(config).double().eval()
    reference = Encoder(config).double().eval()
    reference.load_state_dict(vcc.state_dict())
    return vcc, reference


def padded_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two rows of 61 tokens (the second padded after 45) and VIPs besides [CLS]."""
    ids = random_ids(2, 61)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 45:] = False
    vip = torch.zeros_like(mask)
    vip[0, [7, 30, 31]] = True
    vip[1, [12]] = True
    return ids, mask, vip


@pytest.mark.parametrize("pre_layer_norm", [True, False])
def test_budget_covering_every_block_equals_the_uncompressed_encoder(pre_layer_norm):
    vcc, reference = vcc_and_reference(vcc_fine_blocks=100, pre_layer_norm=pre_layer_norm)
    ids, mask, vip = padded_batch()
    with torch.no_grad():
        out, expected = vcc(ids, mask, vip_mask=vip), reference(ids, mask)
    torch.testing.assert_close(out[mask], expected[mask], rtol=0, atol=1e-12)


@pytest.mark.parametrize("num_fine_blocks", [0, 2])
def test_block_size_one_equals_the_uncompressed_encoder_for_any_budget(num_fine_blocks):
    vcc, reference = vcc_and_reference(vcc_block_size=1, vcc_fine_blocks=num_fine_blocks)
    ids, mask, vip = padded_batch()
    with torch.no_grad():
        out, expected = vcc(ids, mask, vip_mask=vip), reference(ids, mask)
    torch.testing.assert_close(out[mask], expected[mask], rtol=0, atol=1e-12)


def test_compression_changes_the_output_when_blocks_are_pooled():
    """The counterpart of the two tests above: with pooling, VCC is an approximation."""
    vcc, reference = vcc_and_reference(vcc_fine_blocks=1)
    ids, mask, vip = padded_batch()
    with torch.no_grad():
        assert (vcc(ids, mask, vip_mask=vip) - reference(ids, mask))[mask].abs().max() > 1e-3


def compressed_block(pre_layer_norm: bool = True) -> Block:
    """A float64 layer in compressed mode (dense attention with a key bias)."""
    torch.manual_seed(1)
    config = vcc_config(num_hidden_layers=1, vcc_warmup_layers=0, pre_layer_norm=pre_layer_norm)
    return Block(config, layer_idx=0).double().eval()


def layout_and_states(block_constant: bool) -> tuple[VipLayout, torch.Tensor]:
    """A layout with VIPs, a partial last block and padding, and states ``[P; C]`` (B, R, 32)."""
    ids, mask, vip = padded_batch()
    layout = VipLayout.build(default_vip_mask(mask, 0) | vip, mask, block_size=4)
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(2, layout.order.shape[1], 32, generator=generator, dtype=torch.float64)
    if block_constant:
        rest = x[:, layout.num_vip :].view(2, layout.num_blocks, 4, 32)
        rest[:] = torch.randn(2, layout.num_blocks, 1, 32, generator=generator, dtype=torch.float64)
    return layout, x * layout.real[..., None]


def run_compressed(
    block: Block, layout: VipLayout, x: torch.Tensor, num_fine: int, log_size_bias: bool = True
):
    means, sizes = block_means(x, layout)
    scores = block_scores(block, x[:, : layout.num_vip], means, layout.voters, sizes > 0)
    compressed = compress(x, layout, means, sizes, scores, num_fine)
    bias = compressed.key_bias
    if not log_size_bias:  # the ablation: pooled rows weigh like one token (0), padding stays -inf
        bias = bias.clamp(max=0.0)
    new_rows = block(compressed.rows, bias)
    return compressed, new_rows, decompress(x, layout, compressed, new_rows)


@pytest.mark.parametrize("pre_layer_norm", [True, False])
@pytest.mark.parametrize("num_fine", [0, 1, 5])
def test_blocks_of_equal_tokens_are_exact_with_the_log_size_bias_and_wrong_without(num_fine, pre_layer_norm):
    """Prop. 6.2: a pooled row stands for s equal keys only if its logit gets + log s."""
    block = compressed_block(pre_layer_norm)
    layout, x = layout_and_states(block_constant=True)
    with torch.no_grad():
        expected = block(x, layout.real)  # the uncompressed layer on [P; C]
        _, _, out = run_compressed(block, layout, x, num_fine)
        _, _, without_bias = run_compressed(block, layout, x, num_fine, log_size_bias=False)
    real = layout.real
    torch.testing.assert_close(out[real], expected[real], rtol=0, atol=1e-12)
    assert (without_bias - expected)[real].abs().max() > 1e-2


def test_reaveraging_the_output_reproduces_the_compressed_rows():
    """Prop. 6.5: S_c C_new = S_c C + update. VIP and fine tokens are their rows' outputs."""
    block = compressed_block()
    layout, x = layout_and_states(block_constant=False)
    with torch.no_grad():
        compressed, new_rows, out = run_compressed(block, layout, x, num_fine=2)
        means, sizes = block_means(out, layout)
    n_p, h, nb = layout.num_vip, compressed.num_fine, layout.num_blocks
    pooled, fine = compressed.block_order[:, : nb - h], compressed.block_order[:, nb - h :]
    for row in range(2):
        real_pooled = pooled[row][sizes[row, pooled[row]] > 0]
        expected = new_rows[row, n_p + h * 4 :][sizes[row, pooled[row]] > 0]
        torch.testing.assert_close(means[row, real_pooled], expected, rtol=0, atol=1e-12)
        voters = layout.voters[row]
        torch.testing.assert_close(out[row, :n_p][voters], new_rows[row, :n_p][voters], rtol=0, atol=1e-12)
        fine_slots = (n_p + fine[row, :, None] * 4 + torch.arange(4)).flatten()
        fine_real = layout.real[row, fine_slots]
        torch.testing.assert_close(
            out[row, fine_slots][fine_real], new_rows[row, n_p : n_p + h * 4][fine_real], rtol=0, atol=1e-12
        )


def test_layout_puts_vips_first_in_order_and_round_trips():
    ids, mask, vip = padded_batch()
    vip = default_vip_mask(mask, 0) | vip
    layout = VipLayout.build(vip, mask, block_size=4)
    assert layout.num_vip == 4 and layout.order.shape == (2, 4 + 15 * 4)  # 61 - 2 VIPs -> 59 -> 15 blocks
    assert layout.order[0, :4].tolist() == [0, 7, 30, 31]
    assert layout.order[1, :4].tolist() == [0, 12, 61, 61]  # two empty VIP slots
    rest = [p for p in range(61) if p not in (0, 12)]
    assert layout.order[1, 4 : 4 + 59].tolist() == rest  # the others in their order
    assert layout.real[1, 4 : 4 + 59].tolist() == [p < 45 for p in rest]
    x = torch.randn(2, 61, 8, dtype=torch.float64)
    assert torch.equal(layout.restore(layout.reorder(x)), x)


def test_a_row_has_the_same_blocks_alone_and_in_a_batch():
    """Row 1's real non-VIP tokens fill the same slots of C (so the same blocks) in both layouts."""
    ids, mask, vip = padded_batch()
    vip = default_vip_mask(mask, 0) | vip
    together = VipLayout.build(vip, mask, block_size=4)
    alone = VipLayout.build(vip[1:, :45], mask[1:, :45], block_size=4)
    real = 45 - 2  # tokens of row 1 that are neither padding nor VIP
    for layout, row in ((together, 1), (alone, 0)):
        rest, rest_real = layout.order[row, layout.num_vip :], layout.real[row, layout.num_vip :]
        assert rest[:real].tolist() == [p for p in range(1, 45) if p != 12]
        assert rest_real[:real].all() and not rest_real[real:].any()


def test_central_vip_window_is_centred_on_the_real_tokens():
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[1, 8:] = False
    vip = default_vip_mask(mask, num_central=4)
    assert vip[0].nonzero().flatten().tolist() == [0, 4, 5, 6, 7]
    assert vip[1].nonzero().flatten().tolist() == [0, 2, 3, 4, 5]


def test_a_block_planted_to_match_cls_is_selected():
    """With W_Q = W_K = 3 I, a block whose tokens equal [CLS] gets [CLS]'s attention."""
    block = compressed_block()
    with torch.no_grad():
        block.qkv.weight[:64] = 3 * torch.eye(32, dtype=torch.float64).repeat(2, 1)
        block.qkv.bias.zero_()
    mask = torch.ones(1, 64, dtype=torch.bool)
    layout = VipLayout.build(default_vip_mask(mask, 0), mask, block_size=4)
    x = torch.randn(1, 64, 32, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    planted = 9
    x[0, 1 + planted * 4 : 1 + planted * 4 + 4] = x[0, 0]  # C starts after the one VIP, [CLS]
    x = layout.reorder(x)
    with torch.no_grad():
        means, sizes = block_means(x, layout)
        scores = block_scores(block, x[:, :1], means, layout.voters, sizes > 0)
        compressed = compress(x, layout, means, sizes, scores, num_fine_blocks=1)
    assert int(scores.argmax()) == planted and scores[0, planted] > 0.5
    assert compressed.block_order[0, -1] == planted  # the one fine block


def test_padding_and_batching_do_not_change_real_tokens():
    torch.manual_seed(0)
    model = GenolongModel(vcc_config(vcc_fine_blocks=2)).eval()
    ids, mask, vip = padded_batch()
    other = ids.clone()
    other[1, 45:] = random_ids(1, 16, seed=5)
    with torch.no_grad():
        together = model(ids, mask, vip_mask=vip).last_hidden_state
        other_padding = model(other, mask, vip_mask=vip).last_hidden_state
        alone = model(ids[1:, :45], vip_mask=vip[1:, :45]).last_hidden_state
    torch.testing.assert_close(together[1, :45], alone[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(together[mask], other_padding[mask], rtol=0, atol=1e-6)


def test_mlm_labels_make_the_masked_tokens_vips():
    torch.manual_seed(0)
    model = GenolongForMaskedLM(vcc_config(vcc_fine_blocks=1)).eval()
    ids = random_ids(2, 60)
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[:, [9, 33, 50]] = True
    labels = torch.where(masked, ids, IGNORE_INDEX)
    with torch.no_grad():
        logits = model(ids, labels=labels).logits
        explicit = model.lm_head(model.genolong(ids, vip_mask=masked).last_hidden_state)[0][masked]
        cls_only = model.lm_head(model.genolong(ids).last_hidden_state)[0][masked]
    torch.testing.assert_close(logits, explicit, rtol=0, atol=1e-6)
    assert (logits - cls_only).abs().max() > 1e-4


def test_weights_are_the_plain_encoders_and_gradients_flow():
    """VCC adds no parameters (§3.3): a pre-LN full checkpoint loads strictly."""
    torch.manual_seed(0)
    full = GenolongForMaskedLM(tiny_config(num_hidden_layers=3, pre_layer_norm=True))
    vcc = GenolongForMaskedLM(vcc_config(vcc_fine_blocks=1)).train()
    vcc.load_state_dict(full.state_dict(), strict=True)
    ids, mask, _ = padded_batch()
    labels = torch.where(torch.arange(61) % 7 == 3, ids, IGNORE_INDEX)
    vcc(ids, mask, labels=labels).loss.backward()
    grads = [p.grad for p in vcc.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert vcc.genolong.encoder.blocks[2].qkv.weight.grad.abs().sum() > 0


def test_gradient_checkpointing_gives_the_same_gradients():
    torch.manual_seed(0)
    model = GenolongForMaskedLM(vcc_config(vcc_fine_blocks=2)).double().train()
    ids, mask, _ = padded_batch()
    labels = torch.where(torch.arange(61) % 5 == 0, ids, IGNORE_INDEX)

    def gradients():
        model.zero_grad()
        model(ids, mask, labels=labels).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    plain = gradients()
    model.activation_checkpointing_enable()
    for name, grad in gradients().items():
        torch.testing.assert_close(grad, plain[name], rtol=1e-9, atol=1e-12, msg=name)


def test_defaults_follow_the_paper():
    config = tiny_config(backbone="vcc", num_hidden_layers=12)
    encoder = VCCEncoder(config)
    assert (encoder.block_size, encoder.num_fine_blocks, encoder.num_warmup_layers) == (16, 90, 4)
    assert encoder.blocks[3].attention.window == 512 and encoder.blocks[4].attention.window is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"vcc_block_size": 0}, "vcc_block_size must be an integer >= 1"),
        ({"vcc_fine_blocks": -1}, "vcc_fine_blocks must be an integer >= 0"),
        (
            {"vcc_warmup_layers": 5},
            r"vcc_warmup_layers must be None or an integer in \[0, num_hidden_layers=3\]",
        ),
        ({"block_size": 64}, "block_size is a parameter of backbone 'bigbird', not of 'vcc'"),
    ],
)
def test_impossible_settings_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        vcc_config(**overrides)


def test_a_row_starting_with_padding_is_a_user_error():
    model = GenolongModel(vcc_config())
    mask = torch.ones(1, 20, dtype=torch.bool)
    mask[0, 0] = False
    with pytest.raises(UserError, match="must start with a real token"):
        model(random_ids(1, 20), mask)


def test_compressed_rows_count():
    """r = n_p + h k + (nb - h) (§4's two-resolution instance)."""
    mask = torch.ones(1, 65, dtype=torch.bool)
    layout = VipLayout.build(default_vip_mask(mask, 0), mask, block_size=4)
    x = torch.randn(1, layout.order.shape[1], 8)
    means, sizes = block_means(x, layout)
    compressed = compress(x, layout, means, sizes, torch.rand(1, layout.num_blocks), num_fine_blocks=3)
    assert compressed.rows.shape[1] == 1 + 3 * 4 + (16 - 3)
    pooled_bias = compressed.key_bias[0, 1 + 12 :]
    torch.testing.assert_close(pooled_bias, torch.full((13,), math.log(4)))


def test_preset_model_round_trips_through_the_auto_classes(tmp_path):
    from transformers import AutoModelForMaskedLM

    from genolong.training.pretrain import load_pretrain_config

    config = load_pretrain_config("vcc").model_config(vocab_size=64)
    assert (config.backbone, config.pre_layer_norm, config.vcc_fine_blocks) == ("vcc", True, 16)
    torch.manual_seed(0)
    model = GenolongForMaskedLM(config).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded.genolong.encoder, VCCEncoder)
    ids = random_ids(2, 400)
    labels = torch.where(torch.arange(400) % 13 == 1, ids, IGNORE_INDEX)
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, labels=labels).logits, loaded(ids, labels=labels).logits, rtol=0, atol=1e-6
        )


def test_the_attention_benchmark_measures_vcc():
    """``genolong bench attention`` builds it by name (its MLM step passes labels, hence VIPs)."""
    from genolong.experiments.bench.attention import BenchSize, Spec, run_phase

    size = BenchSize(
        vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64
    )
    spec = Spec(model="vcc", length=300, size=size, repeats=1)
    for phase in ("forward", "train"):
        assert run_phase(spec, phase)["time_s"] > 0


def test_bf16_autocast_runs_the_compressed_layers():
    torch.manual_seed(0)
    model = GenolongModel(vcc_config(vcc_fine_blocks=1)).eval()
    ids, mask, vip = padded_batch()
    with torch.no_grad():
        exact = model(ids, mask, vip_mask=vip).last_hidden_state
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(ids, mask, vip_mask=vip).last_hidden_state
    assert torch.isfinite(low).all()
    torch.testing.assert_close(low[mask].float(), exact[mask], rtol=0, atol=0.1)


def test_dropout_attention_is_exact_attention_in_recomputed_pieces(monkeypatch):
    monkeypatch.setattr(vcc_attention, "DROPOUT_QUERY_CHUNK", 7)
    generator = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 2, 30, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    bias = torch.rand(2, 1, 1, 30, generator=generator, dtype=torch.float64).log()
    bias[1, ..., 25:] = -math.inf
    upstream = torch.randn(2, 2, 30, 4, generator=generator, dtype=torch.float64)

    def run(attention, dropout, seed=5):
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        torch.manual_seed(seed)
        out = attention(*inputs, dropout)
        out.backward(upstream)
        return out, [t.grad for t in inputs]

    def sdpa(q, k, v, dropout):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout)

    def pieces(q, k, v, dropout):  # the same pieces without recomputation
        return torch.cat([sdpa(q[:, :, i : i + 7], k, v, dropout) for i in range(0, 30, 7)], dim=2)

    def chunked(q, k, v, dropout):
        return vcc_attention.dropout_attention(q, k, v, bias, dropout)

    for (out, grads), (expected, expected_grads) in (
        (run(chunked, 0.0), run(sdpa, 0.0)),
        (run(chunked, 0.5), run(pieces, 0.5)),  # the backward pass sees the forward's dropout mask
    ):
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
        for grad, expected_grad in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-12)
    assert (run(chunked, 0.5)[0] - run(chunked, 0.0)[0]).abs().max() > 0.1  # dropout is applied
