"""The registry is the single source of backbones: a backbone registered from this module (an
attention, its own encoder subclass and its own classifier pooling, and nothing else) pretrains,
fine-tunes, predicts and enters a comparison like the built-in ones."""

from __future__ import annotations

import csv
import inspect
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from helpers.classify import promoter_dataset
from torch import nn

from genolong.attention import (
    ATTENTIONS,
    Attention,
    available_attentions,
    register_attention,
)
from genolong.attention.base import long_length, require_int
from genolong.cli.main import main
from genolong.core.errors import ConfigError
from genolong.dna.sequence import read_fasta
from genolong.experiments.compare import CompareConfig, Workspace, load_compare_config, run_comparison
from genolong.model import modeling
from genolong.model.backbones import ENCODERS, POOLINGS, register_encoder, register_pooling
from genolong.model.configuration import GenolongConfig
from genolong.model.encoder import Encoder
from genolong.model.heads import IGNORE_INDEX
from genolong.resources import sample_genome


class ToyWindowAttention(Attention):
    """Each token attends to the tokens within ``toy_radius`` positions of it and to the first
    token ([CLS], so that every query sees a real key), real keys only.

    Shapes: q, k, v (B, H, L, D); padding_mask (B, L) bool or None; output (B, H, L, D).
    """

    config_defaults = {"toy_radius": 8}
    masked_tokens_input = "masked"

    def __init__(self, config, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.radius = config.toy_radius

    @classmethod
    def validate_config(cls, config) -> None:
        require_int(config, "toy_radius", 1, "toy")

    @classmethod
    def long_settings(cls, trained, max_length, block_size, global_tokens):
        """``convert --backbone toy``: positions copied up to ``max_length``, the radius from ``--block-size``."""
        if global_tokens:
            raise ConfigError("toy has no global tokens")
        return {"max_position_embeddings": long_length("toy", trained, max_length),
                "toy_radius": block_size or cls.config_defaults["toy_radius"]}

    def forward(self, q, k, v, padding_mask=None):
        positions = torch.arange(q.shape[2], device=q.device)
        mask = ((positions[:, None] - positions).abs() <= self.radius) | (positions == 0)  # (L, L)
        if padding_mask is not None:
            mask = mask & padding_mask[:, None, None, :]  # (B, 1, L, L)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)


class MaskedTokensEncoder(Encoder):
    """The plain encoder, also given the masked-LM positions (B, L) bool; it keeps their count."""

    masked_seen: int | None = None

    def forward(self, input_ids, attention_mask=None, masked=None):
        self.masked_seen = None if masked is None else int(masked.sum())
        return super().forward(input_ids, attention_mask)


class MeanPooling(nn.Module):
    """Mean of the real tokens' vectors: hidden (B, L, N), attention_mask (B, L) -> (B, 1, N)."""

    def __init__(self, config):
        super().__init__()

    def forward(self, hidden, attention_mask=None):
        if attention_mask is None:
            return hidden.mean(dim=1, keepdim=True)
        weights = attention_mask[..., None].to(hidden.dtype)
        return (hidden * weights).sum(dim=1, keepdim=True) / weights.sum(dim=1, keepdim=True)


@pytest.fixture(scope="module")
def toy():
    """Backbone "toy", registered for this module's tests."""
    register_attention("toy")(ToyWindowAttention)
    register_encoder("toy")(MaskedTokensEncoder)
    register_pooling("toy")(MeanPooling)
    yield "toy"
    for registry in (ATTENTIONS, ENCODERS, POOLINGS):
        del registry.entries["toy"]


def toy_config(**overrides) -> GenolongConfig:
    fields = dict(backbone="toy", vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=128, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    return GenolongConfig(**fields | overrides)


def test_the_models_name_no_backbone():
    source = inspect.getsource(modeling)
    assert not [name for name in available_attentions() if f'"{name}"' in source]


def test_registration_needs_an_attention_subclass():
    with pytest.raises(TypeError, match="is not a genolong.attention.Attention"):
        register_attention("plain")(nn.Identity)
    assert "plain" not in available_attentions()


def test_a_registered_backbone_is_everywhere(toy):
    builtin = ["bigbird", "full", "longformer", "lsg", "sled", "vcc"]  # one module each in genolong/attention/
    assert available_attentions() == sorted([*builtin, toy])
    assert list(CompareConfig().backbones) == available_attentions()
    with pytest.raises(ConfigError, match="toy: toy_radius must be an integer >= 1"):
        toy_config(toy_radius=0)
    with pytest.raises(ConfigError, match="toy_radius is a parameter of backbone 'toy', not of 'full'"):
        toy_config(backbone="full", toy_radius=4)


def test_the_models_use_what_the_backbone_declares(toy):
    torch.manual_seed(0)
    ids = torch.randint(5, 64, (2, 40))
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, 3:9] = ids[:, 3:9]
    mlm = modeling.GenolongForMaskedLM(toy_config()).eval()
    assert type(mlm.genolong.encoder) is MaskedTokensEncoder
    assert mlm(ids, labels=labels).loss.isfinite()
    assert mlm.genolong.encoder.masked_seen == 12
    classifier = modeling.GenolongForSequenceClassification(toy_config(num_labels=2)).eval()
    assert type(classifier.fusion) is MeanPooling
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    padded = ids.clone()
    padded[1, 30:] = 7
    together = classifier(padded, attention_mask=mask).logits
    alone = classifier(ids[1:, :30]).logits
    torch.testing.assert_close(together[1:], alone, rtol=1e-5, atol=1e-6)


def test_a_full_model_converts_to_the_toy_backbone_for_long_inputs(toy, tmp_path, capsys, caplog):
    from helpers.classify import tiny_masked_lm

    from genolong.model.loading import load_model

    torch.manual_seed(0)
    tiny_masked_lm(tmp_path / "short", tmp_path / "tokenizer", 64)
    with caplog.at_level("INFO", logger="genolong"):
        assert main(["convert", str(tmp_path / "short"), "--out", str(tmp_path / "long"), "--backbone", "toy",
                     "--max-length", "256", "--block-size", "5"]) == 0
    assert "toy: positions 64 -> 256 (rows 64..255 copy rows 0..63), toy attention, 0 added global tokens" in caplog.text
    model = load_model(modeling.GenolongForMaskedLM, tmp_path / "long")
    assert (model.config.backbone, model.config.max_position_embeddings, model.config.toy_radius) == (toy, 256, 5)
    assert isinstance(model.genolong.encoder.blocks[0].attention, ToyWindowAttention)
    assert model(torch.randint(5, 60, (1, 200))).logits.shape[:2] == (1, 200)
    assert main(["convert", str(tmp_path / "short"), "--out", str(tmp_path / "x"), "--backbone", "toy",
                 "--max-length", "32"]) == 2
    assert "--backbone toy needs --max-length N >= the 64 trained positions" in capsys.readouterr().err


def test_toy_backbone_pretrains_finetunes_predicts_and_compares(toy, real_data, tmp_path):
    preset = load_compare_config("micro")
    config = replace(preset, backbones={toy: {"toy_radius": 8}}, ablation=replace(preset.ablation, backbones=[toy]))
    space = Workspace(sample_genome(), tmp_path / "compare", config, show_progress=False)
    promoters = promoter_dataset(real_data, tmp_path / "promoters", positives=30, negatives=60)
    [row] = run_comparison(space, promoters, [toy])
    assert row["backbone"] == toy and row["pretrain_steps"] == 4 and 0 < row["val_bpc"] < 4
    assert 0 <= row["promoter_auroc"] <= 1 and row["infer_windows_per_s"] > 0
    model = tmp_path / "compare" / "backbones" / toy / "finetune" / "model"
    records = list(read_fasta(real_data / "promoters" / "Mouse_tata.fa", unique_names=False))[-3:]
    fasta = tmp_path / "query.fa"
    fasta.write_text("".join(f">{r.name}\n{r.sequence}\n" for r in records))
    assert main(["predict-promoter", str(fasta), "--model", str(model), "--out", str(tmp_path / "p.tsv")]) == 0
    with open(tmp_path / "p.tsv", newline="") as handle:
        rows = list(csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t"))
    assert [r["id"] for r in rows] == [r.name for r in records]
    assert all(0 <= float(r["probability"]) <= 1 for r in rows)
