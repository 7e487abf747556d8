"""Fine-tuning for sequence classification: promoters (BigBird App. F.2) and the 919 DeepSEA
chromatin profiles (App. F.3), with one LightningModule and one DataModule for both.

Both tasks put C independent sigmoid outputs on the [CLS] token and train them with binary
cross-entropy (``model.positive_label_weight`` up-weights positives: 8 for chromatin, as
BigBird). What differs is in :class:`TaskData`:

============  ======================================  =========================================
              promoter                                chromatin
============  ======================================  =========================================
data          ``genolong promoter prepare`` dir       ``genolong chromatin prepare`` dir
outputs C     1                                       919
early stop    validation F1 (at its best threshold)   validation mean ROC AUC over profiles
test report   F1, precision, recall, MCC, AUROC,      per-profile ROC/PR AUC (``aucs.csv``),
              AUPRC at the validation threshold,      class medians next to DeepSEA and BigBird
              next to the k-mer baseline
============  ======================================  =========================================

The model starts from a pretrained directory (``--model``: an MLM run's ``out/model``, whose
tokenizer it uses) or from scratch (a tokenizer is trained on the training split unless one
is given). The run directory::

    out/tokenizer/     from scratch without --tokenizer
    out/checkpoints/   best.ckpt (by the monitored metric), last.ckpt, periodic
    out/logs/          csv/version_N/metrics.csv, tensorboard/
    out/model/         the classifier directory (genolong.inference.classifier), best weights
    out/report.json    validation and test metrics
    out/aucs.csv       chromatin: per-profile AUCs on the test split
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from genolong.config import from_dict, set_dotted, to_dict
from genolong.dna.tokenizer import TokenizerTrainConfig, load_tokenizer, tokenizer_fingerprint
from genolong.errors import ConfigError, UserError
from genolong.evaluation.chromatin import evaluation_rows
from genolong.evaluation.cross_source import pair_metrics
from genolong.files import atomic_write_text
from genolong.inference.classifier import Classifier, TaskInfo, TokenEncoder
from genolong.model.configuration import check_model_fields
from genolong.model.loading import backbone_keys, check_tokenizer, load_model, read_model_config
from genolong.outputs import claim_directory
from genolong.tasks.checkpoints import read_checkpoint, resume_checkpoint
from genolong.tasks.common import (
    ResumableRNG,
    Throughput,
    TrainConfig,
    adamw_with_schedule,
    build_trainer,
    data_loader,
)
from genolong.tasks.stopping import ResumableEarlyStopping, after_training, fit

log = logging.getLogger(__name__)

#: GenolongConfig fields that fix the shapes of the weights: a pretrained model keeps its own.
ARCHITECTURE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "hidden_act",
    "pre_layer_norm",
    "final_layer_norm",
    "embedding_layer_norm",
)
#: The metric early stopping and the best checkpoint follow, per task (higher is better).
MONITORS = {"promoter": "val/f1", "chromatin": "val/mean_auc"}


@dataclass
class ClassifyConfig:
    """A fine-tuning run; a YAML preset fills it (``configs/finetune/``).

    Attributes:
        task: ``promoter`` or ``chromatin``.
        max_len: tokens per input, [CLS] and [SEP] included; longer inputs keep their
            central tokens (BigBird: 4096).
        model: ``GenolongConfig`` fields. From scratch: all of them (``vocab_size`` comes from
            the tokenizer, ``max_position_embeddings`` defaults to max_len). With a pretrained
            model: only the backbone, its attention parameters, dropout and
            ``positive_label_weight`` apply; the architecture is the pretrained one.
        tokenizer: how to train a tokenizer on the training split (from scratch only).
        patience: validation rounds without improvement of the monitored metric before stopping.
        kmer_baseline: promoter only: also fit the k-mer baseline on the same splits.
        crop_min_bp: promoter only: train on random crops, each training input a random
            sub-window of ``crop_min_bp`` bp up to its full length (a random shift of the window
            around the TSS); the classifier then scores records from ``crop_min_bp`` bp. None:
            whole sequences.
        calibrate: promoter only: Platt-scale the probability on the validation split, folded
            into the output layer (:mod:`genolong.evaluation.calibration`), before the
            threshold is chosen there.
        test_rows: evaluate this many evenly spaced test rows (None: all).
        batch_size_eval: inputs per model call when scoring validation and test after training.
        train: optimisation and run settings (``val_windows`` = validation inputs, evenly
            spaced over the validation split).
    """

    task: str = "promoter"
    max_len: int = 512
    model: dict[str, Any] = field(default_factory=dict)
    tokenizer: TokenizerTrainConfig = field(default_factory=lambda: TokenizerTrainConfig(vocab_size=256))
    patience: int = 5
    kmer_baseline: bool = True
    crop_min_bp: int | None = None
    calibrate: bool = False
    test_rows: int | None = None
    batch_size_eval: int = 64
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.task not in MONITORS:
            raise ConfigError(f"unknown task {self.task!r}; choose one of: {', '.join(MONITORS)}")
        check_model_fields(self.model)
        if self.max_len < 3:
            raise ConfigError(f"max_len must be >= 3 ([CLS] token [SEP]), got {self.max_len}")
        if self.patience < 1 or self.batch_size_eval < 1:
            raise ConfigError("patience and batch_size_eval must be >= 1")
        if self.crop_min_bp is not None and (self.task != "promoter" or self.crop_min_bp < 1):
            raise ConfigError(f"crop_min_bp applies to promoters and must be >= 1, got {self.crop_min_bp}")
        if self.test_rows is not None and self.test_rows < 1:
            raise ConfigError(f"test_rows must be >= 1 or null, got {self.test_rows}")


def load_classify_config(
    task: str, preset: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> ClassifyConfig:
    """A YAML file or shipped preset (default ``<task>_tiny``) merged with dotted ``overrides``.

    A YAML file may start from another with ``extends: other.yaml``.
    """
    from genolong.configs import preset_path
    from genolong.tasks.pretrain import _read_preset

    source = preset_path("finetune", str(preset or f"{task}_tiny"))
    data = _read_preset(source)
    if data.setdefault("task", task) != task:
        raise UserError(f"{source} is a {data['task']} preset, not a {task} one")
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value, source=str(source))
    return from_dict(ClassifyConfig, data, source=str(source))


# -- data ------------------------------------------------------------------------------------
class LabelledSequences(Protocol):
    """One split: ``sequence(i)`` is the model input (str), ``labels(i)`` its (C,) float32 targets."""

    def __len__(self) -> int: ...

    def sequence(self, index: int) -> str: ...

    def labels(self, index: int) -> np.ndarray: ...

    def all_labels(self, rows: np.ndarray) -> np.ndarray: ...


class PromoterRows:
    """A promoter split: label (1,) = 1 for a promoter."""

    def __init__(self, records):
        self.sequences = [record.sequence for record in records]
        self.sources = [record.source for record in records]
        self.targets = np.array([[record.label] for record in records], dtype=np.float32).reshape(-1, 1)

    def __len__(self) -> int:
        return len(self.sequences)

    def sequence(self, index: int) -> str:
        return self.sequences[index]

    def labels(self, index: int) -> np.ndarray:
        return self.targets[index]

    def all_labels(self, rows: np.ndarray) -> np.ndarray:
        return self.targets[rows]


class ChromatinRows:
    """A prepared chromatin split (memory-mapped): labels (919,)."""

    def __init__(self, split):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def sequence(self, index: int) -> str:
        return self.split.sequence(index)

    def labels(self, index: int) -> np.ndarray:
        return self.split.labels[index].astype(np.float32)

    def all_labels(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self.split.labels[rows], dtype=np.float32)


@dataclass
class TaskData:
    """A task's splits and what the classifier directory must record about them."""

    task: str
    splits: dict[str, LabelledSequences]
    label_names: list[str]
    window_bp: int
    min_bp: int
    source: dict[str, Any]


