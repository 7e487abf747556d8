"""The ``model:`` section of pretraining and fine-tuning configs.

Its keys are :class:`~genolong.model.configuration.GenolongConfig` arguments: the backbone,
the sizes, dropout, ``positive_label_weight`` and the chosen backbone's own parameters
(``block_size``, ``window_size``, ...). A config gives only the ones it changes; the others
keep GenolongConfig's defaults, or a pretrained model's values. The keys depend on the
backbone, so the section keeps them as a validated mapping rather than as fields, and YAML
writes them flat::

    model:
      backbone: bigbird
      block_size: 64
      hidden_size: 256
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from genolong.core.errors import UserError
from genolong.model.configuration import GenolongConfig, check_model_fields


@dataclass
class ModelSection:
    """The GenolongConfig arguments a config gives, checked key by key (unknown keys with the
    closest known one, types, parameters of another backbone) by ``check_model_fields``."""

    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_model_fields(self.settings)

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "", prefix: str = "model.") -> ModelSection:
        """The section of mapping ``data`` read from ``source``; errors name the file and the key."""
        check_model_fields(data, source, prefix)
        return cls(dict(data))

    def to_mapping(self) -> dict[str, Any]:
        """The flat mapping YAML writes (``from_mapping`` of it gives an equal section)."""
        return dict(self.settings)

    @property
    def backbone(self) -> str:
        """The backbone the section asks for (GenolongConfig's default when it names none)."""
        return self.settings.get("backbone", GenolongConfig().backbone)

    def genolong_config(self, *, max_len: int, vocab_size: int, **extra: Any) -> GenolongConfig:
        """The GenolongConfig of a model built from scratch for inputs of ``max_len`` tokens
        (the default ``max_position_embeddings``) and a tokenizer of ``vocab_size`` tokens, with
        ``extra`` arguments (a head's ``num_labels``, ...).

        Raises:
            UserError: the section asks for another ``vocab_size`` than the tokenizer has.
            ConfigError: GenolongConfig refuses the combination.
        """
        fields = {"max_position_embeddings": max_len} | self.settings
        if fields.setdefault("vocab_size", vocab_size) != vocab_size:
            raise UserError(f"the model config asks for vocab_size={fields['vocab_size']} but the tokenizer has "
                            f"{vocab_size} tokens", hint="drop model.vocab_size from the config or use a "
                            "matching tokenizer")
        return GenolongConfig(**fields, **extra)
