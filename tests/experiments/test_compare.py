"""`genolong compare` and `genolong context-ablation` on the micro preset: the shipped sample
genome for pretraining, a small real mouse promoter dataset for fine-tuning."""

from __future__ import annotations

import csv
import json
import math

import pytest
from helpers.classify import promoter_dataset

import genolong.experiments.compare as compare_module
from genolong.cli.main import main
from genolong.core.errors import ConfigError, UserError
from genolong.evaluation.compare_report import ABLATION_COLUMNS, COLUMNS, read_csv
from genolong.experiments.compare import (
    DETERMINISTIC,
    Workspace,
    load_compare_config,
    run_comparison,
    run_context_ablation,
)
from genolong.resources import sample_genome

#: The micro preset's backbones, in its (the tables') order: every built-in one.
BACKBONES = list(load_compare_config("micro").backbones)


def comparison(out, promoters, *, seed=0, backbones=BACKBONES):
    space = Workspace(sample_genome(), out, load_compare_config("micro"), seed=seed, show_progress=False)
    return run_comparison(space, promoters, list(backbones))


@pytest.fixture(scope="module")
def promoters(real_data, tmp_path_factory):
    return promoter_dataset(real_data, tmp_path_factory.mktemp("compare_data") / "promoters")


@pytest.fixture(scope="module")
def finished(promoters, tmp_path_factory):
    out = tmp_path_factory.mktemp("compare") / "out"
    return out, comparison(out, promoters)


