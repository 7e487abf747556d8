"""Promoter fine-tuning (genolong/training/finetune.py and promoter.py, `genolong promoter finetune`) on a small
real dataset: Mouse_tata promoters vs Mouse_nonprom non-promoters, micro models."""

from __future__ import annotations

import csv
import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch
import yaml
from helpers.classify import micro_config, promoter_dataset, tiny_tokenizer
from lightning.pytorch.callbacks import Callback
from sklearn.metrics import roc_auc_score

from genolong.attention import available_attentions
from genolong.classifier.directory import Classifier, StrandAveraged, TaskInfo, TokenEncoder
from genolong.classifier.records import best_window_probabilities, predict_all
from genolong.cli.main import main
from genolong.configs import available_presets, preset_path
from genolong.core.errors import ConfigError, UserError
from genolong.datasets.promoter import load_split
from genolong.dna.tokenizer import load_tokenizer
from genolong.evaluation.metrics import best_f1_threshold, promoter_metrics
from genolong.model.loading import save_model
from genolong.tasks.task import FinetuneConfig, get_task, load_finetune_config
from genolong.training.finetune import Collate, run_finetune
from genolong.training.model_setup import build_classifier_model


@pytest.fixture(scope="module")
def dataset(real_data, tmp_path_factory):
    return promoter_dataset(real_data, tmp_path_factory.mktemp("promoters") / "data")


