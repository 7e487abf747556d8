"""Nucleotide Transformer v2 as transformers' ESM computes it with NT v2's feed-forward: the peer of
converted NT v2 models in ``genolong bench attention`` (``hf-ntv2``) and the oracle of their parity
tests. transformers' ESM has NT v2's rotary positions but not its gated feed-forward (InstaDeep's
remote code, not copied here: its licence keeps it out), written here from the published definition.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SwiGLU(nn.Module):
    """NT v2's ``intermediate``: ``dense`` (2 I, N) without bias, then ``silu(x1) * x2`` with ``x1`` the
    first half: (..., N) -> (..., I). ``gate_first`` False gates the second half (a planted mistake)."""

    def __init__(self, hidden: int, intermediate: int, gate_first: bool = True):
        super().__init__()
        self.dense = nn.Linear(hidden, 2 * intermediate, bias=False)
        self.gate_first = gate_first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = self.dense(x).chunk(2, dim=-1)
        return F.silu(first) * second if self.gate_first else F.silu(second) * first


class SwiGLUOutput(nn.Module):
    """NT v2's ``output``: ``dense`` without bias, then the residual: (..., I), (..., N) -> (..., N)."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.dense = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.dense(x) + residual


def with_swiglu(model: nn.Module) -> nn.Module:
    """A transformers ``Esm...`` model with every layer's feed-forward made NT v2's (in place);
    its config records ``add_bias_fnn: false`` as NT v2's does."""
    config = model.config
    for layer in model.esm.encoder.layer:
        layer.intermediate = SwiGLU(config.hidden_size, config.intermediate_size)
        layer.output = SwiGLUOutput(config.hidden_size, config.intermediate_size)
    config.add_bias_fnn = False
    return model
