"""The ``model:`` section of configs: the :class:`~genolong.model.configuration.GenolongConfig`
arguments a config changes (the others keep the defaults, or a pretrained model's values), the
backbone's own included, so a validated mapping rather than fields, flat in YAML::

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
    """The GenolongConfig arguments a config gives, checked key by key by ``check_model_fields``."""

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
        """The GenolongConfig of a model built from scratch for inputs of ``max_len`` tokens (the
        default ``max_position_embeddings``), a tokenizer of ``vocab_size`` tokens and ``extra``
        arguments (``num_labels``, ...); a UserError when the section asks for another
        ``vocab_size``, a ConfigError when GenolongConfig refuses the combination."""
        fields = {"max_position_embeddings": max_len} | self.settings
        if fields.setdefault("vocab_size", vocab_size) != vocab_size:
            raise UserError(f"the model config asks for vocab_size={fields['vocab_size']} but the tokenizer has "
                            f"{vocab_size} tokens", hint="drop model.vocab_size from the config or use a "
                            "matching tokenizer")
        return GenolongConfig(**fields, **extra)