@pytest.fixture(scope="module")
def finished(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    return out, run_finetune(dataset, out, micro_config("promoter"), show_progress=False)


def test_run_writes_a_classifier_whose_threshold_and_metrics_reproduce(dataset, finished):
    out, report = finished
    assert report["steps"] <= 6 and report["best_step"] in (3, 6)
    assert {"f1", "precision", "recall", "mcc", "auroc", "auprc"} <= set(report["test"])
    assert {"valid", "test", "C"} <= set(report["kmer_baseline"])
    assert json.loads((out / "report.json").read_text())["test"] == report["test"]
    assert (out / "checkpoints" / "best.ckpt").is_file() and (out / "tokenizer" / "tokenizer.json").is_file()

    classifier = Classifier.load(out / "model", task="promoter", device="cpu")
    info = classifier.info
    assert (info.window_bp, info.min_bp, info.label_names) == (251, 251, ["promoter"])
    assert info.threshold == report["threshold"] and info.provenance["report"]["test"] == report["test"]
    # the saved model reproduces the threshold (max F1 on valid) and the test metrics
    scores = {}
    for split in ("valid", "test"):
        records = load_split(dataset, split)
        scores[split] = (
            [r.label for r in records],
            predict_all(classifier, [r.sequence for r in records], batch_size=7)[:, 0],
        )
    assert best_f1_threshold(*scores["valid"]) == pytest.approx(report["threshold"], rel=1e-5)
    test = promoter_metrics(*scores["test"], report["threshold"])
    for name in ("f1", "mcc", "auroc", "auprc"):
        assert test[name] == pytest.approx(report["test"][name], abs=1e-6)



def test_a_model_trained_on_both_strands_is_reported_as_predict_promoter_reads_it(dataset, tmp_path):
    """Threshold and test metrics of a both-strand model are those of the strand-averaged probabilities."""
    config = replace(micro_config("promoter"), augment_reverse_complement=True, kmer_baseline=False)
    report = run_finetune(dataset, tmp_path / "run", config, show_progress=False)
    classifier = Classifier.load(tmp_path / "run" / "model", task="promoter", device="cpu")
    assert classifier.info.inference.both_strands
    scores = {}
    for split in ("valid", "test"):
        records = load_split(dataset, split)
        scores[split] = ([r.label for r in records],
                         predict_all(StrandAveraged(classifier), [r.sequence for r in records], batch_size=7)[:, 0])
    assert best_f1_threshold(*scores["valid"]) == pytest.approx(report["threshold"], rel=1e-5)
    test = promoter_metrics(*scores["test"], report["threshold"])
    for name in ("f1", "mcc", "auroc", "auprc"):
        assert test[name] == pytest.approx(report["test"][name], abs=1e-6)

def test_best_checkpoint_is_the_one_saved(finished):
    out, report = finished
    state = torch.load(out / "checkpoints" / "best.ckpt", weights_only=True)
    assert state["global_step"] == report["best_step"]
    saved = Classifier.load(out / "model", device="cpu").model.state_dict()
    for key, value in state["state_dict"].items():
        torch.testing.assert_close(saved[key.removeprefix("model.")], value)


class StopAt(Callback):
    def __init__(self, step):
        self.step = step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step >= self.step:
            trainer.should_stop = True


def test_resume_reaches_the_same_weights_as_an_uninterrupted_run(dataset, finished, tmp_path):
    out_full, _ = finished
    config = micro_config(
        "promoter", **{"model.hidden_dropout_prob": 0.2, "kmer_baseline": False, "patience": 5}
    )
    kwargs = {"tokenizer_dir": out_full / "tokenizer", "show_progress": False}
    straight = run_finetune(dataset, tmp_path / "a", config, **kwargs)
    # stopped after the validation and checkpoint of step 3, as a killed run would leave it
    stopped = run_finetune(dataset, tmp_path / "b", config, extra_callbacks=[StopAt(3)], **kwargs)
    assert stopped == {"stopped_at_step": 3}
    with pytest.raises(UserError, match="pass --resume"):
        run_finetune(dataset, tmp_path / "b", config, **kwargs)
    resumed = run_finetune(dataset, tmp_path / "b", config, resume=True, **kwargs)
    assert resumed["test"] == pytest.approx(straight["test"])
    a = torch.load(tmp_path / "a" / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "b" / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)


def test_early_stopping_on_validation_f1(dataset, finished, tmp_path):
    out_full, _ = finished
    config = micro_config(
        "promoter",
        **{
            "train.max_steps": 40,
            "train.val_every_steps": 2,
            "patience": 1,
            "train.learning_rate": 1e-9,
            "kmer_baseline": False,
        },
    )
    report = run_finetune(
        dataset, tmp_path / "run", config, tokenizer_dir=out_full / "tokenizer", show_progress=False
    )
    assert report["early_stopped"] and report["steps"] < 40


def test_validation_records_longer_than_the_window_score_their_best_window(dataset, finished, tmp_path):
    """Validation rows of 351 bp next to 251-bp training rows: early stopping reads the same
    metric as the report (and ``predict-promoter``): each row's best 251-bp window."""
    data = tmp_path / "data"
    shutil.copytree(dataset, data)
    valid = (data / "valid.tsv").read_text().splitlines()
    header = valid[0].split("\t")
    column = header.index("sequence")
    rows = [line.split("\t") for line in valid[1:]]
    for row, other in zip(rows, rows[1:] + rows[:1], strict=True):
        row[column] += other[column][:100]
    (data / "valid.tsv").write_text("\n".join(["\t".join(header), *("\t".join(r) for r in rows)]) + "\n")
    manifest = json.loads((data / "manifest.json").read_text())
    (data / "manifest.json").write_text(json.dumps(manifest | {"sequence_length": 351, "min_sequence_length": 251}))
    config = micro_config("promoter", **{"train.max_steps": 2, "train.val_every_steps": 2, "kmer_baseline": False})
    report = run_finetune(data, tmp_path / "run", config, tokenizer_dir=finished[0] / "tokenizer", show_progress=False)
    logged = [row for row in csv.DictReader(next((tmp_path / "run" / "logs" / "csv").glob("*/metrics.csv")).open())
              if row.get("val/auroc")]
    assert float(logged[-1]["val/auroc"]) == pytest.approx(report["valid"]["auroc"], abs=1e-4)
    classifier = Classifier.load(tmp_path / "run" / "model", device="cpu")
    records = load_split(data, "valid")
    best = best_window_probabilities(classifier, [r.sequence for r in records], 16, 251)[:, 0]
    assert report["valid"]["auroc"] == pytest.approx(roc_auc_score([r.label for r in records], best), abs=1e-6)


def test_validation_metrics_by_task():
    labels = np.array([[0], [0], [1], [1]], dtype=np.float32)
    metrics = get_task("promoter").validation_metrics(labels, np.array([[0.1], [0.6], [0.4], [0.9]]))
    assert metrics["val/f1"] == pytest.approx(0.8)  # threshold 0.4: 2 TP, 1 FP
    assert metrics["val/auroc"] == pytest.approx(0.75)
    labels = np.array([[0, 1, 0], [1, 1, 0], [0, 1, 0], [1, 1, 1]], dtype=np.float32)
    scores = np.array([[0.1, 0.5, 0.2], [0.9, 0.5, 0.1], [0.35, 0.5, 0.3], [0.3, 0.5, 0.9]])
    metrics = get_task("chromatin").validation_metrics(labels, scores)
    assert metrics["val/profiles"] == 2  # profile 1 has no negatives
    assert metrics["val/mean_auc"] == pytest.approx((0.75 + 1.0) / 2)
    with pytest.raises(UserError, match="no profile has both"):
        get_task("chromatin").validation_metrics(np.zeros((3, 2), np.float32), np.zeros((3, 2)))


def test_from_pretrained_keeps_encoder_weights_and_may_switch_backbone(tmp_path):
    from genolong.attention import available_attentions
    from genolong.model.configuration import GenolongConfig
    from genolong.model.modeling import GenolongForMaskedLM, GenolongForSequenceClassification

    tokenizer_dir = tiny_tokenizer(tmp_path / "tok")
    tokenizer = load_tokenizer(tokenizer_dir)
    mlm = GenolongForMaskedLM(
        GenolongConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=128,
        )
    )
    (tmp_path / "pretrained").mkdir()
    save_model(mlm, tokenizer, tmp_path / "pretrained")
    backbone = "bigbird" if "bigbird" in available_attentions() else "full"
    extra = {"block_size": 16} if backbone == "bigbird" else {}
    config = micro_config(
        "chromatin",
        **{
            "model.backbone": backbone,
            "model.hidden_size": 999,
            "model.positive_label_weight": 8.0,
            **{f"model.{k}": v for k, v in extra.items()},
        },
    )
    asked = ["backbone", *extra]  # a backbone switch the user asked for (--backbone)
    model = build_classifier_model(config, 919, tokenizer, tmp_path / "pretrained", asked=asked)
    assert (model.config.backbone, model.config.hidden_size, model.config.num_labels) == (backbone, 16, 919)
    assert all(module.training for module in model.modules())  # dropout on for fine-tuning
    assert model.config.positive_label_weight == 8.0
    pretrained = mlm.state_dict()
    fresh = GenolongForSequenceClassification(model.config).genolong.state_dict()
    for key, value in model.genolong.state_dict().items():  # pretrained weights; the new backbone's buffers
        torch.testing.assert_close(value, pretrained.get(f"genolong.{key}", fresh[key]))
    with pytest.raises(ConfigError, match="exceeds the model's max_position_embeddings=128"):
        build_classifier_model(micro_config("promoter", max_len=256), 1, tokenizer, tmp_path / "pretrained")