def load_task_data(task: str, data_dir: str | Path) -> TaskData:
    """Open the dataset directory of ``task`` (promoter: train/valid/test TSV; chromatin: prepared arrays).

    Raises:
        UserError: not a dataset of that task, a missing split, or a promoter split without both labels.
    """
    data_dir = Path(data_dir)
    if task == "promoter":
        from genolong.datasets.promoter import load_manifest, load_split

        manifest = load_manifest(data_dir)
        splits = {}
        for name in ("train", "valid", "test", *(["random_test"] if "random_test" in manifest["counts"] else [])):
            records = load_split(data_dir, name)
            if {r.label for r in records} != {0, 1}:
                raise UserError(
                    f"{data_dir}/{name}.tsv needs promoters and non-promoters; it has "
                    f"{len(records)} rows with labels {sorted({r.label for r in records})}"
                )
            splits[name] = PromoterRows(records)
        length, shortest = manifest["sequence_length"], manifest.get("min_sequence_length", manifest["sequence_length"])
        source = {
            "data": str(data_dir.resolve()),
            "negatives": manifest["negatives"]["method"],
            "split": manifest["split"]["method"],
            "counts": manifest["counts"],
        }
        return TaskData(task, splits, ["promoter"], length, shortest, source)
    from genolong.datasets.chromatin import PreparedChromatin
    from genolong.evaluation.profiles import chromatin_profiles

    prepared = PreparedChromatin(data_dir)
    splits = {name: ChromatinRows(prepared[name]) for name in ("train", "valid")}
    if "test" in prepared.splits:
        splits["test"] = ChromatinRows(prepared["test"])
    manifest = prepared.manifest
    source = {
        "data": str(data_dir.resolve()),
        "context": manifest["context"],
        "input_length": manifest["input_length"],
        "rows": {name: entry["rows"] for name, entry in manifest["splits"].items()},
    }
    return TaskData(
        task,
        splits,
        [p.name for p in chromatin_profiles()],
        manifest["context"],
        manifest["input_length"],
        source,
    )


