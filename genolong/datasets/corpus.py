"""A built MLM corpus (:mod:`genolong.datasets.corpus_build`), read at pretraining time: one shard per
chromosome (or held-out piece) under ``<out>/<split>/``, named by :func:`shard_stem`::

    <stem>.tokens.u16        flat uint16 token ids of all sentences of all passes
    <stem>.sentences.i64     (n_sentences + 1,) token offsets of the sentences
    <stem>.documents.i64     (n_documents, 4): first sentence, end sentence, pass, bp start
    <stem>.json              counts and sha256 of the three files; written last (the "done"
                             marker: a resumed build skips finished shards)

and ``<out>/corpus.json``, the manifest (config, seed, tokenizer fingerprint, counts, checksums)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.core.errors import InputError, UserError

SPLITS = ("train", "valid", "test")
FORMAT = "genolong-corpus/1"
#: The manifest at the root of a corpus directory.
MANIFEST = "corpus.json"


def safe_name(chrom: str) -> str:
    """``chrom`` with characters other than letters, digits and ``._-`` replaced by ``_``."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in chrom)


def shard_stem(index: int, chrom: str) -> str:
    """``<index>_<safe name>``, the file name stem of the ``index``-th piece of the genome: the index
    keeps apart names that sanitise alike (``a/b`` and ``a_b``)."""
    return f"{index:04d}_{safe_name(chrom)}"


class Corpus:
    """A built corpus, memory-mapped; :meth:`shards` gives a split's :class:`Shard` list."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        path = self.root / MANIFEST
        if not path.exists():
            raise UserError(f"{self.root} is not a corpus (no {MANIFEST})", hint="build one with `genolong corpus build`")
        self.manifest = read_manifest(path)
        if self.manifest.get("format") != FORMAT or not isinstance(self.manifest.get("shards"), list):
            raise InputError(path, f"not a genolong corpus manifest (format {self.manifest.get('format')!r})",
                             hint="build the corpus with `genolong corpus build`")
        self.stems = _stems(self.manifest["shards"], path)

    @property
    def tokenizer_fingerprint(self) -> str:
        return self.manifest["tokenizer_fingerprint"]

    def shards(self, split: str) -> list[Shard]:
        """The non-empty shards of ``split``, in genome order; an InputError names a shard file that
        is missing or of another size than the manifest says."""
        shards = []
        for info, stem in zip(self.manifest["shards"], self.stems, strict=True):
            if info["split"] != split or not info["sentences"]:
                continue
            folder = self.root / split
            sizes = {"tokens.u16": info["tokens"] * 2, "sentences.i64": (info["sentences"] + 1) * 8,
                     "documents.i64": info["documents"] * 32}
            for suffix, size in sizes.items():
                shard_file = folder / f"{stem}.{suffix}"
                if not shard_file.is_file() or shard_file.stat().st_size != size:
                    raise InputError(shard_file, f"missing or truncated (expected {size:,} bytes)",
                                     hint="rebuild the corpus with `genolong corpus build` into a new directory")
            shards.append(Shard(
                chrom=info["chrom"],
                tokens=np.memmap(folder / f"{stem}.tokens.u16", dtype=np.uint16, mode="r"),
                sentences=np.fromfile(folder / f"{stem}.sentences.i64", dtype=np.int64),
                documents=np.fromfile(folder / f"{stem}.documents.i64", dtype=np.int64).reshape(-1, 4)))
        return shards


def read_manifest(path: Path) -> dict:
    """The JSON object of a corpus manifest; an InputError when it is not JSON or not an object."""
    try:
        manifest = json.loads(path.read_text())
    except (UnicodeDecodeError, ValueError) as err:
        raise InputError(path, f"invalid JSON: {err}", hint="the corpus manifest is damaged; rebuild the corpus") from None
    if not isinstance(manifest, dict):
        raise InputError(path, "not a genolong corpus manifest (not a JSON object)")
    return manifest


def _stems(shards: list[dict], path: Path) -> list[str]:
    """The file stem of each shard, confined to the corpus directory; older corpora used the sanitised
    name alone, refused where two names collide (one shard overwrote the other)."""
    try:
        stems = [info.get("stem") or safe_name(info["chrom"]) for info in shards]
        legacy = [(info["split"], stem) for info, stem in zip(shards, stems, strict=True) if not info.get("stem")]
    except (AttributeError, KeyError, TypeError):
        raise InputError(path, "not a genolong corpus manifest (malformed shards list)") from None
    if any(info["split"] not in SPLITS or stem != safe_name(stem) for info, stem in zip(shards, stems, strict=True)):
        raise InputError(path, "a shard's split or file name would lie outside the corpus directory")
    if len(set(legacy)) != len(legacy):
        raise InputError(path, "built by an older genolong whose shard files collide for record names that "
                         "differ only in characters other than letters, digits and ._- (one overwrote another)",
                         hint="rebuild the corpus with `genolong corpus build` into a new directory")
    return stems


@dataclass
class Shard:
    """One chromosome's ``tokens`` (n_tokens,) uint16 memmap, ``sentences`` (n_sentences + 1,) int64
    offsets and ``documents`` (n_documents, 4) int64 (first sentence, end sentence, pass, bp start)."""

    chrom: str
    tokens: np.ndarray
    sentences: np.ndarray
    documents: np.ndarray
