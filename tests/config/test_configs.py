"""Every shipped YAML preset loads, validates, and builds a (shrunk) model that runs."""

from __future__ import annotations

import pytest
import torch

from genolong.configs import available_presets, preset_path
from genolong.core.errors import UserError
from genolong.model.section import ModelSection
from genolong.training.pretrain import load_pretrain_config

SHRINK = {"model.hidden_size": 32, "model.num_hidden_layers": 1, "model.num_attention_heads": 2,
          "model.intermediate_size": 64}


@pytest.mark.parametrize("name", available_presets("pretrain"))
def test_pretrain_preset_builds_a_model(name):
    from genolong.model.modeling import GenolongForMaskedLM

    config = load_pretrain_config(name)
    full_size = config.model_config(vocab_size=config.tokenizer.vocab_size)
    assert full_size.max_position_embeddings >= config.max_len
    model = GenolongForMaskedLM(load_pretrain_config(name, SHRINK).model_config(vocab_size=300)).eval()
    ids = torch.randint(5, 300, (2, config.max_len))
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert logits.shape == (2, config.max_len, 300)


def test_presets_exist_and_unknown_names_are_clear():
    assert {"tiny", "base", "full", "longformer", "lsg"} <= set(available_presets("pretrain"))
    with pytest.raises(UserError, match="no pretrain preset 'huge'"):
        preset_path("pretrain", "huge")


@pytest.mark.parametrize("name", available_presets("compare"))
def test_compare_preset_builds_every_backbone(name):
    """Each backbone's pretraining config validates at the preset's max_len (and at every ablation
    length) and runs as a shrunk model; the fine-tuning config is a promoter one."""
    from genolong.experiments.compare import load_compare_config
    from genolong.model.modeling import GenolongForMaskedLM

    config = load_compare_config(name)
    for backbone in config.backbones:
        pretrain = config.pretrain_config(backbone, seed=0)
        assert pretrain.model.backbone == backbone
        assert pretrain.model_config(vocab_size=300).backbone == backbone
        shrunk = config.pretrain_config(backbone, seed=0, max_len=min(pretrain.max_len, 1024))
        shrunk.model = ModelSection(shrunk.model.settings | {"hidden_size": 32, "num_attention_heads": 2,
                                                             "intermediate_size": 64})
        model = GenolongForMaskedLM(shrunk.model_config(vocab_size=300)).eval()
        ids = torch.randint(5, 300, (1, shrunk.max_len))
        with torch.no_grad():
            assert model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.shape == (1, shrunk.max_len, 300)
        assert config.finetune_config(backbone, seed=0).task == "promoter"
    for backbone in config.ablation.backbones:
        for length in config.ablation.lengths:
            ablation = config.pretrain_config(backbone, seed=0, max_len=length)
            ablation.model_config(vocab_size=300)
