"""SLED (Ivgi et al. 2022): the windows, chunk-wise encoding against the plain encoder, fusion."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.model import tiny_config

from genolong.core.errors import ConfigError, UserError
from genolong.model.encoder import Encoder
from genolong.model.modeling import GenolongForSequenceClassification, GenolongModel
from genolong.model.sled import SledEncoder, SledFusion, sled_windows


def sled_config(**overrides):
    fields = dict(backbone="sled", sled_chunk_size=16, sled_context_padding=0.5)
    return tiny_config(**(fields | overrides))


def random_ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


def sled_encoder(**overrides) -> SledEncoder:
    torch.manual_seed(0)
    return SledEncoder(sled_config(**overrides)).double().eval()


def test_windows_of_the_papers_figure():
    """Fig. 2: c = 4, alpha = 0.5: one context token each side, two kept; the last chunk ends at n."""
    assert sled_windows(10, 4, 0.5) == [(0, 4, 0, 3), (2, 6, 3, 5), (4, 8, 5, 7), (6, 10, 7, 10)]
    assert sled_windows(9, 4, 0.5) == [(0, 4, 0, 3), (2, 6, 3, 5), (4, 8, 5, 7), (5, 9, 7, 9)]
    assert sled_windows(3, 4, 0.5) == [(0, 3, 0, 3)]
    assert sled_windows(0, 4, 0.5) == []


@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.25, 0.5])
@pytest.mark.parametrize("chunk", [1, 4, 16, 64])
def test_kept_spans_cover_every_token_once_in_order(chunk, alpha):
    pad = int(alpha * chunk / 2)
    for n in range(1, 300):
        windows = sled_windows(n, chunk, alpha)
        kept = [t for _, _, keep_start, keep_end in windows for t in range(keep_start, keep_end)]
        assert kept == list(range(n)), (n, chunk, alpha)
        assert all(end - start == min(n, chunk) for start, end, _, _ in windows)
        assert all(start <= keep_start < keep_end <= end for start, end, keep_start, keep_end in windows)
        if n > chunk:
            assert windows[-1][:2] == (n - chunk, n)
            assert windows[0][3] == chunk - pad
            assert len(windows) == 1 + math.ceil((n - chunk) / (chunk - 2 * pad))
            # every kept token except near the ends has at least P tokens of context on each side
            assert all(ks - s >= pad for s, _, ks, _ in windows[1:])
            assert all(e - ke >= pad for _, e, _, ke in windows[:-1])


def test_input_no_longer_than_a_chunk_equals_the_plain_encoder():
    encoder = sled_encoder()
    plain = Encoder(sled_config()).double().eval()
    plain.load_state_dict(encoder.state_dict())
    ids = random_ids(2, 16)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 11:] = False
    with torch.no_grad():
        torch.testing.assert_close(encoder(ids), plain(ids), rtol=0, atol=1e-12)
        torch.testing.assert_close(encoder(ids, mask)[mask], plain(ids, mask)[mask], rtol=0, atol=1e-12)


def test_each_kept_token_equals_a_full_attention_model_on_its_window_alone():
    """The chunk encoder is a plain ``full`` model: its checkpoint loads, and windows are independent."""
    torch.manual_seed(0)
    sled = GenolongModel(sled_config()).double().eval()
    full = GenolongModel(tiny_config()).double().eval()
    full.load_state_dict(sled.state_dict(), strict=True)
    ids = random_ids(2, 75)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 50:] = False
    with torch.no_grad():
        out = sled(ids, mask).last_hidden_state
        for row, length in enumerate([75, 50]):
            for start, end, keep_start, keep_end in sled_windows(length, 16, 0.5):
                alone = full(ids[row : row + 1, start:end]).last_hidden_state[0]
                expected = alone[keep_start - start : keep_end - start]
                torch.testing.assert_close(out[row, keep_start:keep_end], expected, rtol=0, atol=1e-12)
    assert torch.equal(out[1, 50:], torch.zeros(25, 32, dtype=torch.float64))


def test_changing_a_token_changes_only_the_tokens_whose_window_holds_it():
    encoder = sled_encoder()
    ids = random_ids(1, 80)
    changed = 37
    other = ids.clone()
    other[0, changed] = 5 if ids[0, changed] != 5 else 6
    with torch.no_grad():
        difference = (encoder(ids) - encoder(other))[0].abs().amax(dim=-1)  # (L,)
    holds = torch.zeros(80, dtype=torch.bool)
    for start, end, keep_start, keep_end in sled_windows(80, 16, 0.5):
        if start <= changed < end:
            holds[keep_start:keep_end] = True
    assert torch.equal(difference[~holds], torch.zeros(int((~holds).sum()), dtype=torch.float64))
    assert (difference[holds] > 0).all()


def test_stacked_and_looped_encoding_agree():
    stacked = sled_encoder()
    looped = sled_encoder(sled_chunks_per_call=1)
    looped.load_state_dict(stacked.state_dict())
    ids = random_ids(3, 70)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[2, 30:] = False
    with torch.no_grad():
        torch.testing.assert_close(looped(ids, mask), stacked(ids, mask), rtol=0, atol=1e-12)


@pytest.mark.parametrize("short", [41, 5])
def test_a_row_gives_the_same_vectors_alone_and_padded_in_a_batch(short):
    torch.manual_seed(0)
    model = GenolongModel(sled_config()).eval()
    ids = random_ids(2, 70)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, short:] = False
    with torch.no_grad():
        together = model(ids, mask).last_hidden_state
        alone = model(ids[1:, :short]).last_hidden_state
        first = model(ids[:1]).last_hidden_state
    torch.testing.assert_close(together[1, :short], alone[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(together[0], first[0], rtol=0, atol=1e-5)


def test_prefix_tokens_are_prepended_to_every_chunk_and_dropped():
    encoder = sled_encoder(sled_prefix_tokens=2)
    torch.nn.init.normal_(encoder.global_tokens)
    ids = random_ids(1, 40)
    with torch.no_grad():
        out = encoder(ids)
        for start, end, keep_start, keep_end in sled_windows(40, 16, 0.5):
            alone = Encoder.forward(encoder, ids[:, start:end])  # the plain encoder, prefix included
            torch.testing.assert_close(
                out[0, keep_start:keep_end],
                alone[0, keep_start - start : keep_end - start],
                rtol=0,
                atol=1e-12,
            )
        without = sled_encoder()(ids)
    assert out.shape == (1, 40, 32) and (out - without).abs().max() > 1e-3


def test_sequences_longer_than_the_position_table():
    encoder = sled_encoder(max_position_embeddings=16)
    assert encoder(random_ids(1, 100)).shape == (1, 100, 32)


def test_fusions_pool_the_real_tokens():
    hidden = torch.tensor([[[1.0, -2.0], [3.0, 0.0], [5.0, 9.0]]])
    mask = torch.tensor([[True, True, False]])
    fuse = {
        mode: SledFusion(sled_config(hidden_size=2, num_attention_heads=1, sled_fusion=mode))
        for mode in ("mean", "max", "cls")
    }
    assert fuse["mean"](hidden, mask).tolist() == [[[2.0, -1.0]]]
    assert fuse["max"](hidden, mask).tolist() == [[[3.0, 0.0]]]
    assert fuse["max"](hidden).tolist() == [[[5.0, 9.0]]]
    assert fuse["cls"](hidden, mask).tolist() == [[[1.0, -2.0]]]


@pytest.mark.parametrize(("fusion", "sees_the_end"), [("attention", True), ("mean", True), ("cls", False)])
def test_the_classifier_reads_the_fused_vector(fusion, sees_the_end):
    torch.manual_seed(0)
    model = GenolongForSequenceClassification(sled_config(sled_fusion=fusion, num_labels=3)).eval()
    ids = random_ids(2, 64)
    other = ids.clone()
    other[:, -1] = 5 if ids[0, -1] != 5 else 6  # a token far outside the first chunk
    mask = torch.ones_like(ids)
    with torch.no_grad():
        logits = model(ids, mask).logits
        hidden = model.genolong(ids, mask).last_hidden_state
        expected = model.classifier.classifier(model.fusion(hidden, mask)[:, 0])
        changed = (model(other, mask).logits - logits).abs().max()
    torch.testing.assert_close(logits, expected)
    assert (changed > 1e-6) == sees_the_end


def test_short_input_classifier_with_cls_fusion_equals_the_plain_model():
    torch.manual_seed(0)
    sled = GenolongForSequenceClassification(sled_config(sled_fusion="cls", num_labels=2)).eval()
    full = GenolongForSequenceClassification(tiny_config(num_labels=2)).eval()
    full.load_state_dict(sled.state_dict(), strict=True)
    ids = random_ids(2, 16)
    with torch.no_grad():
        torch.testing.assert_close(sled(ids).logits, full(ids).logits, rtol=0, atol=1e-6)


def test_attention_fusion_trains_and_masks_padding():
    torch.manual_seed(0)
    model = GenolongForSequenceClassification(sled_config(num_labels=2)).train()
    ids = random_ids(2, 50)
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    output = model(ids, mask, labels=torch.tensor([0, 1]))
    output.loss.backward()
    assert model.fusion.query.grad.abs().sum() > 0
    assert model.genolong.encoder.blocks[0].qkv.weight.grad.abs().sum() > 0
    model.eval()
    other = ids.clone()
    other[1, 30:] = 7
    with torch.no_grad():
        torch.testing.assert_close(model(ids, mask).logits, model(other, mask).logits, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sled_context_padding": 0.6}, r"alpha\) must be in \[0, 0.5\]"),
        ({"sled_chunk_size": 2048}, "sled_chunk_size=2048 exceeds max_position_embeddings=1024"),
        ({"sled_fusion": "sum"}, "unknown sled_fusion 'sum'"),
        ({"sled_chunk_size": 0}, "sled_chunk_size must be an integer >= 1"),
    ],
)
def test_impossible_settings_are_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        sled_config(**overrides)


@pytest.mark.parametrize("padding", [[3], list(range(30))])
def test_padding_before_real_tokens_or_an_empty_row_is_a_user_error(padding):
    mask = torch.ones(2, 30, dtype=torch.bool)
    mask[1, padding] = False
    with pytest.raises(UserError, match="run of real tokens followed by padding"):
        sled_encoder()(random_ids(2, 30), mask)


def test_preset_model_round_trips_and_its_mlm_checkpoint_starts_a_classifier(tmp_path):
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

    from genolong.model.modeling import GenolongForMaskedLM
    from genolong.training.pretrain import load_pretrain_config

    config = load_pretrain_config("sled").model_config(vocab_size=64)
    assert (config.backbone, config.sled_chunk_size, config.sled_context_padding) == ("sled", 256, 0.5)
    torch.manual_seed(0)
    mlm = GenolongForMaskedLM(config).eval()
    mlm.save_pretrained(tmp_path / "mlm")
    ids = random_ids(2, 700)
    with torch.no_grad():
        loaded_mlm = AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm").eval()
        torch.testing.assert_close(mlm(ids).logits, loaded_mlm(ids).logits, rtol=0, atol=1e-6)
    classifier = AutoModelForSequenceClassification.from_pretrained(tmp_path / "mlm", num_labels=2).eval()
    assert classifier.fusion.query.abs().sum() > 0  # initialised, not loaded
    classifier.save_pretrained(tmp_path / "classifier")
    loaded = GenolongForSequenceClassification.from_pretrained(tmp_path / "classifier").eval()
    with torch.no_grad():
        torch.testing.assert_close(classifier(ids).logits, loaded(ids).logits, rtol=0, atol=1e-6)
        torch.testing.assert_close(classifier.genolong(ids)[0], mlm.genolong(ids)[0], rtol=0, atol=1e-6)


def test_the_attention_benchmark_measures_sled():
    """``genolong bench attention`` builds it by name, at any length (positions restart per chunk)."""
    from genolong.experiments.bench.attention import BenchSize, Spec, run_phase

    size = BenchSize(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    spec = Spec(model="sled", length=300, size=size, repeats=1)
    for phase in ("forward", "train"):
        assert run_phase(spec, phase)["time_s"] > 0
