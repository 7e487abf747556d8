"""Training checkpoints, through :class:`SafeCheckpointIO` (Lightning's ``checkpoint_io``) or
:func:`read_checkpoint`: written to a temporary name beside the target and renamed when complete
(never via the system temporary directory, whose size would fail runs whose output disk has room);
read with ``torch.load(weights_only=True)``, refusing any pickle that imports or calls code; an
unreadable one is a :class:`~genolong.core.errors.UserError` saying what to do.
"""

from __future__ import annotations

import io
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint

from genolong.core.errors import UserError
from genolong.core.files import atomic_path

#: What a damaged (truncated, overwritten, empty) checkpoint file raises in ``torch.load``.
UNREADABLE = (RuntimeError, OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile)


def resume_checkpoint(out: Path, resume: bool) -> Path | None:
    """``out/checkpoints/last.ckpt`` when resuming from one, checked readable (memory-mapped) before any
    work; None to start afresh."""
    last = out / "checkpoints" / "last.ckpt"
    if not (resume and last.exists()):
        return None
    read_checkpoint(last, mmap=True)
    return last


def read_checkpoint(path: str | Path, map_location: Any = "cpu", *, mmap: bool = False) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)``, or a UserError naming the file and what to do."""
    path = Path(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        refused = re.search(r"GLOBAL (\S+)", str(err))
        held = refused.group(1) if refused else "objects"
        raise UserError(f"{path}: refused to load: it holds {held} besides tensors and plain values, which "
                        "genolong checkpoints never do",
                        hint=f"it was not written by genolong; delete it {_alternative(path)}") from None
    except UNREADABLE as err:
        reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise UserError(f"{path}: not a readable checkpoint (truncated or damaged: {reason})",
                        hint=f"delete it {_alternative(path)}") from None


def _alternative(path: Path) -> str:
    """What to resume from instead of the unusable ``path``: the latest other checkpoint beside it."""
    others = sorted((p for p in path.parent.glob("step*.ckpt") if p != path and p.stem[4:].isdigit()),
                    key=lambda p: int(p.stem[4:]))
    if others:
        return f"or copy {others[-1]} over it to resume from step {others[-1].stem[4:]}"
    return "and start again without --resume"


class SafeCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint I/O with atomic writes and :func:`read_checkpoint` reads."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)  # serialised in memory: a full disk then fails in a plain write (ENOSPC)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as handle:
            handle.write(buffer.getbuffer())

    def load_checkpoint(self, path, map_location: Any = None, weights_only: bool | None = True) -> dict[str, Any]:
        """Always ``weights_only``, whatever Lightning passes; tensors stay on the device they were saved from."""
        return read_checkpoint(path, map_location=map_location)


class MovableModelCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint, resumable after its run directory was moved or copied: the recorded
    absolute paths are re-rooted under the new ``dirpath`` (Lightning would drop the best score and keep
    paths to the old place). Its state is stored under ModelCheckpoint's key, so either class resumes."""

    def _generate_state_key(self, **kwargs: Any) -> str:
        return f"{ModelCheckpoint.__qualname__}{kwargs!r}"

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        recorded = state_dict.get("dirpath")
        if recorded is not None and self.dirpath is not None and recorded != self.dirpath:
            def moved(path):
                inside = path and Path(path).is_relative_to(recorded)
                return str(Path(self.dirpath) / Path(path).relative_to(recorded)) if inside else path

            state_dict = state_dict | {
                "dirpath": self.dirpath,
                **{key: moved(state_dict.get(key)) for key in ("best_model_path", "kth_best_model_path",
                                                                 "last_model_path")},
                "best_k_models": {moved(path): score for path, score in state_dict.get("best_k_models", {}).items()},
            }
        super().load_state_dict(state_dict)
