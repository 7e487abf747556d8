"""``genolong benchmark`` end to end at micro scale on the three fixture tasks of
tests/data/benchmarks (GUE, NT downstream, Genomic Benchmarks layouts): the files it writes, a
rerun after a kill mid-cell that gives the same results.csv as an uninterrupted run, and
``genolong benchmark report`` redrawing the summary."""

from __future__ import annotations

import csv

import lightning.pytorch as pl
import pytest
import yaml
from helpers.benchmark_suites import micro_model

from genolong.cli.commands.benchmark import run_suite
from genolong.cli.main import main
from genolong.experiments.suites.report import COLUMNS

TASKS = [("gue", "gue", "gue_mouse_tata"), ("nt", "nt", "nt_mouse_dbtss"),
         ("gb", "genomic_benchmarks", "gb_arabidopsis_tata")]


class KillAt(pl.Callback):
    """Raise in the ``fit``-th training run (1-based) once it has done ``step`` steps."""

    def __init__(self, fit: int, step: int):
        self.fit, self.step, self.fits = fit, step, 0

    def on_train_start(self, trainer, module) -> None:
        self.fits += 1

    def on_train_batch_end(self, trainer, *args) -> None:
        if self.fits == self.fit and trainer.global_step == self.step:
            raise RuntimeError("killed mid-cell")


def suite_file(path, real_data, models: list[dict], modes: list[str], seeds: list[int], tasks=TASKS):
    tasks = [{"name": name, "layout": layout, "path": str(real_data / "benchmarks" / folder), "valid_fraction": 0.25}
             for name, layout, folder in tasks]
    path.write_text(yaml.safe_dump({"tasks": tasks, "models": models, "modes": modes, "seeds": seeds}))
    return path


def killed_and_resumed(suite, out, fit: int) -> None:
    """Run ``suite`` into ``out``, killed in its ``fit``-th fine-tuning run after step 3 (a
    checkpoint was written at step 2), then run it again to the end."""
    with pytest.raises(RuntimeError, match="killed mid-cell"):
        run_suite(suite, out, extra_callbacks=[KillAt(fit, 3)])
    unfinished = [p.parent.parent for p in out.glob("runs/*/*/*/*/checkpoints/last.ckpt")
                  if not (p.parent.parent / "cell.json").exists()]
    assert len(unfinished) == 1 and not (out / "results.csv").exists()
    run_suite(suite, out)


def test_a_suite_resumes_after_a_kill_to_the_same_results(real_data, tmp_path, capsys):
    """Two layouts, one model, mode and seed (the slow test below runs the whole acceptance suite)."""
    suite = suite_file(tmp_path / "suite.yaml", real_data, [micro_model()], ["full"], [0], [TASKS[0], TASKS[2]])
    killed_and_resumed(suite, tmp_path / "killed", fit=2)
    assert main(["benchmark", str(suite), "--out", str(tmp_path / "clean")]) == 0
    assert "results.csv (4 rows)" in capsys.readouterr().out
    results = (tmp_path / "clean" / "results.csv").read_text()
    assert (tmp_path / "killed" / "results.csv").read_text() == results
    rows = list(csv.DictReader(results.splitlines()))
    assert tuple(rows[0]) == COLUMNS and [(r["task"], r["model"]) for r in rows] == [
        ("gue", "k-mer"), ("gb", "k-mer"), ("gue", "micro"), ("gb", "micro")]
    assert [r["metric"] for r in rows[2:]] == ["mcc", "accuracy"]
    assert all(0 <= float(r["auroc"]) <= 1 and r["test_rows"] == "12" for r in rows)
    out = tmp_path / "clean"
    assert {"suite.yaml", "results.csv", "leakage.csv", "summary.md", "figure.png"} <= {p.name for p in out.iterdir()}
    pinned = yaml.safe_load((out / "suite.yaml").read_text())
    assert pinned["seeds"] == [0] and pinned["models"][0]["resolved_finetune"]["train"]["max_steps"] == 4
    summary = (out / "summary.md").read_text()
    assert "| k-mer baseline | 1 |" in summary and "95% Student's t interval" in summary and "**" in summary
    (out / "summary.md").unlink()
    (out / "figure.png").unlink()
    assert main(["benchmark", "report", str(out)]) == 0
    assert (out / "summary.md").read_text() == summary and (out / "figure.png").stat().st_size > 5000


def random_encoder(out):
    """A pretrained-model directory (random weights) with a per-base tokenizer, as `genolong convert` leaves one."""
    import torch

    from genolong.dna.tokenizer import TokenizerTrainConfig, load_tokenizer, train_tokenizer
    from genolong.model.configuration import GenolongConfig
    from genolong.model.loading import save_model
    from genolong.model.modeling import GenolongForMaskedLM

    genome = out.parent / "bases.fa"
    genome.write_text(">bases\n" + "ACGTTGCA" * 500 + "\n")
    train_tokenizer(genome, out.parent / "tokenizer", TokenizerTrainConfig(vocab_size=22, sample_bp=4000),
                    show_progress=False)
    tokenizer = load_tokenizer(out.parent / "tokenizer")
    out.mkdir()
    torch.manual_seed(0)
    config = GenolongConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=260, pre_layer_norm=True)
    save_model(GenolongForMaskedLM(config), tokenizer, out)
    return out


@pytest.mark.slow  # 3 tasks x 2 models x 2 modes x 3 seeds, twice: 18 minutes on 2 cores shared with other jobs
def test_the_acceptance_suite_two_models_two_modes_three_seeds(real_data, tmp_path):
    encoder = random_encoder(tmp_path / "encoder")
    pretrained = micro_model() | {"name": "encoder", "source": str(encoder)}
    pretrained["finetune"] = {k: v for k, v in pretrained["finetune"].items() if k not in ("model", "tokenizer")}
    suite = suite_file(tmp_path / "suite.yaml", real_data, [micro_model(), pretrained], ["full", "probe"], [0, 1, 2])
    killed_and_resumed(suite, tmp_path / "killed", fit=14)
    run_suite(suite, tmp_path / "clean")
    results = (tmp_path / "clean" / "results.csv").read_text()
    assert (tmp_path / "killed" / "results.csv").read_text() == results
    assert len(results.splitlines()) == 1 + 3 + 3 * 2 * 2 * 3
    summary = (tmp_path / "clean" / "summary.md").read_text()
    assert "| encoder (probe) | 3 |" in summary and "| micro (full) | 3 |" in summary
