"""GenolongConfig validation, save/load round trips and transformers' Auto classes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from helpers.model import probe_attention, tiny_config  # noqa: F401

from genolong.core.errors import ConfigError
from genolong.model.configuration import GenolongConfig
from genolong.model.modeling import GenolongForMaskedLM, GenolongForSequenceClassification, GenolongModel


def random_ids(batch: int, length: int) -> torch.Tensor:
    return torch.randint(5, 64, (batch, length), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("model_class", "overrides"),
    [
        (GenolongModel, {}),
        (GenolongForMaskedLM, {"pre_layer_norm": True}),
        (
            GenolongForSequenceClassification,
            {"num_labels": 919, "problem_type": "multi_label_classification"},
        ),
    ],
)
def test_save_load_round_trip_gives_identical_outputs(tmp_path, model_class, overrides):
    torch.manual_seed(0)
    model = model_class(tiny_config(**overrides)).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = model_class.from_pretrained(tmp_path).eval()
    assert loaded.config.to_diff_dict() == model.config.to_diff_dict()
    ids = random_ids(2, 40)
    with torch.no_grad():
        expected, actual = model(ids)[0], loaded(ids)[0]
    assert torch.equal(expected, actual)


def test_loaded_mlm_keeps_its_tied_decoder(tmp_path):
    GenolongForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    loaded = GenolongForMaskedLM.from_pretrained(tmp_path)
    assert loaded.lm_head.decoder.weight is loaded.genolong.encoder.embeddings.token.weight


@pytest.mark.usefixtures("probe_attention")
def test_backbone_parameters_round_trip_through_save_and_load(tmp_path):
    config = tiny_config(backbone="probe", probe_globals=3)
    assert (config.probe_globals, config.probe_multiple) == (3, 16)  # given, and merged default
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["backbone"] == "probe" and saved["probe_globals"] == 3
    loaded = GenolongConfig.from_pretrained(tmp_path)
    assert (loaded.backbone, loaded.probe_globals, loaded.probe_multiple) == ("probe", 3, 16)


def test_classifier_loads_the_pretrained_encoder(tmp_path):
    torch.manual_seed(0)
    mlm = GenolongForMaskedLM(tiny_config()).eval()
    mlm.save_pretrained(tmp_path)
    classifier = GenolongForSequenceClassification.from_pretrained(tmp_path, num_labels=2).eval()
    ids = random_ids(1, 30)
    with torch.no_grad():
        assert torch.equal(classifier.genolong(ids)[0], mlm.genolong(ids)[0])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"backbone": "nonsense"}, "unknown attention 'nonsense'"),
        (
            {"hidden_size": 30, "num_attention_heads": 4},
            "hidden_size=30 is not divisible by num_attention_heads=4",
        ),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
        ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob must be in \[0, 1\)"),
        ({"hidden_act": "swish2"}, "unknown hidden_act 'swish2'"),
        ({"pad_token_id": 64}, "pad_token_id=64 is not a token id below vocab_size=64"),
        ({"problem_type": "ranking"}, "unknown problem_type 'ranking'"),
        ({"positive_label_weight": 0.0}, "positive_label_weight must be positive"),
    ],
)
def test_bad_configuration_raises_config_error(overrides, message):
    with pytest.raises(ConfigError, match=message) as error:
        tiny_config(**overrides)
    assert "\n" not in str(error.value)


@pytest.mark.usefixtures("probe_attention")
def test_backbone_specific_errors():
    with pytest.raises(ConfigError, match="max_position_embeddings=1000 is not a multiple of 16"):
        tiny_config(backbone="probe", max_position_embeddings=1000)
    with pytest.raises(ConfigError, match="probe_multiple must be positive"):
        tiny_config(backbone="probe", probe_multiple=0)
    with pytest.raises(ConfigError, match="probe_globals is a parameter of backbone 'probe', not of 'full'"):
        tiny_config(backbone="full", probe_globals=2)


def test_hf_activation_checkpointing_switches_the_encoder():
    model = GenolongForMaskedLM(tiny_config())
    model.activation_checkpointing_enable()
    assert model.genolong.encoder.gradient_checkpointing
    model.activation_checkpointing_disable()
    assert not model.genolong.encoder.gradient_checkpointing


AUTO_SCRIPT = """
import sys
{first}
import genolong.model
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification
import torch
config = AutoConfig.for_model("genolong", backbone="full", vocab_size=64, hidden_size=32, num_hidden_layers=1,
                              num_attention_heads=4, intermediate_size=64, max_position_embeddings=128)
assert type(config).__name__ == "GenolongConfig", type(config)
assert type(AutoModel.from_config(config)).__name__ == "GenolongModel"
torch.manual_seed(0)
model = AutoModelForMaskedLM.from_config(config).eval()
model.save_pretrained(sys.argv[1])
loaded = AutoModelForMaskedLM.from_pretrained(sys.argv[1]).eval()
assert type(loaded).__name__ == "GenolongForMaskedLM"
ids = torch.arange(5, 45)[None]
assert torch.equal(model(ids).logits, loaded(ids).logits)
classifier = AutoModelForSequenceClassification.from_pretrained(sys.argv[1], num_labels=2)
assert type(classifier).__name__ == "GenolongForSequenceClassification"
print("ok")
"""


@pytest.mark.parametrize("first", ["", "import transformers.models.auto.modeling_auto"])
def test_auto_classes_work_after_import_genolong_model(tmp_path, first):
    """In a fresh interpreter, whether transformers' Auto modules load after or before genolong."""
    script = AUTO_SCRIPT.format(first=first)
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_import_genolong_model_loads_the_models_not_the_training_stack():
    """Registering the models must not pull in Lightning or the tasks (and ``import genolong``, which the CLI
    imports first, not even the models: tests/cli/test_startup.py)."""
    script = ("import sys, genolong.model; "
              "print(*(m in sys.modules for m in ('genolong.model', 'lightning', 'genolong.tasks')))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "False", "False"]
