"""The converted-model benchmark entries and the CPU matrix-product probe of ``--precision auto``."""

from __future__ import annotations

import pytest
import torch

from genolong.experiments.bench import attention as attention_bench
from genolong.experiments.bench import runner
from genolong.experiments.bench.converted import CONVERTED
from genolong.runtime import cpu_bf16

TINY = attention_bench.BenchSize(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_converted_entries_compute_what_their_transformers_peer_computes(name):
    """Same weights, same outputs: the benchmark compares implementations, not models."""
    length = 1024 if name == "converted-bigbird" else 96  # BigBird: past the full-attention fallback
    spec = attention_bench.Spec(model=name, length=length, size=TINY)
    torch.manual_seed(0)
    ours, _ = attention_bench.build(spec, mlm=True)
    torch.manual_seed(0)
    theirs, _ = attention_bench.build(attention_bench.Spec(model=CONVERTED[name], length=length, size=TINY), mlm=True)
    ids = torch.randint(5, TINY.vocab_size, (1, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        difference = (ours.eval()(input_ids=ids).logits - theirs.eval()(input_ids=ids).logits).abs().max()
    assert difference < 1e-4


def test_matmul_rates_are_measured():
    rates = cpu_bf16.matmul_rates(64)
    assert rates.fp32 > 0 and rates.bf16 > 0


def test_the_plan_check_accepts_the_peers_on_request():
    """Peers (converted ones included) are built by their own code, not as genolong backbones."""
    pairs = [(name, 4096) for name in (*attention_bench.OPTIONAL_PEERS, *attention_bench.PEERS)]
    runner.check_plan(pairs, attention_bench.BenchSize())