#: Small settings that fit each backbone to 128-token inputs (others run with their defaults).
SMALL_BACKBONE_SETTINGS = {
    "bigbird": {"block_size": 16},
    "longformer": {"attention_window": 32},
    "lsg": {"block_size": 16, "sparse_block_size": 16},
    "sled": {"sled_chunk_size": 64},
    "vcc": {"vcc_block_size": 8, "vcc_fine_blocks": 4, "vcc_warmup_window": 32},
}


@pytest.mark.parametrize("backbone", available_attentions())
def test_every_backbone_trains_and_predicts(backbone, dataset, finished):
    """The task is backbone-agnostic: loss, gradients, and probabilities independent of padding."""
    out_full, _ = finished
    tokenizer = load_tokenizer(out_full / "tokenizer")
    settings = {f"model.{k}": v for k, v in SMALL_BACKBONE_SETTINGS.get(backbone, {}).items()}
    config = micro_config(
        "promoter", **{"max_len": 128, "model.backbone": backbone, "model.pre_layer_norm": True, **settings}
    )
    model = build_classifier_model(config, 1, tokenizer, None)
    records = load_split(dataset, "train")[:6]
    batch = Collate(TokenEncoder(tokenizer, 128))(
        [
            {"sequence": r.sequence[: 100 + 30 * i], "labels": np.array([r.label], np.float32)}
            for i, r in enumerate(records)
        ]
    )
    model(**batch).loss.backward()
    assert all(p.grad is not None for p in model.classifier.parameters())
    info = TaskInfo("promoter", 251, 251, 128, ["promoter"], 0.5)
    classifier = Classifier(model, tokenizer, info, device="cpu")
    sequences = [r.sequence[: 100 + 30 * i] for i, r in enumerate(records)]
    together = classifier.probabilities(sequences)
    alone = np.concatenate([classifier.probabilities([s]) for s in sequences])
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=1e-5)