def test_every_backbone_has_a_row_table_and_plots(finished):
    out, rows = finished
    assert [row["backbone"] for row in rows] == list(BACKBONES)
    written = read_csv(out / "comparison.csv")
    assert [list(r) for r in written] == [list(COLUMNS)] * len(BACKBONES)
    for row in written:
        assert row["pretrain_steps"] == 4 and row["max_len"] == 128
        assert 0 < row["val_bpc"] < 4 and 0 < row["unigram_bpc"] < 4
        assert 0 <= row["promoter_f1"] <= 1 and 0 <= row["promoter_auroc"] <= 1
        assert row["train_tokens_per_s"] > 0 and row["infer_windows_per_s"] > 0
        assert row["train_peak_mb"] is not None
    # the same tokenizer, corpus and masked validation tokens for everyone
    assert len({row["unigram_bpc"] for row in written}) == 1
    assert len({row["kmer_f1"] for row in written}) == 1
    # only the attention differs: the same weights shapes up to a few global-token parameters
    assert max(r["parameters"] for r in written) - min(r["parameters"] for r in written) < 100
    markdown = (out / "comparison.md").read_text()
    assert markdown.startswith("| backbone | parameters |") and markdown.count("\n") == 2 + len(BACKBONES)
    curves = read_csv(out / "comparison_curves.csv")
    assert {c["run"] for c in curves} == set(BACKBONES)
    assert all(c["tokens_seen"] == c["step"] * 2 * 128 for c in curves)  # micro: batch 2 x 128 tokens
    for name in ("bpc_vs_step.png", "quality_vs_speed.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # all six backbones again: ~30 s on the loaded 2-core machine
def test_same_seed_same_rows_other_seed_other_rows(finished, promoters, tmp_path):
    """Deterministic columns repeat exactly in a fresh directory; a new seed changes them."""
    _, rows = finished
    again = comparison(tmp_path / "again", promoters)
    for first, second in zip(rows, again, strict=True):
        assert {k: first[k] for k in DETERMINISTIC} == {k: second[k] for k in DETERMINISTIC}
    other = comparison(tmp_path / "other", promoters, seed=1, backbones=["bigbird"])
    assert other[0]["val_bpc"] != rows[1]["val_bpc"]


def test_a_finished_backbone_is_not_retrained(finished, promoters, monkeypatch):
    out, rows = finished

    def refuse(*args, **kwargs):
        raise AssertionError("retrained a finished backbone")

    monkeypatch.setattr(compare_module, "run_pretrain", refuse)
    monkeypatch.setattr(compare_module, "run_finetune", refuse)
    assert comparison(out, promoters) == rows


def test_a_half_done_backbone_resumes_from_its_stages(finished, promoters, tmp_path, monkeypatch):
    """Pretraining finished, fine-tuning not: only fine-tuning runs, and the row matches."""
    out = tmp_path / "out"
    first = comparison(out, promoters, backbones=["full"])[0]
    (out / "backbones" / "full" / "result.json").unlink()
    calls = []
    real_finetune = compare_module.run_finetune
    monkeypatch.setattr(compare_module, "run_pretrain", lambda *a, **k: calls.append("pretrain"))
    monkeypatch.setattr(compare_module, "run_finetune", lambda *a, **k: calls.append("finetune") or
                        real_finetune(*a, **k))
    again = comparison(out, promoters, backbones=["full"])[0]
    assert calls == ["finetune"]
    assert {k: first[k] for k in DETERMINISTIC} == {k: again[k] for k in DETERMINISTIC}


def test_other_settings_in_the_same_directory_are_refused(finished, promoters):
    out, _ = finished
    before = (out / "backbones" / "full" / "result.json").read_text()
    with pytest.raises(UserError, match="made with other settings"):
        comparison(out, promoters, seed=7, backbones=["full"])
    assert (out / "backbones" / "full" / "result.json").read_text() == before


def test_context_ablation_sees_equal_tokens_at_every_length(finished):
    out, _ = finished
    config = load_compare_config("micro")
    space = Workspace(sample_genome(), out, config, show_progress=False)
    rows = run_context_ablation(space, ["bigbird", "full"], [64, 128])
    assert [(r["backbone"], r["max_len"]) for r in rows] == [("bigbird", 64), ("bigbird", 128), ("full", 64),
                                                             ("full", 128)]
    assert {r["tokens_seen"] for r in rows} == {config.ablation.tokens_per_step * 4}
    assert [r["batch_size"] for r in rows] == [4, 2, 4, 2]
    for row in rows:
        assert math.isclose(row["gain_bpc"], row["unigram_bpc"] - row["val_bpc"], abs_tol=1e-4)
    with open(out / "context_ablation.csv", newline="") as handle:
        assert next(csv.reader(handle)) == list(ABLATION_COLUMNS)
    curves = read_csv(out / "context_ablation_curves.csv")
    assert {c["run"] for c in curves} == {"bigbird_64", "bigbird_128", "full_64", "full_128"}
    assert max(c["tokens_seen"] for c in curves if c["run"] == "full_64") == rows[2]["tokens_seen"]
    assert (out / "context_ablation.png").read_bytes()[:4] == b"\x89PNG"
    # the comparison's tokenizer and corpus were reused, not rebuilt
    assert json.loads((out / "corpus" / "corpus.json").read_text())["config_fingerprint"]


def test_ablation_lengths_must_divide_the_tokens_per_step(tmp_path):
    space = Workspace(sample_genome(), tmp_path, load_compare_config("micro"), show_progress=False)
    with pytest.raises(ConfigError, match="ablation length 96"):
        run_context_ablation(space, ["bigbird"], [96])


def test_cli_errors_are_one_line(tmp_path, capsys, promoters):
    genome = str(sample_genome())
    cases = [
        (["compare", "--genome", genome, "--promoters", str(tmp_path), "--preset", "micro", "--out",
          str(tmp_path / "o")], "not a promoter dataset"),
        (["compare", "--genome", genome, "--promoters", str(promoters), "--preset", "micro", "--backbones",
          "full,reformer", "--out", str(tmp_path / "o")], "unknown backbone(s) reformer"),
        (["compare", "--genome", str(tmp_path / "none.fa"), "--promoters", str(promoters), "--preset", "micro",
          "--out", str(tmp_path / "o")], "no such genome file"),
        (["compare", "--genome", genome, "--promoters", str(promoters), "--preset", "huge", "--out",
          str(tmp_path / "o")], "no compare preset 'huge'"),
        (["context-ablation", "--genome", genome, "--preset", "micro", "--lengths", "64,x", "--out",
          str(tmp_path / "o")], "expected comma-separated integers"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