def random_crop(sequence: str, min_bp: int, rng: np.random.Generator) -> str:
    """A random sub-window of ``sequence``: length uniform in ``min_bp..len``, start uniform where it fits.

    A sequence no longer than ``min_bp`` comes back whole.
    """
    if len(sequence) <= min_bp:
        return sequence
    length = int(rng.integers(min_bp, len(sequence) + 1))
    start = int(rng.integers(0, len(sequence) - length + 1))
    return sequence[start : start + length]


class TrainingInputs(Dataset):
    """``dataset[(position, index)]`` (from :class:`~genolong.datasets.mlm.PositionSampler`) or ``dataset[index]``:
    ``{"sequence": str, "labels": (C,) float32}``.

    With ``crop_min_bp``, a training input (keyed by its sample position) is a random crop
    (:func:`random_crop`) drawn from ``(seed, position)``: a resumed run sees the same crops.
    """

    def __init__(self, rows: LabelledSequences, crop_min_bp: int | None = None, seed: int = 0):
        self.rows = rows
        self.crop_min_bp = crop_min_bp
        self.seed = seed

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, Any]:
        position, index = key if isinstance(key, tuple) else (None, key)
        sequence = self.rows.sequence(index)
        if self.crop_min_bp is not None and position is not None:
            sequence = random_crop(sequence, self.crop_min_bp, np.random.default_rng([self.seed, position]))
        return {"sequence": sequence, "labels": self.rows.labels(index)}


