"""Embeddings of DNA sequences from any genolong model directory (MLM model or classifier; only its
encoder is loaded), for ``genolong embed`` and the probe fine-tuning mode.

Layers are numbered like Hugging Face's ``hidden_states``: 0 the token embeddings, ``i`` block
``i``'s output, the last (or -1) the encoder's output (after its final LayerNorm, if any). Pooled:
per sequence and layer, the mean over real tokens ([CLS] and [SEP] included) or the [CLS] vector;
per base: the vector of the BPE token that covers each base. ``both_strands`` averages with the
reverse complement's embedding (per-base rows reversed), so both strands give the same result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from genolong.attention import attention_class
from genolong.classifier.directory import TokenEncoder
from genolong.core.errors import InputError, UserError
from genolong.dna.sequence import clean, reverse_complement
from genolong.runtime.devices import resolve_device
from genolong.runtime.precision import autocast, precision_on

#: Weights of a model directory that the encoder does not use (MLM head, classifier head, pooling).
HEAD_PREFIXES = ("lm_head.", "classifier.", "fusion.")


class Embedder:
    """A :class:`~genolong.model.modeling.GenolongModel` ready to embed sequences: ``layers`` in the
    order given, ``pooling`` ``mean`` or ``cls``, ``precision`` ``auto``, ``32`` or ``bf16`` (None:
    float32)."""

    def __init__(self, model, tokenizer, *, layers: tuple[int, ...] = (-1,), pooling: str = "mean",
                 device: str | torch.device | None = "auto", precision: str | None = None):
        if pooling not in ("mean", "cls"):
            raise UserError(f"pooling {pooling!r}: use mean or cls")
        self.device = resolve_device(device)
        self.precision = precision_on(precision, self.device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.pooling = pooling
        n_states = model.config.num_hidden_layers + 1
        if not layers or any(not -n_states <= layer < n_states for layer in layers):
            raise UserError(f"layers {list(layers)}: this model has layers 0..{n_states - 1} (or -{n_states}..-1)")
        self.layers = tuple(layer % n_states for layer in layers)
        if any(layer != n_states - 1 for layer in self.layers) and type(model.encoder).__name__ != "Encoder":
            raise UserError(f"layers {list(layers)}: a {model.config.backbone} model gives its last layer only",
                            hint="use --layers -1")
        self.max_tokens = attention_class(model.config.backbone).max_input_length(model.config)
        self.encode = TokenEncoder(tokenizer, self.max_tokens)

    @classmethod
    def load(cls, path: str | Path, **kwargs) -> Embedder:
        """The encoder of the model directory ``path``; ``kwargs`` as :class:`Embedder`'s (UserError:
        not a genolong model directory, or its weights or tokenizer do not match)."""
        from genolong.model.loading import load_model, load_model_tokenizer, read_model_config
        from genolong.model.modeling import GenolongModel

        path = Path(path)
        if not (path / "config.json").is_file():
            raise UserError(f"{path}: not a genolong model directory (no config.json)")
        config = read_model_config(path)
        tokenizer = load_model_tokenizer(path, config)
        model = load_model(GenolongModel, path, config=config, dropped=HEAD_PREFIXES)
        return cls(model, tokenizer, **kwargs)

    def _encode(self, sequences: list[str], names: list[str], source: Path | None = None):
        """Token rows ``[CLS] tokens [SEP] [PAD]...`` (B, T) and each sequence's token lengths in bases;
        a sequence longer than the model's input is refused naming its record (and ``source``, its file)."""
        encodings = self.encode.backend.encode_batch([clean(s) for s in sequences], add_special_tokens=False)
        for encoding, name in zip(encodings, names, strict=True):
            if self.max_tokens is not None and len(encoding.ids) + 2 > self.max_tokens:
                message = f"{len(encoding.ids)} tokens, more than the model's {self.max_tokens - 2} (+[CLS], [SEP])"
                if source is None:
                    raise UserError(f"record {name!r}: {message}", hint="cut it into shorter records")
                raise InputError(source, message, record=name, hint="cut it into shorter records")
        batch = self.encode.pad([e.ids for e in encodings])
        spans = [np.array([end - start for start, end in e.offsets], dtype=np.int64) for e in encodings]
        return batch["input_ids"], batch["attention_mask"], spans

    @torch.inference_mode()
    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The chosen layers' token vectors: (B, T) -> (B, n_layers, T, H) float32, on the CPU."""
        encoder = self.model.encoder
        last = self.model.config.num_hidden_layers
        captured: dict[int, torch.Tensor] = {}
        start = 0 if getattr(encoder, "global_tokens", None) is None else encoder.global_tokens.shape[0]
        length = input_ids.shape[1]
        handles = []
        for layer in set(self.layers) - {last}:
            module = encoder.embeddings if layer == 0 else encoder.blocks[layer - 1]
            offset = 0 if layer == 0 else start

            def keep(_module, _inputs, output, layer=layer, offset=offset):
                captured[layer] = output[:, offset : offset + length]

            handles.append(module.register_forward_hook(keep))
        try:
            with autocast(self.device, self.precision):
                captured[last] = self.model(input_ids.to(self.device), attention_mask.to(self.device)).last_hidden_state
        finally:
            for handle in handles:
                handle.remove()
        return torch.stack([captured[layer].float() for layer in self.layers], dim=1).cpu()

    def pooled(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> np.ndarray:
        """Pooled vectors of token rows made by :class:`~genolong.classifier.directory.TokenEncoder`:
        (B, T) -> (B, n_layers, H) float32."""
        states = self.hidden_states(input_ids, attention_mask)  # (B, n_layers, T, H)
        if self.pooling == "cls":
            return states[:, :, 0].numpy()
        weights = attention_mask[:, None, :, None].float()  # (B, 1, T, 1)
        return ((states * weights).sum(dim=2) / weights.sum(dim=2)).numpy()

    def _one_strand(self, sequences: list[str], names: list[str], per_base: bool, source: Path | None):
        input_ids, mask, spans = self._encode(sequences, names, source)
        if not per_base:
            return self.pooled(input_ids, mask)
        states = self.hidden_states(input_ids, mask)  # (B, n_layers, T, H)
        return [states[row, :, 1 : len(span) + 1].repeat_interleave(torch.from_numpy(span), dim=1).numpy()
                for row, span in enumerate(spans)]

    def embed(self, sequences: list[str], *, names: list[str] | None = None, per_base: bool = False,
              both_strands: bool = False, source: Path | None = None):
        """Embeddings of one batch of DNA strings: pooled (B, n_layers, H) float32, or per base a list
        of (n_layers, L_i, H) float32; ``names`` (default: positions) and ``source`` are named in errors."""
        names = [str(i) for i in range(len(sequences))] if names is None else names
        forward = self._one_strand(sequences, names, per_base, source)
        if not both_strands:
            return forward
        reverse = self._one_strand([reverse_complement(clean(s)) for s in sequences], names, per_base, source)
        if per_base:
            return [(f + r[:, ::-1]) / 2 for f, r in zip(forward, reverse, strict=True)]
        return (forward + reverse) / 2
