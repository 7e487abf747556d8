"""Task datasets for the tests of `genolong task prepare`: random sequences, tables and FASTA files, one prepare call."""

from __future__ import annotations

import numpy as np

from genolong.cli.main import main
from genolong.datasets.task import PreparedTask

RNG_BASES = np.array(list("ACGT"))


def random_sequences(count: int, length: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(RNG_BASES[rng.integers(0, 4, length)]) for _ in range(count)]


def write_csv(path, header, rows, sep=","):
    path.write_text("\n".join(sep.join(map(str, row)) for row in ([header] if header else []) + rows) + "\n")
    return path


def prepare(tmp_path, *argv) -> tuple[int, PreparedTask | None]:
    out = tmp_path / "task"
    code = main(["task", "prepare", *map(str, argv), "--out", str(out)])
    return code, PreparedTask(out) if code == 0 else None


def write_fasta(path, sequences, prefix="s"):
    path.write_text("".join(f">{prefix}{i}\n{s}\n" for i, s in enumerate(sequences)))
    return path
