"""Which weights fine-tuning trains (``mode:``, ``--mode``): ``full`` (every weight, the default);
``lora`` (low-rank adapters, Hu et al. 2021, with ``peft`` on the ``qkv``, ``out``, ``up`` and
``down`` projections that converted checkpoints share, plus the head in full; saved to
``OUT/adapters`` and merged into the saved classifier); ``probe`` (the head only, on cached
embeddings: :mod:`genolong.training.probe`). Without a pretrained ``--model``, ``lora`` is refused
and ``probe`` warns that it reads a random encoder (:func:`check_start`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from genolong.core.errors import ConfigError, UserError
from genolong.tasks.settings import LoraSettings, check_mode

log = logging.getLogger(__name__)

#: The output head's module, trained in full in every mode.
HEAD = "classifier"


def check_start(mode: str, pretrained: Path | None) -> None:
    """Refuse LoRA without a pretrained model (UserError); warn that a probe without one reads a
    random encoder."""
    if pretrained is not None:
        return
    if mode == "lora":
        raise UserError("--mode lora adapts a pretrained encoder, and none was given: LoRA on random weights "
                        "learns less than full fine-tuning", hint="give --model DIR (a pretrain run's OUT/model, a "
                        "converted checkpoint or a fine-tuned model), or use --mode full to train from scratch")
    if mode == "probe":
        log.warning("--mode probe without --model: the head is trained on the embeddings of a RANDOM encoder "
                    "(a random-features baseline); give --model DIR to probe a pretrained one")


def apply_mode(model: torch.nn.Module, mode: str, lora: LoraSettings) -> torch.nn.Module:
    """``model`` as it is (full), wrapped with LoRA adapters, or with its encoder frozen (probe)."""
    check_mode(mode)
    if mode == "full":
        return model
    if mode == "probe":
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(name.startswith(f"{HEAD}."))
        return model
    from peft import LoraConfig, get_peft_model

    found = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    missing = sorted(set(lora.targets) - found)
    if missing:
        raise ConfigError(f"lora.targets {missing} name no linear layer of the model (it has {sorted(found)})")
    config = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                        target_modules=list(lora.targets), modules_to_save=[HEAD])
    return get_peft_model(model, config)


def trainable_parameters(model: torch.nn.Module) -> dict[str, int | float]:
    """Trainable and total parameter counts, and the trainable percentage."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable": trainable, "total": total, "percent": round(100 * trainable / total, 3)}


def merged_model(model: torch.nn.Module, mode: str, adapters: Path | None = None) -> torch.nn.Module:
    """The plain model to save, every weight trainable again: a LoRA model's adapters written to
    ``adapters`` (when given) and merged."""
    if mode == "lora":
        if adapters is not None:
            model.save_pretrained(adapters)
        model = model.merge_and_unload()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    return model
