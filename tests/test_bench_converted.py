"""The converted-model benchmark entries and the CPU bf16 check of ``genolong bench --dtype``."""

from __future__ import annotations

import logging

import pytest
import torch

from genolong.bench import attention as attention_bench
from genolong.bench import cpu_precision, runner
from genolong.bench.converted import CONVERTED

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


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n")
    assert cpu_precision.cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_precision.cpu_flags(tmp_path / "missing") == set()


def test_auto_never_picks_bf16_without_native_support(monkeypatch):
    def no_measurement():
        raise AssertionError("auto must not time bf16 on a CPU without the flags")

    monkeypatch.setattr(cpu_precision, "matmul_rates", no_measurement)
    assert cpu_precision.resolve_cpu_dtype("auto", flags={"avx2"}) == "fp32"
    assert cpu_precision.resolve_cpu_dtype("fp32", flags={"amx_bf16"}) == "fp32"


def test_auto_picks_bf16_where_flagged_and_measured_fast(monkeypatch):
    monkeypatch.setattr(cpu_precision, "matmul_rates", lambda: cpu_precision.MatmulRates(fp32=100.0, bf16=400.0))
    assert cpu_precision.resolve_cpu_dtype("auto", flags={"amx_bf16"}) == "bf16"
    monkeypatch.setattr(cpu_precision, "matmul_rates", lambda: cpu_precision.MatmulRates(fp32=100.0, bf16=50.0))
    assert cpu_precision.resolve_cpu_dtype("auto", flags={"avx512_bf16"}) == "fp32"


def test_explicit_bf16_on_a_slow_cpu_warns_with_the_measurement(monkeypatch, caplog):
    monkeypatch.setattr(cpu_precision, "matmul_rates", lambda: cpu_precision.MatmulRates(fp32=130.0, bf16=0.3))
    with caplog.at_level(logging.WARNING, logger="genolong.bench.cpu_precision"):
        assert cpu_precision.resolve_cpu_dtype("bf16", flags={"avx2"}) == "bf16"
    assert "no avx512_bf16/amx_bf16 flag" in caplog.text and "0.3 GFLOP/s in bf16 against 130.0 in fp32" in caplog.text


def test_matmul_rates_are_measured():
    rates = cpu_precision.matmul_rates(64)
    assert rates.fp32 > 0 and rates.bf16 > 0


def test_the_plan_check_accepts_the_peers_on_request():
    """Peers (converted ones included) are built by their own code, not as genolong backbones."""
    pairs = [(name, 4096) for name in (*attention_bench.OPTIONAL_PEERS, *attention_bench.PEERS)]
    runner.check_plan(pairs, attention_bench.BenchSize())
