"""``genolong bench gpu``: its checks can fail, its CPU mode runs, its comparisons are right.

The whole CPU mode (every section, child processes included) runs as its own step of ``.ci/run``;
here each check is shown to catch what it is for (and, marked slow, the in-process sections run).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from genolong.attention.blocksparse import PATHS
from genolong.attention.full import full_attention
from genolong.core.errors import UserError
from genolong.experiments.bench.device_check import cpu_plan, failures, run_check
from genolong.experiments.bench.device_inference import compare_tables, numeric_columns
from genolong.experiments.bench.kernel_check import (
    KernelCase,
    attention_at,
    check_case,
    dense_rows,
    path_inputs,
)

CPU = torch.device("cpu")


@pytest.mark.parametrize("backbone", ["bigbird", "longformer", "lsg"])
def test_row_sampled_reference_equals_the_whole_dense_reference(backbone):
    module, length = attention_at(KernelCase(backbone, 512, torch.float64, heads=2, head_dim=8), CPU, "dense")
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, length, 8, generator=generator, dtype=torch.float64) for _ in range(3))
    inputs = path_inputs(module, q, k, v, None)
    rows = torch.tensor([0, 1, 5, 200, length - 1])
    whole = PATHS["dense"](inputs)
    assert (dense_rows(inputs, rows) - whole[:, :, rows]).abs().max() < 1e-12


def test_kernel_check_passes_the_gather_path_in_bf16_and_fp32():
    for dtype in (torch.float32, torch.bfloat16):
        row = check_case(KernelCase("bigbird", 512, dtype, heads=2, head_dim=16), CPU, "gather", rows=32)
        assert row["ok"], row


def test_kernel_check_fails_a_path_that_ignores_the_pattern(monkeypatch):
    """Dense attention over every key where the pattern hides most: far outside the tolerance."""
    monkeypatch.setitem(PATHS, "gather", lambda inputs, p=0.0: full_attention(inputs.q, inputs.k, inputs.v, None, 0.0))
    row = check_case(KernelCase("bigbird", 1024, torch.float32, heads=2, head_dim=16), CPU, "gather", rows=32)
    assert not row["ok"] and row["out_error"] > 10 * row["tolerance"]


def write(path, text):
    path.write_text(text)
    return path


def test_compare_tables_within_and_beyond_the_tolerance(tmp_path):
    ref = write(tmp_path / "a.tsv", "ordinal\tid\tprobability\n0\tw0\t0.10\n1\tw1\t0.50\n2\tw2\t0.90\n")
    near = write(tmp_path / "b.tsv", "ordinal\tid\tprobability\n0\tw0\t0.11\n1\tw1\t0.49\n2\tw2\t0.91\n")
    far = write(tmp_path / "c.tsv", "ordinal\tid\tprobability\n0\tw0\t0.90\n1\tw1\t0.50\n2\tw2\t0.10\n")
    good = compare_tables(ref, near)
    assert good["ok"] and good["score_column"] == "probability" and good["max_abs_diff"] == pytest.approx(0.01)
    bad = compare_tables(ref, far)
    assert not bad["ok"] and bad["spearman"] == pytest.approx(-1.0)


def test_numeric_columns_of_a_bedgraph_without_header(tmp_path):
    track = write(tmp_path / "t.bedGraph", "track type=bedGraph\nchr1\t0\t10\t0.25\nchr1\t10\t20\t0.5\n")
    columns = numeric_columns(track)
    assert list(columns["column3"]) == [0.25, 0.5] and "column0" not in columns


@pytest.mark.slow
def test_cpu_mode_in_process_sections_pass_and_report(tmp_path):
    plan = replace(cpu_plan(), sections=("kernels", "train", "speed"))
    results = run_check(plan, tmp_path, say=lambda line: None)
    assert failures(results) == []
    trained = results["sections"]["train"]["rows"]
    assert {row["backbone"] for row in trained} >= {"full", "bigbird", "longformer", "lsg", "vcc", "sled"}
    assert json.loads((tmp_path / "device_check.json").read_text())["sections"].keys() == {"kernels", "train", "speed"}
    report = (tmp_path / "device_check.md").read_text()
    assert "| bigbird | 512 |" in report and "Training step" in report


def test_gpu_mode_without_a_gpu_is_one_line(monkeypatch):
    from argparse import Namespace
    from pathlib import Path

    from genolong.cli.commands.bench import run_gpu

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    args = Namespace(sections=None, cpu=False, lengths=None, kernel_lengths=None, tests=Path("tests"), out=Path("unused"))
    with pytest.raises(UserError, match="no CUDA GPU"):
        run_gpu(args)


def test_mixed_precision_with_gradient_clipping_trains(tmp_path):
    """Lightning refuses gradient clipping with a fused AdamW under ``*-mixed`` precision (found on the
    first GPU run): the optimizer must then be the multi-tensor one, and a step must run."""
    import lightning.pytorch as pl

    from genolong.tasks.settings import TrainConfig
    from genolong.training.common import adamw_with_schedule

    config = TrainConfig(max_steps=2, warmup_steps=1, max_grad_norm=1.0)
    model = torch.nn.Linear(4, 1)
    mixed = adamw_with_schedule(model, config, precision="bf16-mixed")["optimizer"]
    plain = adamw_with_schedule(model, config, precision="32-true")["optimizer"]
    assert not mixed.defaults["fused"] and mixed.defaults["foreach"] and plain.defaults["fused"]

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Linear(4, 1)

        def training_step(self, batch, _):
            return self.model(batch).square().mean()

        def configure_optimizers(self):
            return adamw_with_schedule(self.model, config, precision=str(self.trainer.precision))

    trainer = pl.Trainer(accelerator="cpu", precision="bf16-mixed", max_steps=2, gradient_clip_val=1.0,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(Tiny(), torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4))
    assert trainer.global_step == 2


def test_a_training_step_is_not_tried_where_the_forward_pass_ran_out_of_memory(monkeypatch):
    from genolong.experiments.bench import device_speed
    from genolong.experiments.bench.attention import BenchSize

    tried = []

    def measure_or_retry(name, length, phase, plan, device):
        tried.append((name, length, phase))
        if name == "hf-bigbird" and length == 256:
            return {"status": "oom"}
        return {"status": "ok", "seconds": 0.01, "tokens_per_s": length / 0.01, "peak_gb": None, "checkpointing": False}

    monkeypatch.setattr(device_speed, "_measure_or_retry", measure_or_retry)
    size = BenchSize(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=64)
    plan = device_speed.SpeedPlan(size=size, lengths=(128, 256))
    rows = list(device_speed.run_speed(plan, CPU, models=("genolong-bigbird", "hf-bigbird"), say=lambda line: None))
    assert ("hf-bigbird", 256, "train") not in tried and ("hf-bigbird", 128, "train") in tried
    skipped = [row for row in rows if (row["model"], row["tokens"], row["phase"]) == ("hf-bigbird", 256, "train")]
    assert skipped[0]["status"].startswith("oom") and device_speed._cell(skipped[0]) == "oom"


def test_the_cpu_reference_runs_in_float32_and_variants_run_in_float32_on_the_device(monkeypatch, tmp_path):

    from genolong.experiments.bench import device_inference

    calls = recorded_children(monkeypatch)
    monkeypatch.setattr(device_inference, "write_inputs", lambda directory: {
        name: tmp_path / name for name in ("fasta", "variants", "genome", "model")})
    rows = device_inference.compare_inference(tmp_path, torch.device("cuda"), say=lambda line: None)
    assert [row["ok"] for row in rows] == [False] * 3
    settings = [(command[command.index("--accelerator") + 1], command[command.index("--precision") + 1], command[3])
                for command, _ in calls]
    assert settings == [("cpu", "32", "predict-promoter"), ("gpu", "auto", "predict-promoter"), ("cpu", "32", "scan"),
                        ("gpu", "auto", "scan"), ("cpu", "32", "score-variants"), ("gpu", "32", "score-variants")]


def recorded_children(monkeypatch) -> list[tuple[list[str], str]]:
    """Every child process started through :mod:`genolong.core.children`, as (argv, cwd): recorded, not run
    (each exits 1)."""
    import subprocess

    from genolong.core import children

    calls = []

    def run(command, **kwargs):
        calls.append((command, str(kwargs["cwd"])))
        return subprocess.CompletedProcess(command, 1, "", "stopped by the test")

    monkeypatch.setattr(children.subprocess, "run", run)
    return calls


def test_children_get_absolute_paths_whatever_their_working_directory(monkeypatch, tmp_path):
    """``bench gpu --out gpu`` ran its children in ``gpu/`` with ``--out gpu/pretrain``: they wrote
    ``gpu/gpu/...`` and the parent found nothing. Every path a child gets is absolute."""
    from pathlib import Path

    from genolong.experiments.bench.device_check import section_pretrain, section_tests
    from genolong.experiments.bench.device_inference import compare_inference

    monkeypatch.chdir(tmp_path)
    out = Path("gpu")
    (out / "inference").mkdir(parents=True)
    calls = recorded_children(monkeypatch)
    plan = replace(cpu_plan(), tests_dir=Path("tests"))
    (tmp_path / "tests").mkdir()
    section_tests(plan, out, say=lambda line: None)
    section_pretrain(plan, out, say=lambda line: None)
    compare_inference(out / "inference", CPU, say=lambda line: None)
    assert len(calls) == 2 + 6
    for command, cwd in calls:
        assert Path(cwd).is_absolute()
        for argument in command[3:]:
            if "/" in argument or argument == "tests":  # a path
                assert Path(argument).is_absolute(), (command, argument)
    pretrain = calls[1][0]
    assert pretrain[pretrain.index("--out") + 1] == str(tmp_path / "gpu" / "pretrain")


@pytest.mark.slow
def test_bench_gpu_cpu_with_a_relative_out_from_another_directory(monkeypatch, tmp_path):
    """The docs' ``genolong bench gpu --cpu --out DIR`` with a relative DIR, run outside the checkout:
    the sections that start ``genolong`` children (pretrain, inference) pass."""
    from genolong.cli.main import main

    monkeypatch.chdir(tmp_path)
    code = main(["bench", "gpu", "--cpu", "--out", "gpu", "--sections", "pretrain", "inference"])
    results = json.loads((tmp_path / "gpu" / "device_check.json").read_text())
    assert failures(results) == [] and code == 0
    assert (tmp_path / "gpu" / "pretrain" / "report.json").is_file() and not (tmp_path / "gpu" / "gpu").exists()


def test_a_section_over_its_budget_stops_and_reports_and_the_next_one_still_runs(tmp_path):
    """The train section needs far more than 1 s on any CPU (six backbones, eight steps each): it is stopped
    at its budget with a row saying so, and the tests section after it runs to its end."""
    from genolong.experiments.bench.device_check import stopped

    plan = replace(cpu_plan(), sections=("train", "tests"), budgets={"train": 1.0, "tests": 600.0}, tests_dir=None)
    results = run_check(plan, tmp_path, say=lambda line: None)
    train = results["sections"]["train"]["rows"]
    assert train[-1]["status"].startswith("stopped: over its budget of 1 s") and train[-1]["ok"] is None
    assert [line.split(":")[0] for line in stopped(results)] == ["train"] and failures(results) == []
    assert results["sections"]["tests"]["rows"][0]["status"].startswith("skipped: no tests directory")
    assert not list(tmp_path.glob("*.rows.jsonl"))


def test_a_section_that_raises_is_one_failed_row(tmp_path):
    """An error inside a section's process is reported as its row; the run goes on."""
    plan = replace(cpu_plan(), sections=("kernels",), kernel_lengths=(100,))  # not a multiple of any block
    results = run_check(plan, tmp_path, say=lambda line: None)
    rows = results["sections"]["kernels"]["rows"]
    assert rows[-1]["ok"] is False and rows[-1]["status"].startswith("error") and failures(results)


