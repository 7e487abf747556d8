"""Fine-tuning modes: LoRA adapters (peft) merge into the same function, a probe trains the head
only, and both run through ``genolong task finetune --mode``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.task_finetune import micro_preset, motif_rows
from safetensors.torch import load_file

from genolong.classifier.directory import Classifier
from genolong.classifier.embedder import Embedder
from genolong.cli.main import main
from genolong.core.errors import ConfigError
from genolong.model.configuration import GenolongConfig
from genolong.model.modeling import GenolongForSequenceClassification
from genolong.tasks.settings import LoraSettings
from genolong.training.modes import apply_mode, check_start, merged_model, trainable_parameters
from genolong.training.probe import head_pooling


def tiny_model() -> GenolongForSequenceClassification:
    torch.manual_seed(0)
    config = GenolongConfig(vocab_size=30, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=64, num_labels=3,
                            problem_type="single_label_classification", backbone="full")
    return GenolongForSequenceClassification(config).eval()


def test_lora_adapts_the_projections_and_merges_into_the_same_function():
    model = apply_mode(tiny_model(), "lora", LoraSettings(rank=4))
    trained = [name for name, p in model.named_parameters() if p.requires_grad]
    assert {name.split(".")[-4] for name in trained if "lora_" in name} == {"qkv", "out", "up", "down"}
    assert all("lora_" in name or ".classifier." in name for name in trained)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:  # B starts at zero; give the adapters an effect
            torch.nn.init.normal_(parameter, generator=torch.Generator().manual_seed(1))
    model.eval()
    ids = torch.randint(5, 30, (3, 20), generator=torch.Generator().manual_seed(2))
    adapted = model(input_ids=ids).logits
    merged = merged_model(model, "lora")
    assert type(merged) is GenolongForSequenceClassification
    assert not any("lora" in key for key in merged.state_dict())
    torch.testing.assert_close(merged(input_ids=ids).logits, adapted, rtol=1e-4, atol=1e-5)


def test_a_probe_trains_the_head_only_and_bad_targets_are_refused():
    model = apply_mode(tiny_model(), "probe", LoraSettings())
    counts = trainable_parameters(model)
    assert counts["trainable"] == 32 * 3 + 3
    with pytest.raises(ConfigError, match="name no linear layer"):
        apply_mode(tiny_model(), "lora", LoraSettings(targets=["query"]))
    with pytest.raises(ConfigError, match="mode must be one of"):
        apply_mode(tiny_model(), "half", LoraSettings())


@pytest.mark.parametrize("pooling, cached", [("cls", "cls"), ("mean", "mean"), ("max", None)])
def test_the_probe_caches_the_vector_the_head_reads(pooling, cached):
    config = tiny_model().config
    config.classifier_pooling = pooling
    assert head_pooling(GenolongForSequenceClassification(config)) == cached


def test_the_probe_cache_is_reused_only_under_its_key(tmp_path):
    """split_embeddings: computed and written under a key, read back under the same key (no encoder
    call), computed again under another (a changed split, pooling, model...)."""
    from helpers.classify import tiny_tokenizer

    from genolong.classifier.directory import TokenEncoder
    from genolong.dna.tokenizer import load_tokenizer
    from genolong.tasks.task import SequenceRows
    from genolong.training.probe import split_embeddings

    class Counting:
        """Stands for the Embedder: counts the rows it embeds; a row's vector is its token count."""

        rows = 0

        def pooled(self, input_ids, attention_mask):  # (B, T) -> (B, 1, 1)
            self.rows += len(input_ids)
            return attention_mask.sum(1, keepdim=True)[:, None].float().numpy()

    sequences = ["ACGTTGCA" * 3, "GGATCC", "T" * 40]
    rows = SequenceRows(sequences, np.zeros((3, 1), dtype=np.float32))
    encoder = TokenEncoder(load_tokenizer(tiny_tokenizer(tmp_path / "tokenizer")), 16)
    embedder, path = Counting(), tmp_path / "train.npz"
    first = split_embeddings(embedder, encoder, rows, np.arange(3), {"split": "a"}, path, batch_size=2)
    np.testing.assert_array_equal(first[:, 0], encoder(sequences)["attention_mask"].sum(1).numpy())
    assert embedder.rows == 3
    np.testing.assert_array_equal(split_embeddings(embedder, encoder, rows, np.arange(3), {"split": "a"}, path, 2),
                                  first)
    assert embedder.rows == 3
    split_embeddings(embedder, encoder, rows, np.arange(2), {"split": "b"}, path, 2)
    assert embedder.rows == 5


