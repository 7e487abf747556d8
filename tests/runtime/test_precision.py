"""``--precision``: the CPU check (flags, measured product, cache), the choice, and bf16 scores against float32."""

from __future__ import annotations

import argparse
import json
import logging

import numpy as np
import pytest
from helpers.classify import random_classifier, tiny_tokenizer

from genolong.classifier.directory import Classifier
from genolong.cli.arguments import add_precision_argument
from genolong.cli.main import main
from genolong.core.errors import UserError
from genolong.dna.sequence import read_fasta, write_fasta
from genolong.runtime import precision
from genolong.tasks.settings import TrainConfig

XEON = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Test\nflags\t\t: fpu avx2 avx512f amx_bf16 avx512_bf16\n"
EPYC = "processor\t: 0\nmodel name\t: AMD EPYC Test\nflags\t\t: fpu avx2 avx512f\n"


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    """Point the check at a fake /proc/cpuinfo and count the probe's calls; ``cpu(text, fp32, bf16)``."""
    calls = []

    def fake(text: str, fp32: float = 92.0, bf16: float = 1000.0):
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        original = precision.cpu_bf16
        monkeypatch.setattr(precision, "cpu_bf16", lambda cpuinfo=path, **kw: original(cpuinfo, **kw))

        def rates():
            calls.append(1)
            from genolong.runtime.cpu_bf16 import MatmulRates
            return MatmulRates(fp32=fp32, bf16=bf16)

        monkeypatch.setattr("genolong.runtime.cpu_bf16.matmul_rates", rates)
        return calls

    monkeypatch.delenv(precision.ENV)
    precision._announced.clear()
    return fake


