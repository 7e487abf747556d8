"""``classifier_pooling``: a sequence classifier reading [CLS], or the mean / max of its real tokens."""

from __future__ import annotations

import pytest
import torch
from helpers.model import tiny_config

from genolong.classifier.scoring import supports_first_token_only
from genolong.core.errors import ConfigError
from genolong.inference.loop import ScanModule
from genolong.model.heads import pool_tokens
from genolong.model.modeling import GenolongForSequenceClassification


def random_ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_pool_tokens_by_hand():
    hidden = torch.tensor([[[1.0, -2.0], [3.0, 4.0], [100.0, 100.0]]])  # (1, 3, 2); row 3 is padding
    mask = torch.tensor([[1, 1, 0]])
    assert pool_tokens(hidden, mask, "cls").tolist() == [[[1.0, -2.0]]]
    assert pool_tokens(hidden, mask, "mean").tolist() == [[[2.0, 1.0]]]
    assert pool_tokens(hidden, mask, "max").tolist() == [[[3.0, 4.0]]]
    torch.testing.assert_close(pool_tokens(hidden, None, "mean"), torch.tensor([[[104 / 3, 34.0]]]))


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_the_classifier_reads_the_pooled_tokens_and_ignores_padding(pooling):
    torch.manual_seed(0)
    model = GenolongForSequenceClassification(tiny_config(classifier_pooling=pooling, num_labels=1)).eval()
    ids = random_ids(1, 30)
    padded = torch.cat([ids, random_ids(1, 10, seed=2)], dim=1)
    mask = torch.cat([torch.ones(1, 30), torch.zeros(1, 10)], dim=1)
    with torch.no_grad():
        hidden = model.genolong(ids).last_hidden_state
        expected = model.classifier(pool_tokens(hidden, None, pooling))[0]
        torch.testing.assert_close(model(ids).logits, expected, rtol=0, atol=0)
        torch.testing.assert_close(model(padded, mask).logits, expected, rtol=0, atol=1e-5)


def test_scans_do_not_take_the_first_token_shortcut_of_a_pooling_classifier():
    """The [CLS]-only last layer would be exact for [CLS] and wrong for a mean."""
    torch.manual_seed(0)
    model = GenolongForSequenceClassification(tiny_config(classifier_pooling="mean", num_labels=1))
    assert not supports_first_token_only(model)
    assert supports_first_token_only(GenolongForSequenceClassification(tiny_config(num_labels=1)))
    ids = random_ids(4, 20)
    with torch.no_grad():
        scanned = ScanModule(model, rc=False, columns=None).probabilities(ids, torch.ones_like(ids))
        torch.testing.assert_close(scanned, torch.sigmoid(model.eval()(ids).logits), rtol=0, atol=1e-6)


def test_save_and_load_keeps_the_pooling(tmp_path):
    model = GenolongForSequenceClassification(tiny_config(classifier_pooling="mean", num_labels=1))
    model.save_pretrained(tmp_path)
    assert GenolongForSequenceClassification.from_pretrained(tmp_path).config.classifier_pooling == "mean"


def test_unknown_pooling_and_a_backbone_with_its_own_pooling_are_refused():
    with pytest.raises(ConfigError, match="classifier_pooling"):
        tiny_config(classifier_pooling="sum")
    with pytest.raises(ConfigError, match="pools the tokens itself"):
        tiny_config(backbone="sled", classifier_pooling="mean")