def test_a_probe_embeds_each_split_once_and_a_rerun_reads_the_cache(tmp_path, monkeypatch):
    """mode probe: the encoder runs on train and valid once (the cache in OUT/probe_cache holds what
    the saved classifier's head reads); the rerun into the same directory runs no encoder before its
    report and trains the same head."""
    rows = motif_rows(90, 60, seed=7)
    (tmp_path / "rows.csv").write_text("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "data")]) == 0
    calls = []
    original = Embedder.hidden_states
    monkeypatch.setattr(Embedder, "hidden_states", lambda self, *a: calls.append(len(a[0])) or original(self, *a))
    out, heads = tmp_path / "run", []
    command = ["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out), "--mode", "probe",
               "--config", str(micro_preset(tmp_path / "micro.yaml", max_steps=6, val_every_steps=3)),
               "--set", "kmer_baseline=false"]
    for embedded in (72 + 9, 0):  # train and valid rows, then none
        calls.clear()
        assert main(command) == 0
        assert sum(calls) == embedded
        weights = load_file(str(out / "model" / "model.safetensors"))
        heads.append({k: v for k, v in weights.items() if k.startswith("classifier.")})
    assert heads[0].keys() == heads[1].keys() and all(torch.equal(heads[0][k], heads[1][k]) for k in heads[0])
    report = json.loads((out / "report.json").read_text())
    assert report["mode"] == "probe" and report["steps"] == 6
    classifier = Classifier.load(out / "model", device="cpu")
    valid = [line.split("\t")[1] for line in (tmp_path / "data" / "valid.tsv").read_text().splitlines()[1:]]
    cached = torch.from_numpy(np.load(out / "probe_cache" / "valid.npz")["embeddings"])[:, None]
    with torch.no_grad():
        torch.testing.assert_close(classifier.model.classifier(cached)[0], classifier.logits(valid),
                                   rtol=1e-4, atol=1e-5)


def test_lora_without_a_pretrained_model_is_refused_and_a_probe_warns(tmp_path, capsys, caplog):
    """Both trained on a random encoder without a word: LoRA on random weights is no fine-tuning of
    anything, a probe of random features is a baseline a user may want."""
    rows = motif_rows(60, 60, seed=3)
    (tmp_path / "rows.csv").write_text("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "data")]) == 0
    capsys.readouterr()
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "run"),
                 "--mode", "lora"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--mode lora adapts a pretrained encoder" in err and "--model DIR" in err
    assert not (tmp_path / "run").exists()
    check_start("lora", tmp_path / "model")  # with a model: no word
    check_start("full", None)
    assert not caplog.records
    with caplog.at_level("WARNING"):
        check_start("probe", None)
    assert "RANDOM encoder" in caplog.text


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["probe"])  # lora: with a converted model, below
def test_the_modes_fine_tune_through_the_command(tmp_path, mode):
    rows = motif_rows(120, 60, seed=7)
    (tmp_path / "rows.csv").write_text("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "data")]) == 0
    out = tmp_path / "run"
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out), "--mode", mode,
                 "--config", str(micro_preset(tmp_path / "micro.yaml", max_steps=4, val_every_steps=2))]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["mode"] == mode and report["trainable_parameters"]["percent"] < 50
    assert (out / "adapters" / "adapter_config.json").is_file() == (mode == "lora")
    classifier = Classifier.load(out / "model", task="labelled", device="cpu")
    assert classifier.probabilities(["ACGT" * 15]).shape == (1, 3)


@pytest.mark.slow
def test_lora_and_probe_on_a_converted_gena_bigbird(real_data, tmp_path):
    """GENA-LM's BigBird config (scaled down, random weights) converted, then both modes on the 3-class task."""
    from helpers.convert import copy_gena_tokenizer, gena_config, randomize, save_source
    from transformers import BigBirdConfig, BigBirdForPreTraining

    config = BigBirdConfig(**gena_config(real_data, "hf_bigbird_L12-H768-A12-V32k-L4096.json"))
    save_source(tmp_path / "src", config.to_dict(), randomize(BigBirdForPreTraining(config)).state_dict(),
                safetensors=True)
    copy_gena_tokenizer(real_data, tmp_path / "src")
    assert main(["convert", str(tmp_path / "src"), "--out", str(tmp_path / "gena")]) == 0
    rows = motif_rows(120, 600, seed=8)
    (tmp_path / "rows.csv").write_text("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.csv"), "--out", str(tmp_path / "data")]) == 0
    for mode in ("lora", "probe"):
        out = tmp_path / mode
        assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out), "--mode", mode,
                     "--model", str(tmp_path / "gena"), "--set", "max_len=256", "--set", "model.backbone=bigbird",
                     "--config", str(micro_preset(tmp_path / "micro.yaml", max_steps=2, val_every_steps=2))]) == 0
        report = json.loads((out / "report.json").read_text())
        assert report["mode"] == mode and report["backbone"] == "bigbird"
        assert report["trainable_parameters"]["trainable"] < report["trainable_parameters"]["total"] / 2
        assert Classifier.load(out / "model", device="cpu").probabilities(["ACGT" * 150]).shape == (1, 3)