def test_flags_and_model_are_read_from_cpuinfo(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(XEON)
    assert precision.cpu_info(path) == ("Intel(R) Xeon(R) Test", {"fpu", "avx2", "avx512f", "amx_bf16", "avx512_bf16"})
    assert precision.cpu_info(tmp_path / "missing")[1] == set()


def test_auto_is_bf16_on_a_flagged_cpu_whose_product_is_fast(cpu, capsys):
    cpu(XEON, fp32=92.0, bf16=1000.0)
    assert precision.resolve_precision("auto", gpu=False) == "bf16-mixed"
    err = capsys.readouterr().err
    assert err == "precision: bf16 autocast on the CPU (avx512_bf16/amx_bf16, bf16 product at 1,000 GFLOP/s " \
                  "against 92 in float32)\n"
    precision.resolve_precision("auto", gpu=False)
    assert capsys.readouterr().err == ""  # printed once per command


def test_auto_is_float32_where_the_flag_is_there_but_the_product_is_slow(cpu):
    cpu(XEON, fp32=100.0, bf16=150.0)  # faster, but below MIN_SPEEDUP
    assert precision.resolve_precision("auto", gpu=False) == "32-true"


def test_auto_never_measures_on_a_cpu_without_the_flags(cpu, capsys):
    calls = cpu(EPYC)
    assert precision.resolve_precision("auto", gpu=False) == "32-true"
    assert calls == []
    assert "no avx512_bf16/amx_bf16 flag" in capsys.readouterr().err


def test_explicit_choices_are_honoured_and_slow_bf16_warns_with_the_measurement(cpu, caplog):
    calls = cpu(EPYC, fp32=130.0, bf16=0.3)
    assert precision.resolve_precision("32", gpu=False) == "32-true" and calls == []
    with caplog.at_level(logging.WARNING, logger="genolong.runtime.precision"):
        assert precision.resolve_precision("bf16", gpu=False) == "bf16-mixed"
    assert "no avx512_bf16/amx_bf16 flag" in caplog.text and "0.3 GFLOP/s against 130.0" in caplog.text


def test_the_environment_decides_auto(cpu, monkeypatch, capsys):
    cpu(XEON)
    monkeypatch.setenv(precision.ENV, "32")
    assert precision.resolve_precision("auto", gpu=False) == "32-true"
    assert precision.resolve_precision("bf16", gpu=False) == "bf16-mixed"  # an explicit choice wins
    assert "(GENOLONG_PRECISION=32)" in capsys.readouterr().err
    monkeypatch.setenv(precision.ENV, "fast")
    with pytest.raises(UserError, match="GENOLONG_PRECISION must be one of auto, 32, bf16"):
        precision.resolve_precision("auto", gpu=False)


def test_auto_on_a_gpu_keeps_bf16_where_the_card_has_it(cpu, monkeypatch):
    calls = cpu(XEON)
    monkeypatch.setattr(precision, "_gpu_bf16", lambda: True)
    assert precision.resolve_precision("auto", gpu=True) == "bf16-mixed"
    monkeypatch.setattr(precision, "_gpu_bf16", lambda: False)
    assert precision.resolve_precision("auto", gpu=True) == "32-true"
    assert calls == []


def test_training_resolves_auto_by_the_same_rule_as_inference(cpu, monkeypatch):
    cpu(EPYC)
    monkeypatch.setattr("genolong.tasks.settings.uses_gpu", lambda accelerator: True)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr(precision, "_gpu_bf16", lambda: False)
    train = TrainConfig(precision="auto", accelerator="gpu")
    assert train.resolved_precision() == precision.precision_on("auto", "cuda") == "32-true"
    monkeypatch.setenv(precision.ENV, "bf16")
    assert train.resolved_precision() == precision.precision_on("auto", "cuda") == "bf16-mixed"


def test_devices_and_accelerators_resolve_alike(cpu, monkeypatch):
    cpu(EPYC)
    assert precision.precision_on(None, "cuda:0") == "32-true"  # library use: float32
    assert [precision.precision_on("bf16", target) for target in ("cpu", "auto", "mps")] == ["bf16-mixed"] * 3
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr(precision, "_gpu_bf16", lambda: False)
    assert [precision.precision_on("auto", target) for target in ("cuda:1", "gpu", "auto")] == ["32-true"] * 3


def test_the_measurement_is_cached_per_machine(cpu):
    calls = cpu(XEON)
    assert precision.cpu_bf16().fast and precision.cpu_bf16().fast
    assert len(calls) == 1
    [entry] = (precision.cache_home() / "precision").iterdir()
    assert json.loads(entry.read_text())["bf16_gflops"] == 1000.0
    entry.write_text("{not json")  # a corrupt entry is measured again
    assert precision.cpu_bf16().fast and len(calls) == 2
    assert json.loads(entry.read_text())["fp32_gflops"] == 92.0


def test_an_unwritable_cache_is_measured_each_time(cpu, monkeypatch, tmp_path):
    calls = cpu(XEON)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GENOLONG_HOME", str(tmp_path / "file"))  # a file: no directory can be made below it
    assert precision.cpu_bf16().fast and precision.cpu_bf16().fast
    assert len(calls) == 2


def test_aliases_and_bad_values_of_the_option():
    parser = argparse.ArgumentParser()
    add_precision_argument(parser)
    assert parser.parse_args([]).precision == "auto"
    assert parser.parse_args(["--precision", "fp32"]).precision == "32"
    assert parser.parse_args(["--precision", "bf16-mixed"]).precision == "bf16"
    with pytest.raises(SystemExit):
        parser.parse_args(["--precision", "16"])


#: Largest |bf16 - float32| of a probability of the tiny classifier (bf16 keeps 8 significant bits:
#: about 0.4 % per rounding; measured 2026-11-26: at most 0.011 on 64 real promoters).
TOLERANCE = 0.05


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")
    return random_classifier(tmp_path_factory.mktemp("model") / "promoter", tokenizer, task="promoter",
                             window_bp=251, min_bp=251, label_names=["promoter"], threshold=0.5)


def test_bf16_probabilities_are_those_of_float32_within_the_tolerance(model, real_data):
    """Forced bf16 on any CPU (emulated where the CPU has no bf16: slower, same rounding)."""
    sequences = [r.sequence for _, r in zip(range(16), read_fasta(real_data / "promoters" / "Mouse_tata.fa"),
                                            strict=False)]
    fp32 = Classifier.load(model, device="cpu", precision="32").probabilities(sequences)
    bf16 = Classifier.load(model, device="cpu", precision="bf16").probabilities(sequences)
    assert bf16.dtype == np.float32 and np.abs(bf16 - fp32).max() <= TOLERANCE
    assert not np.array_equal(bf16, fp32)  # bf16 did run


def test_predict_with_bf16_writes_the_float32_table_within_the_tolerance(model, real_data, tmp_path):
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, [r for _, r in zip(range(12), read_fasta(real_data / "promoters" / "Mouse_tata.fa"),
                                          strict=False)])
    tables = {}
    for choice in ("32", "bf16"):
        out = tmp_path / f"{choice}.tsv"
        assert main(["predict-promoter", str(fasta), "--model", str(model), "--out", str(out), "--device", "cpu",
                     "--precision", choice]) == 0
        rows = [line.split("\t") for line in out.read_text().splitlines() if not line.startswith("#")]
        column = rows[0].index("probability")
        tables[choice] = np.array([float(row[column]) for row in rows[1:]])
    assert len(tables["32"]) == 12
    assert np.abs(tables["bf16"] - tables["32"]).max() <= TOLERANCE
