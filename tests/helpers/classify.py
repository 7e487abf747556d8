"""Builders for the fine-tuning, prediction and evaluation tests: micro configs, small real
datasets (mouse promoters, the 100 real DeepSEA rows) and random-weight classifier directories."""

from __future__ import annotations

from pathlib import Path

from genolong.classifier.directory import Classifier, TaskInfo
from genolong.dna.sequence import read_fasta, write_fasta
from helpers.deepsea import CENTRE, deepsea_rows, real_rows, synthetic_genome, write_bundle

#: Overrides that make any finetune preset a micro run (seconds on one core).
MICRO = {
    "max_len": 64,
    "model.hidden_size": 16,
    "model.num_hidden_layers": 1,
    "model.num_attention_heads": 2,
    "model.intermediate_size": 32,
    "tokenizer.vocab_size": 64,
    "tokenizer.sample_bp": 20_000,
    "patience": 2,
    "batch_size_eval": 32,
    "train.max_steps": 6,
    "train.val_every_steps": 3,
    "train.batch_size": 8,
    "train.warmup_steps": 1,
    "train.log_every_steps": 1,
    "train.checkpoint_every_steps": 3,
    "train.val_windows": 64,
}


def micro_config(task: str, **overrides):
    from genolong.tasks.task import load_finetune_config

    return load_finetune_config(task, None, MICRO | overrides)


def promoter_dataset(real_data: Path, out: Path, positives: int = 60, negatives: int = 120) -> Path:
    """A small promoter dataset from the first real mouse TATA promoters and real non-promoters."""
    from genolong.prep.promoter_dataset import PromoterDatasetConfig, build_promoter_dataset

    out.parent.mkdir(parents=True, exist_ok=True)
    sources = {}
    for name, count in (("Mouse_tata.fa", positives), ("Mouse_nonprom.fa", negatives)):
        records = [
            r
            for _, r in zip(
                range(count), read_fasta(real_data / "promoters" / name, unique_names=False), strict=False
            )
        ]
        sources[name] = out.parent / f"{out.name}_{name}"
        write_fasta(sources[name], records)
    config = PromoterDatasetConfig(
        fasta=sources["Mouse_tata.fa"],
        negatives="fasta",
        negative_fasta=sources["Mouse_nonprom.fa"],
        fractions=(0.6, 0.2, 0.2),
        seed=1,
    )
    build_promoter_dataset(config, out)
    return out


def chromatin_prepared(real_data: Path, work: Path, *, context: int | None) -> Path:
    """The 100 real DeepSEA rows (and their reverse complements) as a prepared directory with
    train/valid/test: 1,000-bp inputs (``context=None``) or windows located in a synthetic
    genome that embeds the real 8-kb sequences (``context=8000``)."""
    from genolong.prep.chromatin_dataset import prepare_chromatin

    sequences, labels = deepsea_rows(real_data)
    bundle = write_bundle(work / "bundle", sequences, labels)
    out = work / f"prepared_{context or 1000}"
    if context is None:
        prepare_chromatin(bundle, out)
        return out
    windows, _ = real_rows(real_data)
    records, _ = synthetic_genome(windows)
    genome = work / "synthetic.fa"
    write_fasta(genome, records)
    prepare_chromatin(bundle, out, genome=genome, context=context, chunk_rows=64)
    return out


def real_deepsea_fastas(real_data: Path, work: Path) -> tuple[Path, Path]:
    """FASTA files of the 100 real 8-kb DeepSEA rows and of their central 1,000 bp."""
    windows, _ = real_rows(real_data)
    long, short = work / "deepsea_8kb.fa", work / "deepsea_1kb.fa"
    write_fasta(long, [(f"row{i}", w) for i, w in enumerate(windows)])
    write_fasta(short, [(f"row{i}", w[CENTRE]) for i, w in enumerate(windows)])
    return long, short


def tiny_tokenizer(out: Path) -> Path:
    """A 64-token BPE tokenizer trained on the shipped human sample genome."""
    from genolong.dna.tokenizer import TokenizerTrainConfig, train_tokenizer
    from genolong.resources import sample_genome

    train_tokenizer(
        sample_genome(), out, TokenizerTrainConfig(vocab_size=64, sample_bp=20_000), show_progress=False
    )
    return out


def tiny_masked_lm(out: Path, tokenizer_dir: Path, positions: int, **overrides):
    """A randomly initialised 1-layer full-attention masked-LM model (hidden 16, 2 heads) with
    ``positions`` positions and the :func:`tiny_tokenizer` trained into ``tokenizer_dir``, saved in
    ``out``; returns the loaded tokenizer."""
    from genolong.dna.tokenizer import load_tokenizer
    from genolong.model.configuration import GenolongConfig
    from genolong.model.loading import save_model
    from genolong.model.modeling import GenolongForMaskedLM

    tokenizer = load_tokenizer(tiny_tokenizer(tokenizer_dir))
    model = GenolongForMaskedLM(GenolongConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=32,
                                               max_position_embeddings=positions, **overrides))
    save_model(model, tokenizer, out)
    return tokenizer


def random_classifier(
    out: Path,
    tokenizer_dir: Path,
    *,
    task: str,
    window_bp: int,
    min_bp: int,
    label_names: list[str],
    threshold: float | None = None,
    max_len: int = 96,
    seed: int = 0,
) -> Path:
    """Save a classifier directory with random weights (dropout off)."""
    import torch

    from genolong.dna.tokenizer import load_tokenizer
    from genolong.model.configuration import GenolongConfig
    from genolong.model.modeling import GenolongForSequenceClassification

    tokenizer = load_tokenizer(tokenizer_dir)
    torch.manual_seed(seed)
    config = GenolongConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=max_len,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=len(label_names),
        problem_type="multi_label_classification",
        initializer_range=0.5,
    )
    model = GenolongForSequenceClassification(config)
    info = TaskInfo(task, window_bp, min_bp, max_len, label_names, threshold)
    Classifier(model, tokenizer, info, device="cpu").save(out)
    return out


def finetuned_chromatin(real_data: Path, tmp_path_factory) -> tuple[Path, Path, dict]:
    """A micro chromatin model fine-tuned on the real rows' 8-kb windows, built once per test
    run (cached in pytest's base temporary directory; modules share it).

    Returns:
        The prepared directory, the run directory and the run's report.
    """
    import json

    from genolong.training.finetune import run_finetune

    work = tmp_path_factory.getbasetemp() / "chromatin_micro_run"
    prepared, run = work / "prepared_8000", work / "run"
    if not (run / "report.json").is_file():
        chromatin_prepared(real_data, work, context=8000)
        # 128 tokens: 4 blocks of the preset's BigBird, enough for its 3-block window
        run_finetune(prepared, run, micro_config("chromatin", max_len=128), show_progress=False)
    return prepared, run, json.loads((run / "report.json").read_text())


def random_promoter_model(tmp_path_factory, window_bp: int) -> Path:
    """A random promoter classifier over a fresh :func:`tiny_tokenizer` (its directory beside it
    as ``tokenizer``), for tests of loading and inputs."""
    work = tmp_path_factory.mktemp("promoter_model")
    return random_classifier(work / "model", tiny_tokenizer(work / "tokenizer"), task="promoter",
                             window_bp=window_bp, min_bp=window_bp, label_names=["promoter"], threshold=0.5)
