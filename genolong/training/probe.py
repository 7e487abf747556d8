"""``mode: probe`` on cached embeddings: the frozen encoder runs once per split, the head trains on
the arrays.

The vector the head reads (the [CLS] row, or the mean of the real tokens) is computed once per split
with :class:`~genolong.classifier.embedder.Embedder` on the inputs the saved classifier reads, and
cached as ``out/probe_cache/{train,valid}.npz`` (embeddings (N, H) float32 and their key). The key
holds what decides the vectors (the encoder's weights and tokenizer fingerprints, a checksum of the
sequences, pooling, layer, ``max_len``, strand); a rerun or ``--resume`` with the same key runs no
encoder. A head of another pooling (``max``, SLED's fusion) has no cached vector: its probe trains as
the other modes do (with a warning).

The head trains on (B, 1, H) rows with the run's AdamW and schedule, keeping the best head by the
task's validation metric and stopping after ``patience`` rounds without improvement.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import torch

from genolong.classifier.directory import TokenEncoder
from genolong.classifier.embedder import Embedder
from genolong.core.files import atomic_path
from genolong.dna.tokenizer import tokenizer_fingerprint
from genolong.evaluation.chromatin import evaluation_rows
from genolong.model.heads import TokenPooling, output_activation
from genolong.tasks.task import FinetuneConfig, FinetuneTask, LabelledSequences, TaskData
from genolong.training.common import adamw_with_schedule

log = logging.getLogger(__name__)

#: The cache's directory in the run directory.
CACHE = "probe_cache"


def head_pooling(model) -> str | None:
    """What the head of a GenolongForSequenceClassification reads as an Embedder pooling, ``cls`` or
    ``mean``; None (with a warning) for a pooling no cached embedding represents."""
    if model.fusion is None:
        return "cls"
    if isinstance(model.fusion, TokenPooling) and model.fusion.mode == "mean":
        return "mean"
    log.warning("mode probe: the head reads %s (%s), which no cached embedding represents: the frozen encoder "
                "runs at every training step", type(model.fusion).__name__, model.config.classifier_pooling)
    return None


def weights_fingerprint(module: torch.nn.Module) -> str:
    """SHA-256 of ``module``'s state dict (names, dtypes, shapes and bytes)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def sequences_checksum(rows: LabelledSequences, indices: np.ndarray) -> str:
    """SHA-256 of the sequences of ``rows`` at ``indices``, in order."""
    digest = hashlib.sha256()
    for index in indices:
        digest.update(rows.sequence(int(index)).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def split_embeddings(embedder: Embedder, encoder: TokenEncoder, rows: LabelledSequences, indices: np.ndarray,
                     key: dict, path: Path, batch_size: int) -> np.ndarray:
    """The head's input vectors (N, H) float32 of the rows at ``indices`` (N,): read from ``path`` when
    written with ``key``, else computed and written atomically."""
    if path.is_file():
        with np.load(path) as cached:
            if json.loads(str(cached["key"])) == key:
                log.info("probe: %s embeddings (%d rows) read from %s", path.stem, len(indices), path)
                return cached["embeddings"]
    parts = []
    for start in range(0, len(indices), batch_size):
        batch = encoder([rows.sequence(int(i)) for i in indices[start : start + batch_size]])
        parts.append(embedder.pooled(batch["input_ids"], batch["attention_mask"])[:, 0])  # (B, H)
    embeddings = np.concatenate(parts).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, embeddings=embeddings, key=np.array(json.dumps(key, sort_keys=True)))
    log.info("probe: %s embeddings (%d rows) computed and cached in %s", path.stem, len(indices), path)
    return embeddings


def train_probe(model, tokenizer, data: TaskData, config: FinetuneConfig, task: FinetuneTask, out: Path,
                pooling: str) -> dict:
    """Train ``model``'s head on cached ``pooling`` embeddings of the training split, keeping the best
    validation round's; returns ``steps``, ``best_step``, ``early_stopped``, ``monitor``."""
    device = "cpu" if config.train.accelerator == "cpu" else "auto"
    embedder = Embedder(model.genolong, tokenizer, layers=(-1,), pooling=pooling, device=device)
    encoder = TokenEncoder(tokenizer, config.max_len)
    common = {"model": weights_fingerprint(model.genolong), "tokenizer": tokenizer_fingerprint(tokenizer),
              "pooling": pooling, "layer": -1, "max_len": config.max_len, "strand": "forward"}
    chosen = {"train": np.arange(len(data.splits["train"])),  # the validation subset of the other modes
              "valid": evaluation_rows(len(data.splits["valid"]), config.train.val_windows)}
    inputs, labels = {}, {}
    for name, indices in chosen.items():
        rows = data.splits[name]
        key = common | {"split": sequences_checksum(rows, indices)}
        vectors = split_embeddings(embedder, encoder, rows, indices, key, out / CACHE / f"{name}.npz",
                                   config.batch_size_eval)
        inputs[name] = torch.from_numpy(vectors)[:, None]  # (N, 1, H): the head reads row 0
        labels[name] = rows.all_labels(indices)
    return _fit_head(model, inputs["train"], torch.from_numpy(labels["train"]), inputs["valid"], labels["valid"],
                     config, task)


def _fit_head(model, train_x: torch.Tensor, train_y: torch.Tensor, valid_x: torch.Tensor, valid_y: np.ndarray,
              config: FinetuneConfig, task: FinetuneTask) -> dict:
    head, train = model.classifier, config.train
    torch.manual_seed(train.seed)
    rng = np.random.default_rng(train.seed)
    optimizers = adamw_with_schedule(head, train)
    optimizer, scheduler = optimizers["optimizer"], optimizers["lr_scheduler"]["scheduler"]
    best, best_step, best_state, rounds_without_gain, step = -np.inf, 0, copy.deepcopy(head.state_dict()), 0, 0
    order = rng.permutation(len(train_x))
    while step < train.max_steps and rounds_without_gain < config.patience:
        if len(order) < train.batch_size:
            order = np.concatenate([order, rng.permutation(len(train_x))])
        batch, order = order[: train.batch_size], order[train.batch_size :]
        head.train()
        _, loss = head(train_x[batch], train_y[batch])
        optimizer.zero_grad()
        loss.backward()
        if train.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(head.parameters(), train.max_grad_norm)
        optimizer.step()
        scheduler.step()
        step += 1
        if step % train.val_every_steps == 0 or step == train.max_steps:
            head.eval()
            with torch.no_grad():
                outputs = output_activation(head(valid_x)[0].float(), model.config.problem_type).numpy()
            score = task.validation_metrics(valid_y, outputs)[task.monitor]
            log.info("probe: step %d, %s %.4f", step, task.monitor, score)
            if score > best:
                best, best_step, best_state, rounds_without_gain = score, step, copy.deepcopy(head.state_dict()), 0
            else:
                rounds_without_gain += 1
    head.load_state_dict(best_state)
    head.eval()
    return {"steps": step, "best_step": best_step, "early_stopped": rounds_without_gain >= config.patience,
            "monitor": {"metric": task.monitor, "best": float(best)}}
