"""Writing ``model.safetensors`` one tensor at a time, so that a progress bar can follow it
(``save_pretrained`` writes a whole state dict in one call: 1.3 GB without a sign of life).

The format (https://github.com/huggingface/safetensors, "Format"): an 8-byte little-endian header
length, a JSON header of each tensor's dtype, shape and byte range, space-padded to a multiple of
8 bytes, then the tensors' little-endian C-contiguous bytes. As ``save_pretrained``: ``{"format":
"pt"}`` metadata, and a tensor sharing storage with an earlier one (a tied decoder) left out.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Protocol

import torch

#: safetensors' dtype names.
DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}  # fmt: skip


class Progress(Protocol):
    """What advances per tensor written (a ``tqdm`` bar)."""

    def update(self, n: int = 1) -> object: ...


def distinct_tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` without the tensors whose storage an earlier one already holds (tied weights)."""
    seen: set[tuple] = set()
    distinct = {}
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if tensor.numel() and key in seen:
            continue
        seen.add(key)
        distinct[name] = tensor
    return distinct


def write_safetensors(state: dict[str, torch.Tensor], path: str | Path, progress: Progress | None = None) -> None:
    """Write ``state`` (CPU tensors; tied copies are left out) to ``path`` in the safetensors
    format, advancing ``progress`` by one per tensor written."""
    tensors = distinct_tensors(state)
    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, tensor in tensors.items():
        size = tensor.numel() * tensor.element_size()
        header[name] = {"dtype": DTYPES[tensor.dtype], "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(encoded)) + encoded)
        for tensor in tensors.values():
            file.write(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy())
            if progress is not None:
                progress.update(1)
