"""The attention benchmark at tiny sizes: the rows it writes, its statuses, resume, the report.

Timings are never asserted (they belong to the benchmark's output, not to tests).
"""

from __future__ import annotations

import math

import pytest

from genolong.cli.main import main
from genolong.experiments.bench import attention as attention_bench
from genolong.experiments.bench import report as bench_report
from genolong.experiments.bench import runner as bench_runner

TINY = ["--hidden", "32", "--layers", "1", "--heads", "2", "--ffn", "64", "--vocab", "100", "--repeats", "1"]


@pytest.mark.slow  # three models in worker processes, twice: ~100 s on the loaded 2-core machine
def test_bench_attention_writes_a_row_per_model_length_and_phase(tmp_path, monkeypatch):
    argv = ["bench", "attention", "--backbones", "full", "--peers", "hf-bert", "--lengths", "128",
            "--extra-lengths", "--out", str(tmp_path), *TINY]  # fmt: skip
    assert main(argv) == 0
    rows = bench_report.read_csv(tmp_path / "attention_fp32.csv")
    expected = {(m, n, p) for m, n in [("full", 128), ("floor", 128), ("hf-bert", 128)]
                for p in ("forward", "train")}  # fmt: skip
    assert {(row["model"], row["length"], row["phase"]) for row in rows} == expected
    for row in rows:
        assert row["status"] == "ok", row
        assert row["time_s"] > 0 and row["first_call_s"] > 0 and row["cpu_s"] > 0 and row["runs"] == 1
        assert row["peak_mb"] >= 0 and row["resident_mb"] > 0
        assert (row["attention_share"] is not None) == (row["model"] == "full")
    for suffix in (".md", ".png", ".json"):
        assert (tmp_path / f"attention_fp32{suffix}").stat().st_size > 0

    def must_not_run(*args, **kwargs):
        raise AssertionError("--resume measured a pair again")

    monkeypatch.setattr(bench_runner, "run_spec", must_not_run)
    assert main([*argv, "--resume"]) == 0
    assert len(bench_report.read_csv(tmp_path / "attention_fp32.csv")) == len(rows)


def test_a_worker_over_the_memory_cap_is_killed_and_reported():
    spec = attention_bench.Spec(model="full", length=64, size=attention_bench.BenchSize(100, 32, 1, 2, 64), repeats=1)
    rows = bench_runner.run_spec(spec, timeout_s=60, max_memory_gb=0.01)
    assert [(row["phase"], row["status"]) for row in rows] == [
        ("forward", "killed: resident set over 0.01 GB"),
        ("train", "killed: resident set over 0.01 GB"),
    ]


def test_a_failing_worker_reports_its_last_error_line():
    spec = attention_bench.Spec(model="full", length=100, size=attention_bench.BenchSize(100, 30, 1, 4, 64), phases=("forward",))
    (row,) = bench_runner.run_spec(spec, timeout_s=120, max_memory_gb=8)
    assert row["status"].startswith("failed: ") and "not divisible by num_attention_heads" in row["status"]


def test_unknown_names_are_user_errors(tmp_path, capsys):
    assert main(["bench", "attention", "--backbones", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown attention 'nope'" in capsys.readouterr().err
    assert main(["bench", "attention", "--peers", "hf-gpt", "--out", str(tmp_path)]) == 2
    assert "unknown peer hf-gpt" in capsys.readouterr().err


def test_plan_measures_long_lengths_only_for_our_sparse_models_and_the_floor():
    pairs = bench_runner.plan(["full", "bigbird"], ["hf-bert"], True, [1024, 2048], [32768])
    assert pairs == [("full", 1024), ("bigbird", 1024), ("floor", 1024), ("hf-bert", 1024),
                     ("full", 2048), ("bigbird", 2048), ("floor", 2048), ("hf-bert", 2048),
                     ("bigbird", 32768), ("floor", 32768)]  # fmt: skip


def row(model, length, phase, time_s, **extra):
    return {"model": model, "length": length, "phase": phase, "dtype": "fp32", "status": "ok", "time_s": time_s,
            "peak_mb": 10.0, **extra}  # fmt: skip


def test_attention_share_and_slope():
    rows = [row("floor", 4096, "forward", 2.0), row("bigbird", 4096, "forward", 2.5),
            row("floor", 16384, "forward", 8.0), row("bigbird", 16384, "forward", 10.0),
            row("hf-bert", 4096, "forward", 1.0), row("hf-bert", 16384, "forward", 16.0)]  # fmt: skip
    bench_report.add_attention_share(rows)
    shares = {(r["model"], r["length"]): r["attention_share"] for r in rows}
    assert shares[("bigbird", 4096)] == pytest.approx(0.25)
    assert shares[("floor", 4096)] is None and shares[("hf-bert", 4096)] is None
    by_length = {r["length"]: r for r in rows if r["model"] == "hf-bert"}
    assert bench_report.slope(by_length, 4096, 16384) == pytest.approx(2.0)
    summary = bench_report.summary_table(rows)
    assert "| bigbird | 2.5 | 10 | 1.00 | +25% | +25% |" in summary
    assert math.isclose(bench_report.slope({4096: rows[1], 16384: rows[3]}, 4096, 16384), 1.0)


def test_tables_show_why_a_measurement_is_missing():
    rows = [
        row("hf-bigbird", 1024, "train", 1.5),
        {**row("hf-bigbird", 2048, "train", None), "status": "killed: x"},
    ]
    table = bench_report.metric_table(rows, "train", "time_s")
    assert table.splitlines()[-1] == "| hf-bigbird | 1.5 | killed |"


def test_legacy_peers_are_skipped_without_a_legacy_site():
    rows = bench_runner.run_spec(attention_bench.Spec(model="lsg-bert", length=256), timeout_s=60, max_memory_gb=8)
    assert {row["status"] for row in rows} == {
        "skipped: needs --legacy-site (a directory with transformers 4.x)"
    }
    assert [row["phase"] for row in rows] == ["forward", "train"]
