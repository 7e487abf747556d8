"""The optional residual convolution over the token embeddings (``local_conv_kernel``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers.model import tiny_config

from genolong.core.errors import ConfigError
from genolong.model.modeling import GenolongForSequenceClassification, GenolongModel


def random_ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_the_convolution_is_a_residual_gelu_over_the_token_embeddings():
    """Hand-built reference: t + gelu(conv1d(t)) with zero padding at the ends, then positions."""
    torch.manual_seed(0)
    model = GenolongModel(tiny_config(local_conv_kernel=5, embedding_layer_norm=False)).eval()
    embeddings = model.encoder.embeddings
    ids = random_ids(2, 30)
    tokens = embeddings.token(ids)  # (B, L, N)
    weight, bias = embeddings.local_conv.weight, embeddings.local_conv.bias  # (N, N, K), (N,)
    padded = F.pad(tokens, (0, 0, 2, 2))  # (B, L + 4, N)
    windows = padded.unfold(1, 5, 1)  # (B, L, N, K)
    conv = torch.einsum("blik,oik->blo", windows, weight) + bias
    expected = tokens + F.gelu(conv) + embeddings.position.weight[:30]
    with torch.no_grad():
        torch.testing.assert_close(embeddings(ids), expected, rtol=1e-5, atol=1e-5)


def test_padding_never_reaches_real_tokens_through_the_convolution():
    torch.manual_seed(0)
    model = GenolongModel(tiny_config(local_conv_kernel=9)).eval()
    ids = random_ids(1, 40)
    padded = torch.cat([ids, random_ids(1, 12, seed=3)], dim=1)  # padding rows hold real-looking ids
    mask = torch.cat([torch.ones(1, 40), torch.zeros(1, 12)], dim=1)
    with torch.no_grad():
        alone = model(ids).last_hidden_state
        with_padding = model(padded, mask).last_hidden_state
    torch.testing.assert_close(with_padding[:, :40], alone, rtol=0, atol=1e-5)


def test_a_motif_moves_with_the_sequence():
    """The convolution is translation-equivariant: without positions, shifting the input shifts its output."""
    torch.manual_seed(0)
    embeddings = GenolongModel(tiny_config(local_conv_kernel=7, embedding_layer_norm=False)).encoder.embeddings
    embeddings.position.weight.data.zero_()
    ids = random_ids(1, 40)
    with torch.no_grad():
        out = embeddings(ids)
        shifted = embeddings(torch.roll(ids, 5, dims=1))
    torch.testing.assert_close(shifted[:, 5 + 3 : -3], out[:, 3 : -5 - 3], rtol=0, atol=1e-6)


def test_save_and_load_keeps_the_convolution(tmp_path):
    torch.manual_seed(0)
    model = GenolongForSequenceClassification(tiny_config(local_conv_kernel=15, num_labels=1)).eval()
    model.save_pretrained(tmp_path)
    again = GenolongForSequenceClassification.from_pretrained(tmp_path).eval()
    assert again.config.local_conv_kernel == 15
    for name, weight in model.state_dict().items():
        assert torch.equal(again.state_dict()[name], weight), name
    ids = random_ids(2, 50)
    with torch.no_grad():
        torch.testing.assert_close(again(ids).logits, model(ids).logits, rtol=0, atol=1e-6)


def test_without_the_option_there_is_no_convolution():
    model = GenolongModel(tiny_config())
    assert model.encoder.embeddings.local_conv is None
    assert not any("local_conv" in name for name in model.state_dict())


@pytest.mark.parametrize("kernel", [0, 4, -3, 2.5, True])
def test_an_even_or_non_positive_width_is_refused(kernel):
    with pytest.raises(ConfigError, match="local_conv_kernel"):
        tiny_config(local_conv_kernel=kernel)
