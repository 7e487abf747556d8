"""MLM pretraining end to end on a micro preset: windows, masking, metrics, resume, errors, DDP."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback

from genolong.cli.main import main
from genolong.configs import preset_path
from genolong.core.errors import ConfigError, UserError
from genolong.datasets.corpus import Corpus
from genolong.datasets.mlm import MaskingConfig, MLMWindows, PositionSampler, SpecialIds, pack_windows
from genolong.dna.tokenizer import load_tokenizer
from genolong.resources import sample_genome
from genolong.training.console import StepProgress
from genolong.training.pretrain import load_pretrain_config, logged_rows, run_pretrain

MICRO = {
    "max_len": 128,
    "model.backbone": "full",
    "model.hidden_size": 32,
    "model.num_hidden_layers": 1,
    "model.num_attention_heads": 2,
    "model.intermediate_size": 64,
    "tokenizer.vocab_size": 256,
    "tokenizer.sample_bp": 50_000,
    "corpus.passes": 2,
    "train.max_steps": 6,
    "train.batch_size": 2,
    "train.warmup_steps": 2,
    "train.val_every_steps": 3,
    "train.val_windows": 4,
    "train.checkpoint_every_steps": 3,
    "train.log_every_steps": 1,
    "train.learning_rate": 0.003,
}


def micro(**overrides):
    return load_pretrain_config("tiny", MICRO | overrides)


class ShownAtEnd(Callback):
    """What the progress bar shows after the last training step (:meth:`StepProgress.summary`)."""

    text = ""

    def on_train_end(self, trainer, pl_module):
        ShownAtEnd.text = StepProgress.summary(trainer)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pretrain") / "run"
    report = run_pretrain(sample_genome(), out, micro(), show_progress=False, extra_callbacks=[ShownAtEnd()])
    return out, report


def test_run_writes_model_report_and_curve(finished_run):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    out, report = finished_run
    assert report["steps"] == 6
    for key in ("val_loss", "val_bpc", "unigram_bpc", "train_tokens_per_s"):
        assert np.isfinite(report[key]), key
    assert json.loads((out / "report.json").read_text())["val_bpc"] == report["val_bpc"]
    assert (out / "learning_curve.png").stat().st_size > 1000
    umask = os.umask(0)
    os.umask(umask)
    assert (out / "model").stat().st_mode & 0o777 == 0o777 & ~umask  # the user's umask, not 0700
    assert torch.load(out / "checkpoints" / "last.ckpt")["global_step"] == 6
    assert (out / "logs" / "csv" / "version_0" / "metrics.csv").exists()
    assert list((out / "logs" / "tensorboard").glob("events*"))
    model = AutoModelForMaskedLM.from_pretrained(out / "model")
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    assert model.config.vocab_size == len(tokenizer)


def test_the_report_and_the_progress_bar_give_one_throughput_and_validation_runs_once_per_step(finished_run):
    out, report = finished_run
    shown = re.search(r"tokens/s=([\d,]+)", ShownAtEnd.text)
    assert shown and abs(float(shown.group(1).replace(",", "")) - report["train_tokens_per_s"]) <= 1, ShownAtEnd.text
    validated = [row["step"] for row in logged_rows(out) if "val/bpc" in row]
    assert validated == sorted(set(validated)) and len(validated) == 2  # every 3 steps of 6; none repeated at the end


def test_bpc_is_nll_in_bits_over_masked_bases(finished_run):
    """Recompute the validation BPC by hand from the saved model and the corpus."""
    from genolong.datasets.mlm import collate_windows
    from genolong.dna.tokenizer import token_lengths
    from genolong.model.modeling import GenolongForMaskedLM

    out, report = finished_run
    config = micro()
    model = GenolongForMaskedLM.from_pretrained(out / "model").eval()
    tokenizer = load_tokenizer(out / "model")
    special = SpecialIds.from_tokenizer(tokenizer)
    valid = MLMWindows(Corpus(out / "corpus"), "valid", special, config.max_len, config.masking, config.train.seed + 1)
    chosen = np.linspace(0, len(valid) - 1, min(config.train.val_windows, len(valid))).round().astype(int)
    batch = collate_windows([valid[int(i)] for i in chosen], special.pad)
    with torch.no_grad():
        logits = model(**batch).logits
    targets = batch["labels"][batch["labels"] != -100]
    nats = torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
    bases = token_lengths(tokenizer)[targets.numpy()].sum()
    assert report["val_bpc"] == pytest.approx(nats / np.log(2) / bases, rel=1e-4)


def test_masking_rule_and_determinism(finished_run):
    out, _ = finished_run
    tokenizer = load_tokenizer(out / "model")
    special = SpecialIds.from_tokenizer(tokenizer)
    data = MLMWindows(Corpus(out / "corpus"), "train", special, 128, MaskingConfig(mask_rate=0.15), seed=0)
    masked = replaced = chosen = regular = 0
    for index in range(len(data)):
        item, again = data[(index, index)], data[(index, index)]
        assert torch.equal(item["input_ids"], again["input_ids"])
        original = torch.from_numpy(data.tokens(index))
        assert original[0] == special.cls and original[-1] == special.sep and len(original) <= 128
        picked = item["labels"] != -100
        assert torch.equal(item["labels"][picked], original[picked])
        chosen += int(picked.sum())
        regular += int((original >= special.first_regular).sum())
        masked += int((item["input_ids"][picked] == special.mask).sum())
        replaced += int((item["input_ids"][picked] != original[picked]).sum())
    assert chosen / regular == pytest.approx(0.15, abs=0.01)
    assert masked / chosen == pytest.approx(0.8, abs=0.03)
    assert (replaced - masked) / chosen == pytest.approx(0.1, abs=0.03)


def test_windows_pack_whole_sentences():
    sentences = np.array([0, 40, 90, 100, 300, 330])
    documents = np.array([[0, 3, 0, 0], [3, 5, 0, 1000]])
    assert pack_windows(sentences, documents, 100).tolist() == [[0, 100], [100, 200], [200, 300], [300, 330]]
    # a sentence longer than the window (100..300) is cut; packing restarts at sentence ends
    assert pack_windows(sentences, documents, 60).tolist() == [[0, 40], [40, 100], [100, 160], [160, 220],
                                                               [220, 280], [280, 330]]


def test_ranks_read_disjoint_positions_and_resume_continues():
    ranks = [list(PositionSampler(10, 40, seed=0, rank=r, world_size=2)) for r in range(2)]
    positions = [[p for p, _ in rank] for rank in ranks]
    assert not set(positions[0]) & set(positions[1]) and sorted(positions[0] + positions[1]) == list(range(40))
    windows = [w for p, w in sorted(ranks[0] + ranks[1])]
    assert sorted(windows[:10]) == list(range(10)) and windows[:10] != windows[10:20], "new permutation per pass"
    resumed = list(PositionSampler(10, 40, seed=0, start=16, rank=0, world_size=2))
    assert resumed == ranks[0][8:]


class StopAt(Callback):
    def __init__(self, step):
        self.step = step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step >= self.step:
            trainer.should_stop = True


def test_resume_reaches_the_same_loss_as_an_uninterrupted_run(tmp_path, finished_run):
    out_full, _ = finished_run
    config = micro(**{"model.hidden_dropout_prob": 0.2})  # dropout: the RNG state must resume too
    straight = run_pretrain(sample_genome(), tmp_path / "a", config, tokenizer_dir=out_full / "tokenizer",
                            show_progress=False)
    stopped = run_pretrain(sample_genome(), tmp_path / "b", config, tokenizer_dir=out_full / "tokenizer",
                           show_progress=False, extra_callbacks=[StopAt(3)])
    assert stopped == {"stopped_at_step": 3}
    assert torch.load(tmp_path / "b" / "checkpoints" / "last.ckpt")["global_step"] == 3
    with pytest.raises(UserError, match="pass --resume"):
        run_pretrain(sample_genome(), tmp_path / "b", config, tokenizer_dir=out_full / "tokenizer",
                     show_progress=False)
    resumed = run_pretrain(sample_genome(), tmp_path / "b", config, tokenizer_dir=out_full / "tokenizer",
                           resume=True, show_progress=False)
    assert resumed["val_loss"] == pytest.approx(straight["val_loss"], rel=1e-6)
    a = torch.load(tmp_path / "a" / "checkpoints" / "last.ckpt")["state_dict"]
    b = torch.load(tmp_path / "b" / "checkpoints" / "last.ckpt")["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)


def test_foreign_run_and_mismatched_tokenizer_are_refused(tmp_path, finished_run):
    out_full, _ = finished_run
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "other.ckpt").write_bytes(b"not ours")
    with pytest.raises(UserError, match="not from a genolong pretrain run"):
        run_pretrain(sample_genome(), out, micro(), tokenizer_dir=out_full / "tokenizer", show_progress=False)
    assert (out / "checkpoints" / "other.ckpt").read_bytes() == b"not ours"
    with pytest.raises(UserError, match="vocab_size=999 but the tokenizer has 256"):
        run_pretrain(sample_genome(), tmp_path / "v", micro(**{"model.vocab_size": 999}),
                     tokenizer_dir=out_full / "tokenizer", show_progress=False)
    with pytest.raises(UserError, match="holds a pretrain run with another"):
        run_pretrain(sample_genome(), out_full, micro(**{"train.learning_rate": 0.1}), show_progress=False)


def test_cli_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "gaps.fa").write_text(">chr1\n" + "N" * 3000 + "\n")
    code = main(["pretrain", "--genome", str(tmp_path / "gaps.fa"), "--out", str(tmp_path / "r"), "--max-steps", "1",
                 "--backbone", "full"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "no usable sequence" in err
    code = main(["pretrain", "--config", "nope", "--out", str(tmp_path / "r")])
    assert code == 2 and "no pretrain preset 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: nothing.yaml\n")
    assert main(["pretrain", "--config", str(bad), "--out", str(tmp_path / "r")]) == 2


def test_bad_max_len():
    with pytest.raises(ConfigError, match="max_len must be >= 8"):
        micro(max_len=4)
    with pytest.raises(ConfigError, match="exceeds max_position_embeddings"):
        micro(**{"model.max_position_embeddings": 64}).model_config(256)
    bigbird = {"model.backbone": "bigbird", "model.block_size": 64, "model.max_position_embeddings": 1024}
    with pytest.raises(ConfigError, match="max_len=1000 is not a multiple of 64"):
        micro(max_len=1000, **bigbird).model_config(256)


@pytest.mark.slow  # two fresh processes importing torch and Lightning: ~40 s on the loaded 2-core machine
def test_ddp_two_cpu_processes(tmp_path, finished_run):
    out_full, _ = finished_run
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    data = {"extends": str(preset_path("pretrain", "tiny"))}
    for key, value in MICRO.items():
        section, _, name = key.rpartition(".")
        (data.setdefault(section, {}) if section else data)[name] = value
    config = tmp_path / "micro.yaml"
    config.write_text(yaml.safe_dump(data))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "genolong.cli.main",
           "pretrain", "--config", str(config), "--tokenizer", str(out_full / "tokenizer"),
           "--out", str(tmp_path / "ddp"), "--max-steps", "4", "--accelerator", "cpu", "--devices", "2",
           "--strategy", "ddp"]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "rank 0/2 reads training sample positions 0, 2" in result.stderr
    assert "rank 1/2 reads training sample positions 1, 3" in result.stderr
    assert json.loads((tmp_path / "ddp" / "report.json").read_text())["steps"] == 4
    rng = torch.load(tmp_path / "ddp" / "checkpoints" / "last.ckpt", weights_only=True)["genolong_rng"]
    assert len(rng) == 2, "each rank's RNG state, for an exact resume"


def test_other_ranks_ignore_a_prepared_marker_from_an_earlier_run(tmp_path):
    """A rank > 0 waits for rank 0's marker of this launch, not a stale one left in --out."""
    import os
    import threading

    from genolong.training.pretrain import _wait_for

    marker = tmp_path / "prepared.json"
    marker.write_text('{"tokenizer": "old"}')
    os.utime(marker, (1e9, 1e9))  # 2001
    writer = threading.Timer(0.5, lambda: marker.write_text('{"tokenizer": "new"}'))
    writer.start()
    assert _wait_for(marker, timeout_s=30) == {"tokenizer": "new"}
    writer.join()


