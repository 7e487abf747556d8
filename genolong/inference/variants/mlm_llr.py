"""Zero-shot variant scores from a masked language model: the log-likelihood ratio of alt vs ref.

The reference and alternative windows are tokenised separately; the tokens between their shared prefix
and suffix are each allele's span, replaced by ``[MASK]`` tokens in its own context:

    llr = sum log p(alt_span tokens | alt context) - sum log p(ref_span tokens | ref context)

(the masked-marginal score of Meier et al. 2021, "Language models enable zero-shot prediction of the effects
of mutations on protein function"); inputs longer than the model keep the tokens centred on the span.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from genolong.classifier.directory import TASK_FILE, TokenEncoder
from genolong.classifier.scoring import token_logits
from genolong.core.errors import UserError
from genolong.inference.variants.windows import VariantWindows
from genolong.model.loading import load_model, load_model_tokenizer, read_model_config
from genolong.model.modeling import GenolongForMaskedLM
from genolong.runtime.devices import resolve_device


def differing_span(ref_ids: list[int], alt_ids: list[int]) -> tuple[int, int, int]:
    """``(prefix, ref_end, alt_end)``: the tokens ``ref_ids[prefix:ref_end]`` and
    ``alt_ids[prefix:alt_end]`` differ, everything before and after is shared."""
    shortest = min(len(ref_ids), len(alt_ids))
    prefix = next((i for i, (ref, alt) in enumerate(zip(ref_ids, alt_ids, strict=False)) if ref != alt), shortest)
    after = zip(reversed(ref_ids[prefix:]), reversed(alt_ids[prefix:]), strict=False)  # shortest - prefix pairs
    suffix = next((i for i, (ref, alt) in enumerate(after) if ref != alt), shortest - prefix)
    return prefix, len(ref_ids) - suffix, len(alt_ids) - suffix


class MaskedLMEffects:
    """``score(windows) -> {"llr": (n, 1)}`` for a pretrained :class:`GenolongForMaskedLM` directory."""

    score_names = ("llr",)
    rc = False  # one strand: the masked LM scores the reference strand's tokens
    labels = ["mlm_llr"]

    def __init__(self, directory: Path, batch_size: int, device="auto"):
        if (directory / TASK_FILE).is_file():
            raise UserError(f"{directory} is a fine-tuned classifier; --score mlm-llr needs a pretrained (MLM) model")
        self.device = resolve_device(device)
        config = read_model_config(directory)
        self.model = load_model(GenolongForMaskedLM, directory, config=config).to(self.device)
        tokenizer = load_model_tokenizer(directory, config)
        self.encode = TokenEncoder(tokenizer, config.max_position_embeddings)
        self.mask, self.keep = tokenizer.mask_token_id, config.max_position_embeddings - 2
        self.batch_size = batch_size

    def _masked_input(self, ids: list[int], start: int, end: int) -> tuple[tuple[int, ...], list[int], list[int]]:
        """``(context-with-[MASK]s, masked positions in the encoded row, true tokens)``, cropped to the model."""
        if end - start > self.keep:
            raise UserError(f"a variant touches {end - start} tokens, more than the model's {self.keep}")
        first = max(0, min(start - (self.keep - (end - start)) // 2, len(ids) - self.keep))
        body = ids[first : first + self.keep]
        body[start - first : end - first] = [self.mask] * (end - start)
        positions = list(range(start - first + 1, end - first + 1))  # +1: [CLS]
        return tuple(body), positions, ids[start:end]

    def _log_probabilities(self, inputs: list[tuple[int, ...]]) -> dict[tuple[int, ...], torch.Tensor]:
        """Input body -> (T, V) log-probabilities of its encoded row, for distinct inputs, in batches."""
        unique = list(dict.fromkeys(inputs))
        result = {}
        for first in range(0, len(unique), self.batch_size):
            batch = unique[first : first + self.batch_size]
            rows = self.encode.pad(batch)
            logits = token_logits(self.model, rows["input_ids"].to(self.device), rows["attention_mask"].to(self.device))
            for row, tokens in enumerate(batch):
                result[tokens] = torch.log_softmax(logits[row], dim=-1).cpu()
        return result

    def score(self, windows: list[VariantWindows]) -> dict[str, np.ndarray]:
        """(n, 1) log-likelihood ratios of ``windows`` (see the module docstring)."""
        sequences = [s for w in windows for s in (w.ref_window, w.alt_window)]
        encoded = [e.ids for e in self.encode.backend.encode_batch_fast(sequences, add_special_tokens=False)]
        queries = []
        for ref_ids, alt_ids in zip(encoded[::2], encoded[1::2], strict=True):
            prefix, ref_end, alt_end = differing_span(ref_ids, alt_ids)
            queries.append((self._masked_input(ref_ids, prefix, ref_end), self._masked_input(alt_ids, prefix, alt_end)))
        log_probabilities = self._log_probabilities([q[0] for pair in queries for q in pair])
        llr = np.zeros((len(windows), 1), np.float32)
        for row, pair in enumerate(queries):
            for sign, (inputs, positions, tokens) in zip((-1.0, 1.0), pair, strict=True):
                table = log_probabilities[inputs]
                llr[row, 0] += sign * float(sum(table[p, t] for p, t in zip(positions, tokens, strict=True)))
        return {"llr": llr}