def test_every_finetune_preset_loads_and_builds(tmp_path):
    tokenizer = load_tokenizer(tiny_tokenizer(tmp_path / "tok"))
    assert {"promoter_tiny", "chromatin_tiny"} <= set(available_presets("finetune"))
    for name in available_presets("finetune"):
        task = yaml.safe_load(preset_path("finetune", name).read_text())["task"]
        config = load_finetune_config(task, name)
        labels = 919 if task == "chromatin" else 1
        assert build_classifier_model(config, labels, tokenizer, None).config.num_labels == labels


def test_config_errors():
    with pytest.raises(UserError, match="is a chromatin preset, not a promoter one"):
        load_finetune_config("promoter", "chromatin_tiny")
    with pytest.raises(ConfigError, match="unknown key"):
        load_finetune_config("promoter", None, {"learning_rate": 1.0})
    with pytest.raises(ConfigError, match="unknown task"):
        FinetuneConfig(task="enhancer")


def test_cli_prints_model_and_baseline(dataset, finished, tmp_path, capsys):
    out_full, _ = finished
    preset = tmp_path / "micro.yaml"
    preset.write_text(
        yaml.safe_dump(
            {
                "extends": str(preset_path("finetune", "promoter_tiny")),
                "max_len": 64,
                "model": {"hidden_size": 16, "num_hidden_layers": 1},
            }
        )
    )
    code = main(
        [
            "promoter",
            "finetune",
            "--data",
            str(dataset),
            "--out",
            str(tmp_path / "run"),
            "--config",
            str(preset),
            "--tokenizer",
            str(out_full / "tokenizer"),
            "--max-steps",
            "2",
            "--val-every",
            "1",
            "--batch-size",
            "4",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "genolong full test" in printed and "kmer baseline" in printed and "best val/f1" in printed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--data", "DATA", "--model", "M", "--tokenizer", "T"], "give --model or --tokenizer, not both"),
        (["--data", "NOWHERE"], "is not a promoter dataset"),
        (["--data", "DATA", "--config", "nope"], "no finetune preset 'nope'"),
    ],
)
def test_cli_errors_are_one_line(dataset, tmp_path, capsys, args, message):
    args = [{"DATA": str(dataset), "NOWHERE": str(tmp_path / "none")}.get(a, a) for a in args]
    code = main(["promoter", "finetune", "--out", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_foreign_checkpoints_are_refused(dataset, finished, tmp_path):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "other.ckpt").write_bytes(b"not ours")
    with pytest.raises(UserError, match="not from a genolong fine-tuning run"):
        run_finetune(
            dataset,
            out,
            micro_config("promoter"),
            tokenizer_dir=finished[0] / "tokenizer",
            show_progress=False,
        )
    assert (out / "checkpoints" / "other.ckpt").read_bytes() == b"not ours"