def test_ranks_share_the_corpus_build_and_rank_0_writes_the_manifest(tmp_path, finished_run, monkeypatch):
    """The data step of a two-rank launch (threads here): rank 1 waits for rank 0's tokenizer and builds its
    share of the shards, rank 0 the rest and the manifest; the corpus is that of one process."""
    import threading

    import genolong.datasets.corpus_build as corpus_build
    from genolong.training.pretrain import _prepare_data

    run, _ = finished_run
    monkeypatch.setattr(corpus_build, "available_cores", lambda: 1)  # no forking beside a thread
    real, built = corpus_build.build_shard, {}

    def recorded(name, *args, **kwargs):
        built.setdefault(threading.current_thread().name, []).append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(corpus_build, "build_shard", recorded)
    out, tokenizers = tmp_path / "run", {}

    def rank(number: int) -> None:
        tokenizers[number] = _prepare_data(sample_genome(), run / "tokenizer", out / "corpus", out, micro(), False,
                                           number, 2)

    other = threading.Thread(target=rank, args=(1,), name="rank 1")
    other.start()
    rank(0)
    other.join(timeout=60)
    assert tokenizers == {0: run / "tokenizer", 1: run / "tokenizer"}
    pieces = [shard["chrom"] for shard in Corpus(run / "corpus").manifest["shards"]]
    assert built == {"MainThread": pieces[0::2], "rank 1": pieces[1::2]}
    files = sorted(p.relative_to(run / "corpus") for p in (run / "corpus").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(out / "corpus") for p in (out / "corpus").rglob("*") if p.is_file())
    for name in files:
        if name.name != "corpus.json":
            assert (run / "corpus" / name).read_bytes() == (out / "corpus" / name).read_bytes(), name
    one, two = (json.loads((folder / "corpus.json").read_text()) for folder in (run / "corpus", out / "corpus"))
    assert one.pop("build") and two.pop("build") and one == two  # all but the timing


def test_bf16_autocast_trains_on_the_cpu_as_float32_does(tmp_path, finished_run):
    """``--precision bf16`` (what auto picks on a CPU with fast native bf16): the same 6 steps reach the float32
    run's validation loss within 0.05 nats (bf16 keeps 8 significant bits; measured 2026-11-26: 0.0001 apart, at 5.49)."""
    out_full, float32 = finished_run
    report = run_pretrain(sample_genome(), tmp_path / "bf16", micro(**{"train.precision": "bf16"}),
                          tokenizer_dir=out_full / "tokenizer", corpus_dir=out_full / "corpus", show_progress=False)
    assert report["steps"] == 6
    assert abs(report["val_loss"] - float32["val_loss"]) < 0.05, (report["val_loss"], float32["val_loss"])