class Collate:
    """Items -> ``input_ids``, ``attention_mask`` (B, T) and ``labels`` (B, C) float32."""

    def __init__(self, encoder: TokenEncoder):
        self.encoder = encoder

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.encoder([item["sequence"] for item in items])
        batch["labels"] = torch.from_numpy(np.stack([item["labels"] for item in items]))
        return batch


class ClassificationDataModule(pl.LightningDataModule):
    """Training inputs through a step-indexed :class:`~genolong.datasets.mlm.PositionSampler` (exact resume,
    distinct rows per rank); a fixed, evenly spaced validation subset, scored whole on every rank."""

    def __init__(self, data: TaskData, encoder: TokenEncoder, config: ClassifyConfig):
        super().__init__()
        self.data = data
        self.collate = Collate(encoder)
        self.config = config

    def _loader(self, dataset: Dataset, sampler) -> DataLoader:
        return data_loader(dataset, sampler, self.config.train, self.collate)

    def train_dataloader(self) -> DataLoader:
        from genolong.datasets.mlm import PositionSampler

        train = self.config.train
        rank, world = self.trainer.global_rank, self.trainer.world_size
        global_batch = train.batch_size * train.accumulate_grad_batches * world
        sampler = PositionSampler(
            len(self.data.splits["train"]),
            train.max_steps * global_batch,
            seed=train.seed,
            start=self.trainer.global_step * global_batch,
            rank=rank,
            world_size=world,
        )
        inputs = TrainingInputs(self.data.splits["train"], self.config.crop_min_bp, train.seed)
        return self._loader(inputs, sampler)

    def val_dataloader(self) -> DataLoader:
        valid = self.data.splits["valid"]
        rows = evaluation_rows(len(valid), self.config.train.val_windows)
        return self._loader(TrainingInputs(valid), [int(row) for row in rows])


