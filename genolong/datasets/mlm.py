"""Masked-language-model windows over a built corpus (BigBird App. F.1 objective): ``[CLS] tokens
[SEP]`` with at most ``max_len`` ids, packed from the consecutive sentences of one document (a
sentence too long for a window is cut). Masking follows BERT: ``mask_rate`` of the non-special tokens
are chosen (default 15%, BigBird's text; its Fig. 7 caption says 10%); of those, 80% become ``[MASK]``,
10% a random non-special token, 10% stay; every other label is -100. Every random choice is seeded by
``(seed, sample position)`` (:class:`PositionSampler`): independent of workers, batch size, resumption."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, Sampler

from genolong.core.errors import ConfigError, UserError
from genolong.datasets.corpus import Corpus
from genolong.model.heads import IGNORE_INDEX


@dataclass
class MaskingConfig:
    """BERT masking. Attributes: rate of masked tokens; shares of [MASK] and random replacements."""

    mask_rate: float = 0.15
    mask_token_share: float = 0.8
    random_token_share: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 < self.mask_rate < 1.0:
            raise ConfigError(f"mask_rate must be in (0, 1), got {self.mask_rate}")
        if min(self.mask_token_share, self.random_token_share) < 0 or (
                self.mask_token_share + self.random_token_share > 1.0):
            raise ConfigError("mask_token_share and random_token_share must be >= 0 and sum to at most 1")


@dataclass(frozen=True)
class SpecialIds:
    """Token ids the window builder needs, read from the tokenizer."""

    pad: int
    cls: int
    sep: int
    mask: int
    first_regular: int  # ids below this are special tokens
    vocab_size: int

    @classmethod
    def from_tokenizer(cls, tokenizer) -> SpecialIds:
        ids = [tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id]
        special = sorted(tokenizer.all_special_ids)
        if special != list(range(len(special))):
            raise UserError("tokenizer's special tokens must have the lowest ids (train it with genolong)")
        return cls(*ids, first_regular=len(special), vocab_size=len(tokenizer))


def pack_windows(sentences: np.ndarray, documents: np.ndarray, max_tokens: int) -> np.ndarray:
    """(W, 2) int64 ``[start, end)`` token ranges of windows of at most ``max_tokens`` tokens packed from
    whole sentences of each document (``sentences``, ``documents``: as in a ``Shard``), in corpus order."""
    windows = []
    for first, end in documents[:, :2]:
        bounds = sentences[first:end + 1]
        start = bounds[0]
        while start < bounds[-1]:
            # furthest sentence boundary within max_tokens of start; cut mid-sentence if none
            stop = bounds[np.searchsorted(bounds, start + max_tokens, side="right") - 1]
            if stop <= start:
                stop = min(start + max_tokens, bounds[-1])
            windows.append((start, stop))
            start = stop
    return np.asarray(windows, dtype=np.int64).reshape(-1, 2)


class MLMWindows(Dataset):
    """Masked windows of one split: ``dataset[(position, window)]`` (or ``dataset[window]``, position =
    window) masks with the stream of ``(seed, position)``: ``input_ids``, ``labels`` (T <= max_len,) int64."""

    def __init__(self, corpus: Corpus, split: str, special: SpecialIds, max_len: int,
                 masking: MaskingConfig, seed: int = 0):
        if max_len < 3:
            raise ConfigError(f"max_len must be at least 3 ([CLS] token [SEP]), got {max_len}")
        self.special = special
        self.masking = masking
        self.seed = seed
        self.shards = corpus.shards(split)
        if not self.shards:
            raise UserError(f"{corpus.root}: the corpus has no {split!r} documents",
                            hint="hold out chromosomes, or a tail fraction, when building it")
        ranges = [pack_windows(s.sentences, s.documents, max_len - 2) for s in self.shards]
        self.windows = np.concatenate([np.column_stack([np.full(len(r), i), r]) for i, r in enumerate(ranges)])

    def __len__(self) -> int:
        return len(self.windows)

    def tokens(self, index: int) -> np.ndarray:
        """The unmasked ids of window ``index`` with [CLS] and [SEP], (T,) int64."""
        shard, start, end = self.windows[index]
        body = self.shards[shard].tokens[start:end].astype(np.int64)
        return np.concatenate([[self.special.cls], body, [self.special.sep]])

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, torch.Tensor]:
        position, window = key if isinstance(key, tuple) else (key, key)
        ids = self.tokens(window)
        rng = np.random.default_rng([self.seed, position])
        regular = np.flatnonzero(ids >= self.special.first_regular)
        count = max(1, round(self.masking.mask_rate * len(regular)))
        chosen = np.sort(rng.choice(regular, size=min(count, len(regular)), replace=False))
        labels = np.full_like(ids, IGNORE_INDEX)
        labels[chosen] = ids[chosen]
        roll = rng.random(len(chosen))
        masked = chosen[roll < self.masking.mask_token_share]
        randomised = chosen[(roll >= self.masking.mask_token_share)
                            & (roll < self.masking.mask_token_share + self.masking.random_token_share)]
        ids[masked] = self.special.mask
        ids[randomised] = rng.integers(self.special.first_regular, self.special.vocab_size, len(randomised))
        return {"input_ids": torch.from_numpy(ids), "labels": torch.from_numpy(labels)}


@dataclass(eq=False)
class PositionSampler(Sampler[tuple[int, int]]):
    """``(position, window)`` pairs for global sample positions ``start, start + 1, ...`` of one rank:
    position ``p`` maps to ``permutation_{p // n}[p % n]`` (a fresh seeded permutation per pass); rank
    ``r`` of ``world`` takes positions ``r, r + world, ...``; a resumed run starts at ``steps_done *
    global_batch``; ``len()`` counts this rank's positions of the whole run, from 0, whatever ``start``."""

    num_windows: int
    total: int
    _: KW_ONLY
    seed: int
    start: int = 0
    rank: int = 0
    world_size: int = 1
    shuffle: bool = True
    _permutations: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    def _window(self, position: int) -> int:
        data_pass, offset = divmod(position, self.num_windows)
        if not self.shuffle:
            return offset
        if data_pass not in self._permutations:
            self._permutations = {data_pass: np.random.default_rng([self.seed, data_pass]).permutation(self.num_windows)}
        return int(self._permutations[data_pass][offset])

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for position in range(self.start + self.rank, self.total, self.world_size):
            yield position, self._window(position)

    def __len__(self) -> int:
        return len(range(self.rank, self.total, self.world_size))


def collate_windows(items: list[dict[str, torch.Tensor]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad a list of windows to the longest: input_ids, labels, attention_mask all (B, T)."""
    ids = pad_sequence([item["input_ids"] for item in items], batch_first=True, padding_value=pad_id)
    labels = pad_sequence([item["labels"] for item in items], batch_first=True, padding_value=IGNORE_INDEX)
    lengths = torch.tensor([len(item["input_ids"]) for item in items])
    mask = (torch.arange(ids.shape[1]) < lengths[:, None]).long()
    return {"input_ids": ids.long(), "labels": labels.long(), "attention_mask": mask}
