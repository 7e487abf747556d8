"""A fine-tuning task is one Task object in the registry: a toy task registered here (are 80-bp
windows of the shipped human sample genome GC-rich?) fine-tunes through the same run and
command as promoter and chromatin, with nothing else to add."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from sklearn.metrics import roc_auc_score

from genolong.classifier.directory import Classifier
from genolong.core.errors import ConfigError
from genolong.dna.sequence import read_fasta
from genolong.resources import sample_genome
from genolong.tasks.task import (
    FinetuneConfig,
    FinetuneTask,
    SequenceRows,
    TaskData,
    available_tasks,
    get_task,
    load_finetune_config,
    register_task,
)
from genolong.training.finetune import run_finetune

WINDOW_BP = 80


class GCRich(FinetuneTask):
    """Is the window's GC fraction above the median? Monitored by the validation ROC AUC."""

    name = "gc_rich"
    monitor = "val/auroc"

    def load_data(self, data_dir):
        splits = {}
        for split in ("train", "valid", "test"):
            lines = (data_dir / f"{split}.tsv").read_text().splitlines()
            rows = [line.split("\t") for line in lines]
            splits[split] = SequenceRows([sequence for sequence, _ in rows], np.array([int(y) for _, y in rows]))
        return TaskData(self.name, splits, ["gc_rich"], WINDOW_BP, WINDOW_BP, {"data": str(data_dir.resolve())})

    def validation_metrics(self, labels, probabilities):
        return {"val/auroc": float(roc_auc_score(labels[:, 0], probabilities[:, 0]))}

    def test_report(self, classifier, data, config, out):
        rows = data.splits["test"]
        scores = classifier.probabilities([rows.sequence(i) for i in range(len(rows))])[:, 0]
        return {"test": {"auroc": float(roc_auc_score(rows.targets[:, 0], scores)), "rows": len(rows)}}

    def summary(self, report):
        return f"test ROC AUC {report['test']['auroc']:.3f} on {report['test']['rows']} windows"


register_task(GCRich())


@pytest.fixture(scope="module")
def gc_dataset(tmp_path_factory, data_seed):
    """480 windows of the sample genome without N, labelled GC-rich above the median GC fraction,
    split 320 / 80 / 80 in genome order; ``data_seed`` shifts where the windows start."""
    genome = "".join(record.sequence for record in read_fasta(sample_genome()))
    first = data_seed * 37 % WINDOW_BP
    windows = [genome[i:i + WINDOW_BP] for i in range(first, len(genome) - WINDOW_BP, WINDOW_BP)]
    windows = [w for w in windows if "N" not in w.upper()][:480]
    gc = np.array([sum(base in "GCgc" for base in w) / WINDOW_BP for w in windows])
    labels = (gc > np.median(gc)).astype(int)
    out = tmp_path_factory.mktemp("gc_rich")
    for split, rows in (("train", slice(0, 320)), ("valid", slice(320, 400)), ("test", slice(400, 480))):
        (out / f"{split}.tsv").write_text("".join(f"{w}\t{y}\n" for w, y in zip(windows[rows], labels[rows],
                                                                                  strict=True)))
    return out


def micro_preset(path, seed: int = 0):
    """A YAML preset of the toy task: a 1-layer model over per-base tokens, 40 steps, run ``seed``."""
    path.write_text(yaml.safe_dump({
        "task": "gc_rich", "max_len": 96,
        "model": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
                  "pre_layer_norm": True, "hidden_dropout_prob": 0.0},
        "tokenizer": {"vocab_size": 22, "sample_bp": 20_000}, "patience": 10, "batch_size_eval": 64,
        "train": {"max_steps": 40, "val_every_steps": 20, "batch_size": 16, "learning_rate": 0.003, "warmup_steps": 2,
                  "log_every_steps": 5, "checkpoint_every_steps": 20, "val_windows": 80, "seed": seed},
    }))
    return path


def test_a_registered_task_is_known_to_the_config():
    assert {"promoter", "chromatin", "gc_rich"} <= set(available_tasks())
    assert get_task("gc_rich").monitor == "val/auroc"
    with pytest.raises(ConfigError, match="unknown task 'gc_poor'; choose one of: chromatin, gc_rich, labelled, promoter"):
        FinetuneConfig(task="gc_poor")
    with pytest.raises(ValueError, match="already registered"):
        register_task(type("Other", (GCRich,), {})())


@pytest.mark.parametrize("task", ["chromatin", "labelled", "gc_rich"])
def test_calibrate_is_refused_for_a_task_that_would_ignore_it(task):
    assert FinetuneConfig(task="promoter", calibrate=True).calibrate
    assert not FinetuneConfig(task=task).calibrate
    with pytest.raises(ConfigError, match=f"calibrate applies to the promoter task; the {task} task does not read it"):
        FinetuneConfig(task=task, calibrate=True)


def test_a_toy_task_fine_tunes_through_the_same_run(gc_dataset, tmp_path, data_seed):
    config = load_finetune_config("gc_rich", micro_preset(tmp_path / "gc.yaml", data_seed))
    out = tmp_path / "run"
    report = run_finetune(gc_dataset, out, config, show_progress=False)
    assert report["task"] == "gc_rich" and report["monitor"]["metric"] == "val/auroc"
    assert report["best_step"] in (20, 40) and report["test"]["rows"] == 80
    assert json.loads((out / "report.json").read_text())["test"] == report["test"]
    classifier = Classifier.load(out / "model", task="gc_rich", device="cpu")
    assert classifier.info.label_names == ["gc_rich"] and classifier.info.window_bp == WINDOW_BP
    # the report's test score is the saved model's on the test split (whatever 40 steps reached)
    windows, labels = zip(*(line.split("\t") for line in (gc_dataset / "test.tsv").read_text().splitlines()),
                          strict=True)
    scores = classifier.probabilities(list(windows))[:, 0]
    assert report["test"]["auroc"] == pytest.approx(roc_auc_score([int(y) for y in labels], scores), abs=2e-3)
