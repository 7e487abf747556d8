"""transformers-native genolong models (``save_pretrained`` / ``from_pretrained``, safetensors),
registered with the Auto classes by ``import genolong.model``.

* :class:`GenolongModel` -- the encoder: input_ids (B, L) -> last_hidden_state (B, L, N).
* :class:`GenolongForMaskedLM` -- encoder + MLM head with tied embeddings (BigBird App. F.1).
* :class:`GenolongForSequenceClassification` -- encoder + head on [CLS]: promoter (App. F.2),
  919-way chromatin profile (App. F.3).

The models know no backbone by name: the backbone's attention class declares the
``masked_tokens_input`` through which MLM passes the masked positions (VCC's VIP tokens), and
:mod:`genolong.model.backbones` gives its encoder class and classifier pooling, if any.
Extra keyword arguments of ``forward`` go to the encoder.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput, SequenceClassifierOutput

from genolong.attention import attention_class
from genolong.model.backbones import ENCODERS, POOLINGS
from genolong.model.configuration import GenolongConfig
from genolong.model.encoder import Encoder
from genolong.model.heads import IGNORE_INDEX, ClassificationHead, MaskedLMHead, TokenPooling

__all__ = ["GenolongConfig", "GenolongForMaskedLM", "GenolongForSequenceClassification", "GenolongModel",
           "GenolongPreTrainedModel"]


class GenolongPreTrainedModel(PreTrainedModel):
    """Weight initialisation (BERT's: N(0, initializer_range), zero biases, unit norms)."""

    config_class = GenolongConfig
    base_model_prefix = "genolong"
    supports_gradient_checkpointing = True
    _no_split_modules = ["Block"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding, nn.Conv1d)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif hasattr(module, "init_learned_vectors"):  # the encoder's global tokens, a pooling query
            module.init_learned_vectors(std)
        elif hasattr(module, "reset_buffers"):  # buffers derived from the config, not saved: ALiBi slopes
            module.reset_buffers()


class GenolongModel(GenolongPreTrainedModel):
    """The bare encoder. Shapes: input_ids (B, L), attention_mask (B, L) -> (B, L, N)."""

    def __init__(self, config: GenolongConfig):
        super().__init__(config)
        self.encoder = (ENCODERS.find(config.backbone) or Encoder)(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embeddings.token

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embeddings.token = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                **backbone_inputs) -> BaseModelOutput:
        return BaseModelOutput(last_hidden_state=self.encoder(input_ids, attention_mask, **backbone_inputs))


class GenolongForMaskedLM(GenolongPreTrainedModel):
    """Encoder + MLM head, the decoder tied to the token embedding. ``forward(input_ids,
    attention_mask, labels)``: logits and loss of :meth:`~genolong.model.heads.MaskedLMHead.forward`
    (labels (B, L), -100 at unmasked positions)."""

    _tied_weights_keys = {"lm_head.decoder.weight": "genolong.encoder.embeddings.token.weight"}

    def __init__(self, config: GenolongConfig):
        super().__init__(config)
        self.genolong = GenolongModel(config)
        self.lm_head = MaskedLMHead(config)
        self.masked_tokens_input = attention_class(config.backbone).masked_tokens_input
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head.decoder

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head.decoder = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **backbone_inputs) -> MaskedLMOutput:
        if labels is not None and self.masked_tokens_input is not None:
            backbone_inputs.setdefault(self.masked_tokens_input, labels != IGNORE_INDEX)
        hidden = self.genolong(input_ids, attention_mask, **backbone_inputs).last_hidden_state
        logits, loss = self.lm_head(hidden, labels)
        return MaskedLMOutput(loss=loss, logits=logits)


class GenolongForSequenceClassification(GenolongPreTrainedModel):
    """Encoder + head on [CLS], the backbone's pooling, or the mean / max of the token vectors
    (``config.classifier_pooling``): (B, L) -> logits (B, num_labels); loss by ``problem_type``."""

    def __init__(self, config: GenolongConfig):
        super().__init__(config)
        self.genolong = GenolongModel(config)
        pooling = POOLINGS.find(config.backbone)
        if pooling is None and config.classifier_pooling != "cls":
            pooling = TokenPooling
        self.fusion = None if pooling is None else pooling(config)
        self.classifier = ClassificationHead(config)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **backbone_inputs) -> SequenceClassifierOutput:
        hidden = self.genolong(input_ids, attention_mask, **backbone_inputs).last_hidden_state
        if self.fusion is not None:  # one vector pooled from every token, (B, 1, N)
            hidden = self.fusion(hidden, attention_mask)
        logits, loss = self.classifier(hidden, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)