@pytest.mark.parametrize("backbone", ["bigbird", "longformer", "lsg"])
def test_keys_per_query_counts_the_dense_mask(backbone):
    from genolong.experiments.bench.device_utilisation import keys_per_query

    module, length = attention_at(KernelCase(backbone, 512, torch.float32, heads=2, head_dim=8), CPU, "dense")
    pattern = module.pattern_for(length, CPU)
    exact = pattern.dense_mask().sum().item() / (pattern.heads * pattern.seq_len)
    assert keys_per_query(pattern) == pytest.approx(exact, rel=1e-9)
    assert keys_per_query(pattern) < pattern.num_keys


def test_model_flops_per_token_follow_the_stated_formula():
    from genolong.experiments.bench.attention import BenchSize, genolong_model
    from genolong.experiments.bench.device_utilisation import attended_keys, model_flops_per_token

    size = BenchSize(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    model = genolong_model("full", size, 256, mlm=True)[0]
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    # per layer: q, k, v, output (4 d^2) and the feed-forward (2 d f); the MLM head: d^2 + d V
    assert linear == 2 * (4 * 32 * 32 + 2 * 32 * 64) + 32 * 32 + 32 * 64
    assert attended_keys(model, 256, CPU) == 256
    assert model_flops_per_token(model, 256) == 6 * linear + 12 * 2 * 32 * 256
    sparse = genolong_model("bigbird", size, 1024, mlm=True)[0]
    assert attended_keys(sparse, 1024, CPU) < 1024
