"""``--set section.key=value`` and the shortcut flags (genolong/config/, commands/arguments.py):
values are YAML, keys are checked as a file's keys are (typos get the closest key), a shortcut is
the same as its ``--set``, a backbone switch drops the old backbone's parameters, and the typed
``model:`` section round-trips through YAML."""

from __future__ import annotations

import argparse

import pytest

from genolong.cli.arguments import add_config_arguments, config_overrides, training_devices
from genolong.cli.main import main
from genolong.config import dump_yaml, load_yaml, parse_assignment
from genolong.config.presets import apply_overrides
from genolong.core.errors import ConfigError, UserError
from genolong.model.section import ModelSection
from genolong.training.pretrain import PretrainConfig, load_pretrain_config


@pytest.mark.parametrize("text, expected", [
    ("train.max_steps=100", ("train.max_steps", 100)),
    ("train.learning_rate=1e-4", ("train.learning_rate", 1e-4)),
    ("train.learning_rate=2.5E+3", ("train.learning_rate", 2500.0)),
    ("train.learning_rate=0.5", ("train.learning_rate", 0.5)),
    ("train.gradient_checkpointing=true", ("train.gradient_checkpointing", True)),
    ("crop_min_bp=null", ("crop_min_bp", None)),
    ("model.backbone=bigbird", ("model.backbone", "bigbird")),
    ("train.devices=0,1", ("train.devices", "0,1")),
    ("corpus.sentence_bp=[500, 2000]", ("corpus.sentence_bp", [500, 2000])),
    (" max_len = 512", ("max_len", 512)),
    ("tokenizer.special=a=b", ("tokenizer.special", "a=b")),
])
def test_an_assignment_is_a_key_and_a_yaml_value(text, expected):
    assert parse_assignment(text) == expected


@pytest.mark.parametrize("text, message", [
    ("train.max_steps", "expected section.key=value"),
    ("=3", "expected section.key=value"),
    ("train.=3", "expected section.key=value"),
    ("train.max_steps=[1,", "is not valid YAML"),
])
def test_a_malformed_assignment_is_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_assignment(text)


def test_shortcut_flags_and_set_are_one_mechanism():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, ["--max-steps", "--devices", "--backbone"])
    args = parser.parse_args(["--max-steps", "5", "--devices", "2", "--set", "train.max_steps=7",
                              "--set", "model.hidden_size=64"])
    assert config_overrides(args) == {"train.max_steps": 7, "train.devices": 2, "model.hidden_size": 64}
    assert config_overrides(parser.parse_args(["--devices", "0,1"])) == {"train.devices": "0,1"}
    assert config_overrides(parser.parse_args([])) == {}
    assert "--learning-rate" not in parser.format_help()


@pytest.mark.parametrize("text, expected", [("2", 2), ("auto", "auto"), ("0,1", "0,1"), ("two", "two")])
def test_training_devices_are_a_count_or_what_lightning_reads(text, expected):
    assert training_devices(text) == expected  # the config checks the text (``two`` is refused there)


def test_a_backbone_override_drops_the_old_backbones_parameters():
    bigbird = load_pretrain_config("tiny")
    assert bigbird.model.backbone == "bigbird" and "block_size" not in bigbird.model.settings
    longformer = load_pretrain_config("tiny", {"model.backbone": "longformer", "model.attention_window": 64,
                                               "train.max_steps": 3})
    assert longformer.model.settings == bigbird.model.settings | {"backbone": "longformer", "attention_window": 64}
    assert longformer.train.max_steps == 3 and longformer.model_config(300).backbone == "longformer"


def test_an_override_into_a_scalar_section_is_refused():
    with pytest.raises(ConfigError, match="c.yaml: train must be a mapping"):
        apply_overrides({"train": [1, 2]}, {"train.max_steps": 3}, "c.yaml")


@pytest.mark.parametrize("options, message", [
    (["--set", "train.max_step=3"], "unknown key train.max_step (did you mean max_steps?)"),
    (["--set", "model.num_hiden_layers=2"], "unknown key model.num_hiden_layers (did you mean num_hidden_layers?)"),
    (["--set", "model.hidden_dropout_prob=high"], "model.hidden_dropout_prob must be a finite number"),
    (["--set", "train=3"], "train must be a mapping"),
    (["--set", "max_len=1000"], "block_size 64 does not divide max_position_embeddings 1000"),
    (["--set", "train.max_steps"], "argument --set: expected section.key=value, got 'train.max_steps'"),
])
def test_a_bad_override_is_one_line_before_any_work(tmp_path, capsys, options, message):
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), *options]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_the_model_section_is_typed_and_round_trips_through_yaml(tmp_path):
    config = load_pretrain_config("tiny")
    assert isinstance(config.model, ModelSection)
    (tmp_path / "c.yaml").write_text(dump_yaml(config))
    assert "  backbone: bigbird\n" in (tmp_path / "c.yaml").read_text()  # flat, as a preset writes it
    assert load_yaml(tmp_path / "c.yaml", PretrainConfig) == config
    with pytest.raises(UserError, match="asks for vocab_size=999 but the tokenizer has 300 tokens"):
        ModelSection({"vocab_size": 999}).genolong_config(max_len=64, vocab_size=300)
