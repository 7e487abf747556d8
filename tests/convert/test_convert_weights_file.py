"""``model.safetensors`` written one tensor at a time (the progress bar of ``genolong convert``)."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from genolong.convert.weights_file import write_safetensors
from genolong.model.configuration import GenolongConfig
from genolong.model.modeling import GenolongForMaskedLM


class Counter:
    def __init__(self):
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n


def test_the_file_is_what_save_pretrained_writes(tmp_path):
    """Same names (the tied decoder left out), same tensors, one progress step per tensor."""
    torch.manual_seed(0)
    model = GenolongForMaskedLM(GenolongConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                               num_attention_heads=2, intermediate_size=32))
    model.save_pretrained(str(tmp_path / "theirs"))
    counter = Counter()
    write_safetensors(model.state_dict(), tmp_path / "ours.safetensors", counter)
    theirs, ours = load_file(str(tmp_path / "theirs" / "model.safetensors")), load_file(str(tmp_path / "ours.safetensors"))
    assert "lm_head.decoder.weight" not in ours and sorted(ours) == sorted(theirs)
    assert all(torch.equal(ours[name], theirs[name]) for name in theirs)
    assert counter.n == len(ours)


def test_every_dtype_and_shape_round_trips(tmp_path):
    state = {
        "half": torch.randn(3, 5).to(torch.bfloat16),
        "ids": torch.arange(7, dtype=torch.int64),
        "flags": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
        "strided": torch.randn(6, 4).t(),
    }
    write_safetensors(state, tmp_path / "w.safetensors")
    loaded = load_file(str(tmp_path / "w.safetensors"))
    assert sorted(loaded) == sorted(state)
    assert all(loaded[name].dtype == t.dtype and torch.equal(loaded[name], t) for name, t in state.items())