# -- the LightningModule ---------------------------------------------------------------------
def validation_metrics(task: str, labels: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
    """The validation metrics of ``task`` from labels and probabilities, both (N, C).

    promoter: ``val/f1`` (at the F1-best threshold), ``val/auroc``, ``val/auprc``;
    chromatin: ``val/mean_auc``, the mean ROC AUC over the profiles with both labels, and
    ``val/profiles``, their number.
    """
    from genolong.evaluation.metrics import best_f1_threshold, per_profile_auc, promoter_metrics

    if task == "promoter":
        y, p = labels[:, 0], probabilities[:, 0]
        metrics = promoter_metrics(y, p, best_f1_threshold(y, p))
        return {"val/f1": metrics["f1"], "val/auroc": metrics["auroc"], "val/auprc": metrics["auprc"]}
    auc = per_profile_auc(labels.astype(np.uint8), probabilities).roc_auc
    defined = ~np.isnan(auc)
    if not defined.any():
        raise UserError(
            f"no profile has both positive and negative labels among the {len(labels)} "
            "validation rows, so the validation AUC is undefined",
            hint="raise train.val_windows",
        )
    return {"val/mean_auc": float(auc[defined].mean()), "val/profiles": float(defined.sum())}


class ClassifierModule(ResumableRNG, pl.LightningModule):
    """GenolongForSequenceClassification trained with (positive-weighted) BCE.

    Batches: ``input_ids``, ``attention_mask`` (B, T) and ``labels`` (B, C). Validation
    collects the probabilities of the whole validation subset and logs
    :func:`validation_metrics` plus ``val/loss``.
    """

    def __init__(self, model, config: ClassifyConfig):
        super().__init__()
        self.model = model
        self.config = config
        self.throughput = Throughput()
        self._val: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
        self.log("train/loss", loss, prog_bar=True)
        rate = self.throughput.step(len(batch["labels"]) * self.trainer.world_size)
        if rate is not None:
            self.log("train/sequences_per_s", rate)
        return loss

    def on_validation_epoch_start(self) -> None:
        self._val = []

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        output = self.model(**batch)
        count = torch.tensor(float(len(batch["labels"])))
        self._val.append(
            (
                torch.sigmoid(output.logits.float()).cpu(),
                batch["labels"].cpu(),
                output.loss.detach().float().cpu() * count,
            )
        )

    def on_validation_epoch_end(self) -> None:
        probabilities = torch.cat([p for p, _, _ in self._val]).numpy()
        labels = torch.cat([y for _, y, _ in self._val]).numpy()
        metrics = validation_metrics(self.config.task, labels, probabilities)
        metrics["val/loss"] = float(sum(loss for _, _, loss in self._val)) / len(labels)
        self.log_dict(metrics, prog_bar=True, sync_dist=False)
        self._val = []

    def configure_optimizers(self):
        return adamw_with_schedule(self.model, self.config.train)


# -- model and tokenizer ---------------------------------------------------------------------
def train_task_tokenizer(
    rows: LabelledSequences, out: Path, config: TokenizerTrainConfig, max_len: int
) -> Path:
    """Train a tokenizer on (a sample of) the training split into ``out`` (reused when it matches)."""
    from genolong.dna.sequence import write_fasta
    from genolong.dna.tokenizer import METADATA_FILE, train_tokenizer

    if (out / METADATA_FILE).is_file():
        if json.loads((out / METADATA_FILE).read_text())["config"] == to_dict(config):
            log.info("tokenizer: %s exists and matches, reused", out)
            return out
        raise UserError(
            f"{out} holds a tokenizer trained with another configuration", hint="choose another --out"
        )
    # twice the sample, evenly spaced over the split, so that the reservoir sample has a choice
    wanted_rows = max(1, 2 * config.sample_bp // max(1, len(rows.sequence(0))))
    chosen = evaluation_rows(len(rows), wanted_rows)
    log.info("tokenizer: training on %d sequences of the training split", len(chosen))
    handle, sample = tempfile.mkstemp(prefix=".tokenizer_sample.", suffix=".fa", dir=out.parent)
    os.close(handle)
    try:
        write_fasta(sample, ((f"row{row}", rows.sequence(int(row))) for row in chosen))
        train_tokenizer(sample, out, config, model_max_length=max_len, show_progress=False)
    finally:
        os.unlink(sample)
    return out


def build_classifier_model(config: ClassifyConfig, num_labels: int, tokenizer, pretrained: Path | None):
    """A GenolongForSequenceClassification with ``num_labels`` sigmoid outputs.

    From scratch: ``config.model`` in full. From ``pretrained``: its encoder weights and
    architecture, with the backbone, attention parameters, dropout and positive weight of
    ``config.model`` (a pretrained model may run with another attention: the weights do
    not depend on it, as BigBird started from RoBERTa's).
    """
    from genolong.attention import attention_defaults
    from genolong.model.configuration import GenolongConfig
    from genolong.model.modeling import GenolongForSequenceClassification

    head = {"num_labels": num_labels, "problem_type": "multi_label_classification"}
    if pretrained is None:
        fields = {"max_position_embeddings": config.max_len} | dict(config.model)
        if fields.setdefault("vocab_size", len(tokenizer)) != len(tokenizer):
            raise UserError(
                f"the config asks for vocab_size={fields['vocab_size']} but the tokenizer has "
                f"{len(tokenizer)} tokens",
                hint="drop model.vocab_size from the config",
            )
        model_config = GenolongConfig(**fields, **head)
        model = GenolongForSequenceClassification(model_config)
    else:
        base = read_model_config(pretrained)
        check_tokenizer(tokenizer, base, Path(pretrained))
        fields = base.to_diff_dict()
        overrides = dict(config.model)
        ignored = {k: v for k, v in overrides.items() if k in ARCHITECTURE_FIELDS and getattr(base, k) != v}
        if ignored:
            log.warning(
                "the pretrained model fixes %s; the config's values are not used",
                ", ".join(f"{k}={getattr(base, k)} (config: {v})" for k, v in ignored.items()),
            )
        overrides = {k: v for k, v in overrides.items() if k not in ARCHITECTURE_FIELDS}
        if overrides.get("backbone", base.backbone) != base.backbone:
            for name in attention_defaults(base.backbone):
                fields.pop(name, None)
        model_config = GenolongConfig(**(fields | overrides | head))
        # the head is new, an MLM head is dropped, and so are the weights of a backbone switched from
        ours, theirs = backbone_keys(model_config), backbone_keys(base)
        model = load_model(GenolongForSequenceClassification, pretrained, config=model_config,
                           new={"classifier.", "fusion.", *(ours - theirs)}, dropped={"lm_head.", *(theirs - ours)})
        _rebuild_missing_attention_buffers(model, ours - theirs)
    if config.max_len > model_config.max_position_embeddings:
        raise ConfigError(
            f"max_len={config.max_len} exceeds the model's max_position_embeddings="
            f"{model_config.max_position_embeddings}"
        )
    if config.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model.train()  # from_pretrained returns it in eval mode (no dropout), and Lightning keeps modes


def _rebuild_missing_attention_buffers(model, missing: set[str]) -> None:
    """Rebuild the attention buffers a pretrained checkpoint lacks (e.g. BigBird's seeded random
    layout when the model was pretrained with another backbone): from_pretrained leaves them
    uninitialized, and ``_init_weights`` only covers parameters."""
    from genolong.attention import build_attention

    for index, block in enumerate(model.genolong.encoder.blocks):
        prefix = f"genolong.encoder.blocks.{index}.attention."
        if not any(key.startswith(prefix) for key in missing):
            continue
        fresh = build_attention(model.config, index)
        for name, buffer in fresh.named_buffers():
            if prefix + name in missing:
                block.attention.get_buffer(name).copy_(buffer)


def _check_run_identity(out: Path, identity: dict, resume: bool) -> None:
    """Refuse to mix runs in one ``out``: other settings, or checkpoints without --resume."""
    identity = json.loads(json.dumps(identity))  # as it reads back (JSON keys are strings)
    path, checkpoints = out / "run.json", out / "checkpoints"
    has_checkpoints = checkpoints.is_dir() and any(checkpoints.iterdir())
    if path.is_file():
        previous = json.loads(path.read_text())
        changed = sorted(k for k in identity if previous.get(k) != identity[k])
        if changed:
            raise UserError(
                f"{out} holds a fine-tuning run with another {', '.join(changed)}",
                hint="choose another --out; nothing was overwritten",
            )
    elif has_checkpoints:
        raise UserError(
            f"{checkpoints} holds checkpoints that are not from a genolong fine-tuning run",
            hint="choose another --out; nothing was overwritten",
        )
    if has_checkpoints and not resume:
        raise UserError(
            f"{out} already holds checkpoints of this run",
            hint="pass --resume to continue it, or choose another --out",
        )
    atomic_write_text(path, json.dumps(identity, indent=1, sort_keys=True) + "\n")


# -- the run ---------------------------------------------------------------------------------
def run_finetune(
    data_dir: str | Path,
    out: str | Path,
    config: ClassifyConfig,
    *,
    pretrained: Path | None = None,
    tokenizer_dir: Path | None = None,
    resume: bool = False,
    show_progress: bool = True,
    extra_callbacks=(),
) -> dict:
    """Fine-tune on ``data_dir`` into ``out``; returns the report (also ``out/report.json``).

    Returns ``{"stopped_at_step": n}`` when the run stopped before ``max_steps`` without early
    stopping (continue it with ``resume``).
    """
    from lightning.pytorch.callbacks import ModelCheckpoint

    started = time.perf_counter()
    config.train.check_hardware()
    out = Path(out)
    if pretrained is not None and tokenizer_dir is not None:
        raise UserError("give --model or --tokenizer, not both: a pretrained model brings its tokenizer")
    if pretrained is not None:
        read_model_config(pretrained)  # a missing or broken model directory fails before any work
    data = load_task_data(config.task, data_dir)
    claim_directory(out, "finetune")
    resume_from = resume_checkpoint(out, resume)
    if pretrained is not None:
        tokenizer_dir = Path(pretrained)
    elif tokenizer_dir is None:
        tokenizer_dir = train_task_tokenizer(
            data.splits["train"], out / "tokenizer", config.tokenizer, config.max_len
        )
    tokenizer = load_tokenizer(tokenizer_dir)

    pl.seed_everything(config.train.seed, workers=True, verbose=False)
    model = build_classifier_model(config, len(data.label_names), tokenizer, pretrained)
    identity = {
        "task": config.task,
        "data": data.source,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "pretrained": None if pretrained is None else str(Path(pretrained).resolve()),
        "model": {k: v for k, v in model.config.to_diff_dict().items() if k != "transformers_version"},
        "max_len": config.max_len,
        "crop_min_bp": config.crop_min_bp,
        "train": to_dict(config.train) | {"max_steps": None},
    }
    _check_run_identity(out, identity, resume)

    encoder = TokenEncoder(tokenizer, config.max_len)
    module = ClassifierModule(model, config)
    monitor = MONITORS[config.task]
    best = ModelCheckpoint(
        dirpath=out / "checkpoints",
        filename="best",
        monitor=monitor,
        mode="max",
        save_top_k=1,
        save_last=True,  # after each validation, so that a resumed run knows the best so far
        auto_insert_metric_name=False,
        enable_version_counter=False,
    )
    stopper = ResumableEarlyStopping(
        monitor=monitor, mode="max", patience=config.patience, check_on_train_epoch_end=False
    )
    trainer = build_trainer(
        config.train,
        out,
        extra_callbacks=[best, stopper, *extra_callbacks],
        enable_progress_bar=show_progress,
    )
    fit(trainer, module, ClassificationDataModule(data, encoder, config), resume_from)
    early_stopped = stopper.wait_count >= config.patience
    if trainer.global_step < config.train.max_steps and not early_stopped:  # stopped from outside: resumable
        return {"stopped_at_step": trainer.global_step}
    if not trainer.is_global_zero:
        return {}

    with after_training(trainer):  # a signal from here on: stop at once, --resume redoes this part
        state = read_checkpoint(best.best_model_path)["state_dict"]
        module.load_state_dict(state)
        min_bp = data.min_bp if config.crop_min_bp is None else min(config.crop_min_bp, data.min_bp)
        info = TaskInfo(config.task, data.window_bp, min_bp, config.max_len, data.label_names)
        classifier = Classifier(model, tokenizer, info)
        report = {
            "task": config.task,
            "steps": trainer.global_step,
            "best_step": _checkpoint_step(best.best_model_path),
            "early_stopped": early_stopped,
            "monitor": {"metric": monitor, "best": float(best.best_model_score)},
            "parameters": sum(p.numel() for p in model.parameters()),
            "backbone": model.config.backbone,
            "pretrained": identity["pretrained"],
            "max_len": config.max_len,
            "window_bp": info.window_bp,
            "min_bp": info.min_bp,
            "data": data.source,
        }
        report |= (
            _promoter_report(classifier, data, config)
            if config.task == "promoter"
            else _chromatin_report(classifier, data, config, out)
        )
        info.threshold = report.get("threshold")
        info.provenance = {"report": report, "config": to_dict(config), "genolong_run": str(out.resolve())}
        classifier.save(out / "model")
        report["seconds"] = round(time.perf_counter() - started, 1)
        atomic_write_text(out / "report.json", json.dumps(report, indent=2) + "\n")
        return report


def _checkpoint_step(path: str) -> int:
    return int(read_checkpoint(path)["global_step"])


def _promoter_report(classifier: Classifier, data: TaskData, config: ClassifyConfig) -> dict:
    """Calibration and threshold (max F1) on the whole validation split; test metrics; the k-mer
    baseline beside them. A dataset built by source also gets metrics per pair of sources on
    its held-out sources (``test``; ``valid``, which chose the checkpoint, calibration and
    threshold) and on its in-source random split (``random_test``)."""
    from genolong.evaluation.metrics import best_f1_threshold, promoter_metrics
    from genolong.inference.records import predict_all

    @functools.cache  # each split is scored once (after calibration, when there is one)
    def scores(name: str) -> tuple[np.ndarray, np.ndarray]:
        rows = data.splits[name]
        probabilities = predict_all(
            classifier, (rows.sequence(i) for i in range(len(rows))), config.batch_size_eval
        )
        return rows.all_labels(np.arange(len(rows)))[:, 0], probabilities[:, 0]

    valid_true, valid_prob = scores("valid")
    report = {}
    if config.calibrate:
        report["calibration"] = calibrate_on(classifier, valid_true, valid_prob)
        scores.cache_clear()
        valid_true, valid_prob = scores("valid")
    threshold = best_f1_threshold(valid_true, valid_prob)
    report |= {
        "threshold": threshold,
        "threshold_chosen_on": "valid (max F1)",
        "valid": promoter_metrics(valid_true, valid_prob, threshold),
        "test": promoter_metrics(*scores("test"), threshold),
    }
    if data.source["split"] == "source":
        report["by_source"] = {
            name: pair_metrics(*scores(name), threshold, data.splits[name].sources)
            for name in ("test", "valid", "random_test")
        }
    if config.kmer_baseline:
        from genolong.evaluation.kmer_baseline import run_kmer_baseline

        baseline = run_kmer_baseline(data.source["data"])
        report["kmer_baseline"] = {
            key: baseline[key] for key in ("C", "features", "valid", "test", "by_source") if key in baseline
        }
    return report


def calibrate_on(classifier: Classifier, labels: np.ndarray, probabilities: np.ndarray) -> dict:
    """Platt-scale ``classifier`` in place from its ``probabilities`` of held-out ``labels``."""
    from genolong.evaluation.calibration import fit_platt, fold_into_head
    from genolong.evaluation.metrics import expected_calibration_error

    logits = np.log(np.clip(probabilities, 1e-7, 1 - 1e-7) / np.clip(1 - probabilities, 1e-7, 1))
    scale, offset = fit_platt(logits, labels)
    fold_into_head(classifier.model.classifier.classifier, scale, offset)
    return {
        "method": "Platt scaling on valid, folded into the output layer",
        "scale": scale,
        "offset": offset,
        "valid_ece_before": expected_calibration_error(labels, probabilities),
    }


def _chromatin_report(classifier: Classifier, data: TaskData, config: ClassifyConfig, out: Path) -> dict:
    """Per-profile AUCs on the test split (``out/aucs.csv``) and their class medians."""
    if "test" not in data.splits:
        log.warning("%s has no test split: no test AUCs", data.source["data"])
        return {}
    from genolong.evaluation.chromatin import evaluate_chromatin, write_auc_table
    from genolong.evaluation.metrics import median_auc_by_class
    from genolong.evaluation.profiles import profile_classes

    aucs, rows = evaluate_chromatin(
        classifier, data.splits["test"].split, batch_size=config.batch_size_eval, limit=config.test_rows
    )
    write_auc_table(out / "aucs.csv", aucs)
    return {
        "test": {
            "rows": len(rows),
            "profiles_with_auc": int(aucs.defined.sum()),
            "median_roc_auc": median_auc_by_class(aucs.roc_auc, profile_classes()),
            "median_pr_auc": median_auc_by_class(aucs.pr_auc, profile_classes()),
            "aucs": str(out / "aucs.csv"),
        }
    }
