"""Fine-tuning from a pretrained model (genolong/training/model_setup.py): the model's architecture
and attention win over a preset's; only what the user asks for on the command line changes them."""

from __future__ import annotations

import logging

import pytest
import torch
from helpers.classify import micro_config, tiny_tokenizer

from genolong.attention import build_attention
from genolong.dna.tokenizer import load_tokenizer
from genolong.model.configuration import GenolongConfig
from genolong.model.loading import save_model
from genolong.model.modeling import GenolongForMaskedLM
from genolong.training.model_setup import build_classifier_model


@pytest.fixture(scope="module")
def bigbird_pretrained(tmp_path_factory):
    """A 1-layer BigBird MLM with block_size 16 (the chromatin preset says 32, the promoter one
    says backbone full), saved like a pretraining run's OUT/model."""
    work = tmp_path_factory.mktemp("pretrained")
    tokenizer = load_tokenizer(tiny_tokenizer(work / "tok"))
    torch.manual_seed(0)
    mlm = GenolongForMaskedLM(GenolongConfig(
        backbone="bigbird", block_size=16, num_random_blocks=1, vocab_size=len(tokenizer), hidden_size=16,
        num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=128))
    (work / "model").mkdir()
    save_model(mlm, tokenizer, work / "model")
    return work / "model", tokenizer, mlm


def _encoder_weights_kept(model, mlm) -> None:
    pretrained = mlm.state_dict()
    for key, value in model.genolong.state_dict().items():
        if ".attention." not in key:
            torch.testing.assert_close(value, pretrained[f"genolong.{key}"])


def test_chromatin_preset_keeps_the_pretrained_block_size_and_logs_it(bigbird_pretrained, caplog):
    directory, tokenizer, mlm = bigbird_pretrained
    config = micro_config("chromatin")
    assert config.model.settings["block_size"] == 32  # the preset's, not the model's
    with caplog.at_level(logging.INFO, logger="genolong.training.model_setup"):
        model = build_classifier_model(config, 919, tokenizer, directory)
    assert (model.config.backbone, model.config.block_size, model.config.num_random_blocks) == ("bigbird", 16, 1)
    _encoder_weights_kept(model, mlm)
    torch.testing.assert_close(model.genolong.encoder.blocks[0].attention.random_block_draws,
                               mlm.genolong.encoder.blocks[0].attention.random_block_draws)
    taken = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("from the pretrained model"))
    assert all(f"{k}={v}" in taken for k, v in {"backbone": "bigbird", "block_size": 16, "num_random_blocks": 1,
                                                 "hidden_size": 16, "num_hidden_layers": 1}.items())
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "block_size=16 (config: 32)" in warned[0] and "hidden_size" not in warned[0]


def test_a_preset_never_switches_the_backbone_but_the_user_may(bigbird_pretrained, caplog):
    directory, tokenizer, mlm = bigbird_pretrained
    config = micro_config("promoter")  # promoter_tiny: backbone full
    with caplog.at_level(logging.WARNING, logger="genolong.training.model_setup"):
        kept = build_classifier_model(config, 1, tokenizer, directory)
    assert (kept.config.backbone, kept.config.block_size) == ("bigbird", 16)
    assert "backbone=bigbird (config: full)" in caplog.text
    switched = build_classifier_model(config, 1, tokenizer, directory, asked=["backbone"])
    assert switched.config.backbone == "full" and not hasattr(switched.config, "block_size")
    _encoder_weights_kept(switched, mlm)


def test_an_attention_parameter_the_user_asks_for_rebuilds_the_layout(bigbird_pretrained):
    directory, tokenizer, mlm = bigbird_pretrained
    config = micro_config("chromatin", **{"model.block_size": 8, "model.num_random_blocks": 2})
    model = build_classifier_model(config, 919, tokenizer, directory, asked=["block_size", "num_random_blocks"])
    assert (model.config.block_size, model.config.num_random_blocks) == (8, 2)
    _encoder_weights_kept(model, mlm)
    fresh = build_attention(model.config, 0)
    torch.testing.assert_close(model.genolong.encoder.blocks[0].attention.random_block_draws,
                               fresh.random_block_draws)


def test_the_command_passes_the_model_keys_the_user_set(tmp_path, monkeypatch):
    from genolong.cli.main import main
    from genolong.training import finetune

    seen = {}
    monkeypatch.setattr(finetune, "run_finetune", lambda *a, **kw: seen.update(kw) or {})
    (tmp_path / "data").mkdir()
    (tmp_path / "model").mkdir()
    assert main(["promoter", "finetune", "--data", str(tmp_path / "data"), "--model", str(tmp_path / "model"),
                 "--out", str(tmp_path / "run"), "--backbone", "bigbird", "--set", "model.block_size=8",
                 "--set", "train.max_steps=2"]) == 0
    assert sorted(seen["asked"]) == ["backbone", "block_size"]
