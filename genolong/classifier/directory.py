"""A fine-tuned classifier directory, DNA -> token batches -> outputs (B, C); fine-tuning writes it::

    config.json, model.safetensors     GenolongForSequenceClassification (save_pretrained)
    tokenizer.json, tokenizer_config.json
    genolong_task.json                 TaskInfo: task, window, label names, threshold, provenance
    kmer_component.npz                 optional: the k-mer part of a network + k-mer stack, which
                                       turns the network's logits into the stack's
                                       (:mod:`genolong.classifier.kmer_component`)

The outputs follow the model's ``problem_type`` (:func:`genolong.model.heads.output_activation`):
independent sigmoids (C = 1 for promoters, BigBird App. F.2; C = 919 chromatin profiles, App. F.3),
a softmax over C classes, or C regression values.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np
import torch

from genolong.classifier.kmer_component import KmerComponent
from genolong.classifier.scoring import average_strands, token_logits, token_outputs
from genolong.classifier.task_info import (  # noqa: F401  (re-exported: the classifier directory's names)
    ACTIVATIONS,
    FORMAT,
    TASK_FILE,
    InferenceSpec,
    TaskInfo,
    default_promoter_description,
    default_promoter_model,
    describe_model,
    reads_both_strands,
)
from genolong.core.errors import ConfigError, InputError, UserError
from genolong.dna.sequence import clean, reverse_complement
from genolong.runtime.devices import resolve_device
from genolong.runtime.precision import precision_on


class TokenEncoder:
    """DNA strings -> padded token batches ``[CLS] tokens [SEP] [PAD]...``, the one encoding of
    every model input (:meth:`pad`). ``max_len`` counts [CLS] and [SEP] (None: nothing cropped); a
    longer input keeps its central ``max_len - 2`` tokens (a window's label describes its centre).
    """

    def __init__(self, tokenizer, max_len: int | None):
        if max_len is not None and max_len < 3:
            raise UserError(f"max_len must be at least 3 ([CLS] token [SEP]), got {max_len}")
        self.backend = tokenizer.backend_tokenizer
        self.cls, self.sep, self.pad_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        self.max_len = max_len

    def kept(self, n_tokens: int, centre: int | None = None) -> slice:
        """The tokens kept of an input of ``n_tokens``: all, or ``max_len - 2`` centred on the
        input's central token, or on token ``centre`` when given (clamped to the input)."""
        keep = n_tokens if self.max_len is None else self.max_len - 2
        if centre is None:
            start = max(0, (n_tokens - keep) // 2)
        else:
            start = min(max(0, centre - keep // 2), max(0, n_tokens - keep))
        return slice(start, start + keep)

    def __call__(self, sequences: list[str], centres: list[int | None] | None = None) -> dict[str, torch.Tensor]:
        """Encode ``sequences`` (any case, IUPAC codes) -> ``input_ids``, ``attention_mask`` (B, T)
        int64, T the longest input. ``centres``: optional base index per sequence (or None) on whose
        token the kept tokens centre (a long ``N`` run is few tokens)."""
        cleaned = [clean(s) for s in sequences]
        if centres is None or all(c is None for c in centres):
            encodings = self.backend.encode_batch_fast(cleaned, add_special_tokens=False)
            bodies = [encoding.ids[self.kept(len(encoding.ids))] for encoding in encodings]
        else:
            encodings = self.backend.encode_batch(cleaned, add_special_tokens=False)
            bodies = [
                e.ids[self.kept(len(e.ids), None if c is None else bisect.bisect_right([end for _, end in e.offsets], c))]
                for e, c in zip(encodings, centres, strict=True)
            ]
        return self.pad(bodies)

    def describe_cropping(self, sequences: list[str], what: str) -> str | None:
        """How many of ``sequences`` (``what``: "sampled training records") are longer than ``max_len``
        and the share of their tokens left out; None when all fit."""
        lengths = [len(e.ids) for e in self.backend.encode_batch_fast([clean(s) for s in sequences],
                                                                       add_special_tokens=False)]
        keep = self.max_len - 2
        longer = [n for n in lengths if n > keep]
        if not longer:
            return None
        left_out = 1 - keep * len(longer) / sum(longer)
        return (f"{len(longer)} of {len(lengths)} {what} are longer than max_len={self.max_len} tokens: each is read as "
                f"its central {keep} tokens (+[CLS], [SEP]), leaving out {left_out:.0%} of their tokens "
                f"(up to {max(longer)} tokens per record)")

    def central(self, ids):
        """The central ``max_len - 2`` token ids of one input (all of them when it is shorter)."""
        return ids[self.kept(len(ids))]

    def pad(self, bodies) -> dict[str, torch.Tensor]:
        """``[CLS] body [SEP] [PAD]...`` rows of token-id sequences (each at most ``max_len - 2``):
        ``input_ids`` and ``attention_mask`` (B, T) int64, T the longest body + 2."""
        lengths = np.array([len(ids) for ids in bodies], dtype=np.int64)  # (B,)
        width = int(lengths.max()) + 2
        input_ids = np.full((len(bodies), width), self.pad_id, dtype=np.int64)
        input_ids[:, 0] = self.cls
        for row, ids in enumerate(bodies):
            input_ids[row, 1 : len(ids) + 1] = ids
        input_ids[np.arange(len(bodies)), lengths + 1] = self.sep
        attention_mask = (np.arange(width) < lengths[:, None] + 2).astype(np.int64)
        return {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(attention_mask)}


class Classifier:
    """A classifier ready for inference: model (eval mode), tokenizer, :class:`TaskInfo` and the
    optional k-mer component that turns its logits into the network + k-mer stack's."""

    def __init__(self, model, tokenizer, info: TaskInfo, device: str | torch.device | None = "auto",
                 kmer: KmerComponent | None = None, precision: str | None = None):
        self.device = resolve_device(device)
        # None: float32, without a line (library use); a command's --precision is resolved and announced
        self.precision = precision_on(precision, self.device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.info = info
        self.encode = TokenEncoder(tokenizer, info.max_len)
        self.kmer = kmer

    @classmethod
    def load(cls, path: str | Path, *, task: str | None = None, device: str | torch.device | None = "auto",
             precision: str | None = None):
        """Load a classifier directory, checking that it was trained for ``task`` when given (else
        UserError); ``precision`` (``auto``, ``32``, ``bf16``; None: float32) is its forward passes'."""
        from genolong.model.configuration import check_input_length
        from genolong.model.loading import load_model, load_model_tokenizer, read_model_config
        from genolong.model.modeling import GenolongForSequenceClassification

        path = Path(path)
        if not path.is_dir():
            raise UserError(f"{path}: no such model directory")
        if not (path / TASK_FILE).is_file():
            if (path / "config.json").is_file():
                raise UserError(f"{path} is a pretrained model, not a fine-tuned classifier (no {TASK_FILE})",
                                hint=f"fine-tune one with `genolong {task or 'promoter'} finetune --data DATA"
                                f" --model {path} --out RUN`, then give --model RUN")
            shipped = ", or --model default for the shipped promoter model" if _shipped_serves(task) else ""
            raise UserError(f"{path} is not a genolong model directory (no {TASK_FILE})",
                            hint=f"give a fine-tuning run directory (RUN or RUN/model){shipped}")
        info = TaskInfo.read(path)
        if task is not None and info.task != task:
            raise UserError(f"{path} is a {info.task} model, not a {task} model")
        config = read_model_config(path)
        if config.num_labels != len(info.label_names):
            raise InputError(path / TASK_FILE, f"{len(info.label_names)} label names for a model with "
                             f"{config.num_labels} outputs")
        spec = info.inference
        if spec is not None and ACTIVATIONS[spec.activation] != (config.problem_type or ACTIVATIONS["sigmoid"]):
            raise InputError(path / TASK_FILE, f"inference.activation {spec.activation} does not fit a model of "
                             f"problem_type {config.problem_type}")
        try:
            check_input_length(info.max_len, config)
        except ConfigError as err:
            raise InputError(path / TASK_FILE, err.message, hint=err.hint) from None
        tokenizer = load_model_tokenizer(path, config)
        model = load_model(GenolongForSequenceClassification, path, config=config)
        return cls(model, tokenizer, info, device, KmerComponent.load(path, tokenizer), precision)

    def save(self, path: str | Path) -> None:
        """Write the classifier directory atomically."""
        from genolong.core.files import atomic_path
        from genolong.model.loading import save_model

        with atomic_path(path, directory=True) as tmp:
            save_model(self.model, self.tokenizer, tmp)
            self.info.write(tmp)
            if self.kmer is not None:
                self.kmer.save(tmp)

    def logits(self, sequences: list[str], centres: list[int | None] | None = None) -> torch.Tensor:
        """Logits (B, C) float32 of one batch, with any k-mer component (``centres``: see TokenEncoder)."""
        return self.token_logits(self.encode(sequences, centres))

    def token_logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits (B, C) float32 on the model's device of rows made by :meth:`TokenEncoder.pad`
        (:func:`genolong.classifier.scoring.token_logits`)."""
        return token_logits(self.model, batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device),
                            kmer=self.kmer, precision=self.precision)

    def token_outputs(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        """Outputs (B, C) float32 of token rows (:func:`genolong.classifier.scoring.token_outputs`)."""
        return token_outputs(self.model, batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device),
                             kmer=self.kmer, precision=self.precision).cpu().numpy()

    def probabilities(self, sequences: list[str], centres: list[int | None] | None = None) -> np.ndarray:
        """The outputs of one batch (probabilities, or regression values), shape (B, C) float32."""
        return self.token_outputs(self.encode(sequences, centres))


def _shipped_serves(task: str | None) -> bool:
    """Whether the shipped promoter model (``--model default``) is a model of ``task`` (None: of any task)."""
    try:
        return task is None or TaskInfo.read(default_promoter_model()).task == task
    except (OSError, UserError):  # an installation without it
        return False


class StrandAveraged:
    """Mean of the outputs of each sequence and its reverse complement (selene ``NonStrandSpecific``),
    in one batch, of anything with ``probabilities(sequences, centres=None) -> (B, C)`` and ``info``."""

    def __init__(self, classifier):
        self.classifier = classifier
        self.info = classifier.info

    def probabilities(self, sequences: list[str], centres: list[int | None] | None = None) -> np.ndarray:
        reverse = [reverse_complement(s) for s in sequences]
        if centres is not None:
            centres = list(centres) + [None if c is None else len(s) - 1 - c for s, c in zip(sequences, centres, strict=True)]
        return average_strands(self.classifier.probabilities(list(sequences) + reverse, centres))


def strand_reader(classifier, rc: bool | None = None):
    """``classifier`` as it reads sequences: :class:`StrandAveraged` when both strands are read
    (``--rc`` / ``--no-rc`` as given, else the model's own reading: :func:`reads_both_strands`)."""
    return StrandAveraged(classifier) if reads_both_strands(rc, classifier.info) else classifier
