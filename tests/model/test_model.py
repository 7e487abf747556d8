"""The encoder and its heads: invariances, the attention contract, losses, checkpointing."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers.model import probe_attention, tiny_config  # noqa: F401

from genolong.attention import available_attentions
from genolong.core.errors import UserError
from genolong.model.encoder import Encoder
from genolong.model.heads import IGNORE_INDEX
from genolong.model.modeling import GenolongForMaskedLM, GenolongForSequenceClassification, GenolongModel

# Long enough for every registered pattern at its paper defaults (BigBird: 8 blocks of 64).
LENGTH = 640


def backbone_config(backbone: str, **overrides):
    """A tiny model of ``backbone`` at its default pattern parameters."""
    return tiny_config(backbone=backbone, num_hidden_layers=1, **overrides)


def random_ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(params=available_attentions())
def backbone(request) -> str:
    return request.param


def test_padding_contents_do_not_change_real_outputs(backbone):
    torch.manual_seed(0)
    model = GenolongModel(backbone_config(backbone)).eval()
    ids = random_ids(2, LENGTH)
    mask = torch.ones_like(ids)
    mask[1, LENGTH - 100 :] = 0
    other = ids.clone()
    other[1, LENGTH - 100 :] = random_ids(1, 100, seed=1)
    with torch.no_grad():
        out = model(ids, mask).last_hidden_state
        out_other = model(other, mask).last_hidden_state
    torch.testing.assert_close(out[0], out_other[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(out[1, : LENGTH - 100], out_other[1, : LENGTH - 100], rtol=0, atol=1e-5)


def test_batch_size_invariance(backbone):
    torch.manual_seed(0)
    model = GenolongModel(backbone_config(backbone)).eval()
    ids = random_ids(3, LENGTH)
    with torch.no_grad():
        together = model(ids).last_hidden_state
        alone = torch.cat([model(ids[i : i + 1]).last_hidden_state for i in range(3)])
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-5)


def test_padding_equals_running_the_real_tokens_alone():
    """Dense attention: a right-padded row gives the same real-token outputs as the row alone."""
    torch.manual_seed(0)
    model = GenolongModel(tiny_config()).eval()
    ids = random_ids(1, 50)
    padded = torch.cat([ids, torch.zeros(1, 14, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 50), torch.zeros(1, 14)], dim=1)
    with torch.no_grad():
        alone = model(ids).last_hidden_state
        with_padding = model(padded, mask).last_hidden_state
    torch.testing.assert_close(with_padding[:, :50], alone, rtol=0, atol=1e-5)


@pytest.mark.usefixtures("probe_attention")
def test_encoder_prepends_global_tokens_and_pads_to_the_length_multiple():
    torch.manual_seed(0)
    encoder = Encoder(tiny_config(backbone="probe", num_hidden_layers=1)).eval()
    torch.nn.init.normal_(encoder.global_tokens)
    ids = random_ids(2, 37)
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    with torch.no_grad():
        out = encoder(ids, mask)
    assert out.shape == (2, 37, 32)
    ((shape, seen_mask),) = encoder.blocks[0].attention.calls
    assert shape == (2, 4, 2 + 48, 8)  # 2 global tokens + 37 tokens padded to 48
    expected = torch.zeros(2, 50, dtype=torch.bool)
    expected[:, : 2 + 37] = True
    expected[1, 2 + 30 :] = False
    assert torch.equal(seen_mask, expected)


@pytest.mark.usefixtures("probe_attention")
def test_padding_to_the_length_multiple_does_not_change_outputs():
    """The same weights with length multiple 16 and 1 give the same outputs (padding is masked)."""
    torch.manual_seed(0)
    padded = Encoder(tiny_config(backbone="probe", probe_multiple=16)).eval()
    torch.nn.init.normal_(padded.global_tokens)
    exact = Encoder(tiny_config(backbone="probe", probe_multiple=1)).eval()
    exact.load_state_dict(padded.state_dict())
    ids = random_ids(2, 37)
    with torch.no_grad():
        torch.testing.assert_close(padded(ids), exact(ids), rtol=0, atol=1e-5)
        # reference: prepend the global tokens by hand, run the blocks, drop the globals
        x = torch.cat([exact.global_tokens.expand(2, -1, -1), exact.embeddings(ids)], dim=1)
        for block in exact.blocks:
            x = block(x)
        torch.testing.assert_close(exact(ids), x[:, 2:], rtol=0, atol=1e-6)
    assert exact.blocks[0].attention.calls[0][0][2] == 2 + 37


@pytest.mark.usefixtures("probe_attention")
def test_global_tokens_receive_gradients():
    encoder = Encoder(tiny_config(backbone="probe"))
    encoder(random_ids(1, 20)).sum().backward()
    assert encoder.global_tokens.grad is not None and encoder.global_tokens.grad.abs().sum() > 0


@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_pre_and_post_layer_norm_run_and_differ(pre_layer_norm):
    torch.manual_seed(0)
    model = GenolongModel(tiny_config(pre_layer_norm=pre_layer_norm)).eval()
    other = GenolongModel(tiny_config(pre_layer_norm=not pre_layer_norm)).eval()
    other.load_state_dict(model.state_dict(), strict=False)
    ids = random_ids(2, 40)
    with torch.no_grad():
        out, out_other = model(ids).last_hidden_state, other(ids).last_hidden_state
    assert out.shape == (2, 40, 32) and torch.isfinite(out).all()
    assert (model.encoder.final_norm is not None) == pre_layer_norm
    assert not torch.allclose(out, out_other)


def test_input_longer_than_the_position_table_is_a_user_error():
    model = GenolongModel(tiny_config(max_position_embeddings=32))
    with pytest.raises(UserError, match="longer than max_position_embeddings=32"):
        model(random_ids(1, 33))


def test_mlm_loss_at_masked_positions_equals_the_full_logits_loss():
    torch.manual_seed(0)
    model = GenolongForMaskedLM(tiny_config()).eval()
    ids = random_ids(2, 60)
    labels = torch.full_like(ids, IGNORE_INDEX)
    masked = torch.rand(ids.shape, generator=torch.Generator().manual_seed(3)) < 0.15
    labels[masked] = ids[masked]
    with torch.no_grad():
        full_logits = model(ids).logits  # (B, L, V)
        output = model(ids, labels=labels)
    assert full_logits.shape == (2, 60, 64)
    assert output.logits.shape == (int(masked.sum()), 64)
    torch.testing.assert_close(output.logits, full_logits[masked], rtol=0, atol=1e-5)
    expected = F.cross_entropy(full_logits.view(-1, 64), labels.view(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(output.loss, expected, rtol=1e-6, atol=1e-6)


def test_mlm_decoder_is_tied_to_the_token_embedding():
    model = GenolongForMaskedLM(tiny_config())
    assert model.lm_head.decoder.weight is model.genolong.encoder.embeddings.token.weight


def test_binary_promoter_head_uses_cross_entropy_on_cls():
    torch.manual_seed(0)
    model = GenolongForSequenceClassification(tiny_config(num_labels=2)).eval()
    ids, labels = random_ids(3, 30), torch.tensor([0, 1, 1])
    with torch.no_grad():
        output = model(ids, labels=labels)
        cls = model.genolong(ids).last_hidden_state[:, 0]
    expected_logits = model.classifier.classifier(cls)
    torch.testing.assert_close(output.logits, expected_logits)
    torch.testing.assert_close(output.loss, F.cross_entropy(expected_logits, labels))


def test_chromatin_head_is_919_binary_classifiers_with_upweighted_positives():
    torch.manual_seed(0)
    config = tiny_config(num_labels=919, problem_type="multi_label_classification", positive_label_weight=8.0)
    model = GenolongForSequenceClassification(config).eval()
    ids = random_ids(2, 30)
    labels = (torch.rand(2, 919, generator=torch.Generator().manual_seed(1)) < 0.05).float()
    with torch.no_grad():
        output = model(ids, labels=labels)
    assert output.logits.shape == (2, 919)
    weights = torch.where(labels == 1, 8.0, 1.0)
    expected = F.binary_cross_entropy_with_logits(output.logits, labels, weight=weights)
    torch.testing.assert_close(output.loss, expected)


def test_problem_type_is_inferred_from_the_labels_as_in_transformers():
    model = GenolongForSequenceClassification(tiny_config(num_labels=3)).eval()
    ids = random_ids(2, 20)
    with torch.no_grad():
        single = model(ids, labels=torch.tensor([0, 2]))
        multi = model(ids, labels=torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]))
    torch.testing.assert_close(single.loss, F.cross_entropy(single.logits, torch.tensor([0, 2])))
    torch.testing.assert_close(
        multi.loss,
        F.binary_cross_entropy_with_logits(multi.logits, torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])),
    )


@pytest.mark.parametrize("pre_layer_norm", [False, True])
def test_gradient_checkpointing_gives_the_same_gradients(pre_layer_norm):
    torch.manual_seed(0)
    model = GenolongForMaskedLM(tiny_config(pre_layer_norm=pre_layer_norm)).train()
    ids = random_ids(2, 48)
    labels = torch.where(torch.arange(48) % 5 == 0, ids, IGNORE_INDEX)

    def gradients() -> dict[str, torch.Tensor]:
        model.zero_grad()
        model(ids, labels=labels).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    plain = gradients()
    model.activation_checkpointing_enable()
    assert model.genolong.encoder.gradient_checkpointing
    checkpointed = gradients()
    assert plain.keys() == checkpointed.keys()
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_gradient_checkpointing_replays_a_layout_redrawn_per_step():
    """BigBird with redraw_random_per_step: the recomputation must use the forward's random blocks."""
    torch.manual_seed(0)
    config = tiny_config(backbone="bigbird", num_hidden_layers=1, redraw_random_per_step=True)
    plain = GenolongForMaskedLM(config).train()
    checkpointed = GenolongForMaskedLM(config).train()
    checkpointed.load_state_dict(plain.state_dict())
    checkpointed.genolong.encoder.gradient_checkpointing = True
    ids = random_ids(1, 1024)
    labels = torch.where(torch.arange(1024) % 7 == 0, ids, IGNORE_INDEX)
    for model in (plain, checkpointed):
        model(ids, labels=labels).loss.backward()
    for (name, p), q in zip(plain.named_parameters(), checkpointed.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-8, msg=name)
