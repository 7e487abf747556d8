"""Build a document-style MLM corpus (:mod:`genolong.datasets.corpus`) from a genome (BigBird App. F.1).

Each pass over a chromosome (:func:`cut_documents`) cuts sentences of 500-1000 bp from a random start
and groups 50-100 into a document; sentences mostly ``N`` (and a short final one) are dropped; each
is tokenized on its own. Randomness is seeded per (seed, chromosome, pass): byte-identical shards
whatever was resumed. Held-out chromosomes (default: chr7 validation, chr8/chr9 test, as DeepSEA)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from genolong.core.errors import ConfigError, UserError
from genolong.core.files import atomic_path, atomic_write_text, claim_directory, sha256_file
from genolong.core.progress import progress_bar
from genolong.datasets.corpus import FORMAT, MANIFEST, SPLITS, read_manifest, shard_stem
from genolong.datasets.corpus_workers import ShardPool, available_cores
from genolong.dna.genome import canonical_chrom
from genolong.dna.sequence import read_fasta
from genolong.dna.tokenizer import load_tokenizer, tokenizer_fingerprint

log = logging.getLogger(__name__)


@dataclass
class CorpusConfig:
    """How documents are cut (defaults: BigBird App. F.1); ranges inclusive, chromosome aliases allowed.
    ``valid_tail_fraction`` and ``test_tail_fraction`` also hold out that final fraction of every other
    chromosome (for genomes with too few chromosomes) as its own shard, never sharing sequence with
    training; ``encode_batch``: sentences tokenized at a time (bounds memory)."""

    passes: int = 10
    max_start_offset: int = 5000
    sentence_bp: tuple[int, int] = (500, 1000)
    sentences_per_document: tuple[int, int] = (50, 100)
    max_n_fraction: float = 0.5
    valid_chromosomes: list[str] = field(default_factory=lambda: ["chr7"])
    test_chromosomes: list[str] = field(default_factory=lambda: ["chr8", "chr9"])
    valid_tail_fraction: float = 0.0
    test_tail_fraction: float = 0.0
    seed: int = 0
    encode_batch: int = 8192

    def __post_init__(self) -> None:
        self.sentence_bp = tuple(self.sentence_bp)
        self.sentences_per_document = tuple(self.sentences_per_document)
        for name in ("passes", "max_start_offset", "encode_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("sentence_bp", "sentences_per_document"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise ConfigError(f"{name} must be an inclusive range 1 <= low <= high, got {(low, high)}")
        if not 0.0 <= self.max_n_fraction <= 1.0:
            raise ConfigError(f"max_n_fraction must be in [0, 1], got {self.max_n_fraction}")
        tails = (self.valid_tail_fraction, self.test_tail_fraction)
        if min(tails) < 0.0 or sum(tails) >= 1.0:
            raise ConfigError("tail fractions must be >= 0 and sum to less than 1, got "
                              f"{self.valid_tail_fraction} and {self.test_tail_fraction}")
        overlap = {canonical_chrom(c) for c in self.valid_chromosomes} & {
            canonical_chrom(c) for c in self.test_chromosomes}
        if overlap:
            raise ConfigError(f"chromosomes both in validation and test: {sorted(overlap)}")

    def pieces(self, chrom: str, length: int) -> list[tuple[str, str, int, int]]:
        """How a chromosome is split: ``(split, shard name, start, end)`` pieces."""
        held_out = {"test": self.test_chromosomes, "valid": self.valid_chromosomes}
        split = next((split for split, names in held_out.items()
                      if canonical_chrom(chrom) in map(canonical_chrom, names)), "train")
        if split != "train" or not (self.valid_tail_fraction or self.test_tail_fraction):
            return [(split, chrom, 0, length)]
        test_start = length - round(length * self.test_tail_fraction)
        valid_start = test_start - round(length * self.valid_tail_fraction)
        pieces = [("train", chrom, 0, valid_start),
                  ("valid", f"{chrom}:{valid_start}-{test_start}", valid_start, test_start),
                  ("test", f"{chrom}:{test_start}-{length}", test_start, length)]
        return [piece for piece in pieces if piece[3] > piece[2]]

    def fingerprint(self) -> str:
        """Hash of everything that changes the shard bytes (not ``encode_batch``)."""
        fields = {k: v for k, v in asdict(self).items() if k != "encode_batch"}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def cut_documents(length: int, rng: np.random.Generator, config: CorpusConfig) -> list[list[tuple[int, int]]]:
    """One pass of BigBird's document cutting over ``length`` bp: documents of consecutive ``(start, end)``
    sentences (0-based, half-open; the last may be short), from a start in ``[0, max_start_offset)``
    (or ``[0, length // 4)`` for a shorter sequence)."""
    s_low, s_high = config.sentence_bp
    d_low, d_high = config.sentences_per_document
    position = int(rng.integers(0, max(1, min(config.max_start_offset, length // 4))))
    documents = []
    while position < length:
        sentences = []
        for _ in range(int(rng.integers(d_low, d_high + 1))):
            if position >= length:
                break
            end = min(position + int(rng.integers(s_low, s_high + 1)), length)
            sentences.append((position, end))
            position = end
        documents.append(sentences)
    return documents


@dataclass
class ShardInfo:
    """What a shard's ``<stem>.json`` marker records (see :mod:`genolong.datasets.corpus`)."""

    chrom: str
    split: str
    bp: int
    passes: int
    documents: int
    sentences: int
    tokens: int
    sentence_bp: int
    dropped_sentences: int
    files: dict[str, str]
    config: str
    tokenizer: str
    stem: str = ""  # empty in corpora built before shard names carried the index


class _TokenWriter:
    """Tokenizes sentences in batches and appends their ids to an open uint16 file; ``lengths``: the
    token count of each sentence, after a leading 0."""

    def __init__(self, tokenizer, handle, batch_size: int):
        self.backend, self.handle, self.batch_size = tokenizer.backend_tokenizer, handle, batch_size
        self.batch: list[str] = []
        self.lengths: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]

    def add(self, sentence: str) -> None:
        self.batch.append(sentence)
        if len(self.batch) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        encodings = self.backend.encode_batch_fast(self.batch, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        ids = np.fromiter((i for e in encodings for i in e.ids), dtype=np.uint16, count=int(lengths.sum()))
        self.handle.write(ids.tobytes())
        self.lengths.append(lengths)
        self.batch.clear()

    def sentence_offsets(self) -> np.ndarray:
        """(n_sentences + 1,) int64 token offsets of the sentences written so far."""
        self.flush()
        return np.cumsum(np.concatenate(self.lengths))


def build_shard(chrom: str, sequence: str, split: str, tokenizer, config: CorpusConfig, folder: Path,
                tokenizer_id: str, progress=None, *, stem: str) -> ShardInfo:
    """Cut, tokenize and write the shard of one chromosome (or held-out piece) atomically, as
    files ``folder/<stem>.*``."""
    files = {"tokens": f"{stem}.tokens.u16", "sentences": f"{stem}.sentences.i64",
             "documents": f"{stem}.documents.i64"}
    min_bp = config.sentence_bp[0]
    chrom_seed = zlib.crc32(canonical_chrom(chrom).encode())  # one seed per chromosome, whatever its alias
    documents: list[tuple[int, int, int, int]] = []
    n_sentences = kept_bp = dropped = 0
    with atomic_path(folder / files["tokens"]) as tokens_tmp, open(tokens_tmp, "wb") as handle:
        writer = _TokenWriter(tokenizer, handle, config.encode_batch)
        for pass_index in range(config.passes):
            rng = np.random.default_rng([config.seed, chrom_seed, pass_index])
            for doc in cut_documents(len(sequence), rng, config):
                first = n_sentences
                for start, end in doc:
                    text = sequence[start:end]
                    if end - start < min_bp or text.count("N") > config.max_n_fraction * (end - start):
                        dropped += 1
                        continue
                    writer.add(text)
                    n_sentences += 1
                    kept_bp += end - start
                if n_sentences > first:
                    documents.append((first, n_sentences, pass_index, doc[0][0]))
            if progress is not None:
                progress.update(len(sequence))
        offsets = writer.sentence_offsets()
    with atomic_path(folder / files["sentences"]) as tmp:
        offsets.tofile(tmp)
    with atomic_path(folder / files["documents"]) as tmp:
        np.asarray(documents, dtype=np.int64).reshape(-1, 4).tofile(tmp)
    info = ShardInfo(chrom=chrom, split=split, bp=len(sequence), passes=config.passes,
                     documents=len(documents), sentences=n_sentences, tokens=int(offsets[-1]),
                     sentence_bp=kept_bp, dropped_sentences=dropped,
                     files={k: sha256_file(folder / v) for k, v in files.items()},
                     config=config.fingerprint(), tokenizer=tokenizer_id, stem=stem)
    atomic_write_text(folder / f"{stem}.json", json.dumps(asdict(info), indent=1) + "\n")
    return info


def _finished_shard(folder: Path, stem: str, chrom: str, config: CorpusConfig, tokenizer_id: str) -> ShardInfo | None:
    """The shard's marker when it was built for this piece, configuration and tokenizer; an
    unreadable marker (an interrupted copy, a foreign file) means: build it again."""
    marker = folder / f"{stem}.json"
    if not marker.exists():
        return None
    try:
        info = ShardInfo(**json.loads(marker.read_text()))
    except (ValueError, TypeError):
        log.warning("%s is not a shard marker; the shard is built again", marker)
        return None
    return info if (info.chrom, info.config, info.tokenizer) == (chrom, config.fingerprint(), tokenizer_id) else None


def build_corpus(genome: str | Path, tokenizer_dir: str | Path, out: str | Path, config: CorpusConfig,
                 *, show_progress: bool = True, workers: int | None = None,
                 share: tuple[int, int] = (0, 1)) -> dict | None:
    """Build (or resume) the corpus of ``genome`` in ``out``; returns the manifest. ``workers`` (default:
    :func:`~genolong.datasets.corpus_workers.available_cores`) does not change the files. ``share``
    ``(rank, world)``: this rank builds the shards ``i % world == rank``; rank 0 then waits for the
    others' and writes the manifest, the others return None. A UserError when the genome yields no
    usable sentence, or ``out`` holds a corpus of another tokenizer or configuration (never overwritten)."""
    out = Path(out)
    tokenizer = load_tokenizer(tokenizer_dir)
    tokenizer_id = tokenizer_fingerprint(tokenizer)
    manifest_path = out / MANIFEST
    if manifest_path.exists():
        old = read_manifest(manifest_path)
        if (old.get("config_fingerprint"), old.get("tokenizer_fingerprint")) != (config.fingerprint(), tokenizer_id):
            raise UserError(f"{out} holds a corpus built with another tokenizer or configuration",
                            hint="choose another --out or delete it")
    claim_directory(out, "corpus")
    started = time.perf_counter()
    shards, built_bp = _build_shards(genome, tokenizer, tokenizer_id, out, config, show_progress,
                                     available_cores() if workers is None else workers, share)
    if share[0] != 0:
        return None
    seconds = time.perf_counter() - started
    manifest = {"format": FORMAT, "genome": str(genome), "tokenizer": str(tokenizer_dir),
                "tokenizer_fingerprint": tokenizer_id, "vocab_size": len(tokenizer), "config": asdict(config),
                "config_fingerprint": config.fingerprint(), "totals": _split_totals(genome, shards, config),
                "shards": [asdict(s) for s in shards],
                "build": {"seconds": round(seconds, 2), "built_mbp": built_bp / 1e6,
                          "mbp_per_s": round(built_bp / 1e6 / seconds, 3) if built_bp else None}}
    atomic_write_text(manifest_path, json.dumps(manifest, indent=1) + "\n")
    _remove_unlisted_shards(out, shards)
    return manifest


def _remove_unlisted_shards(out: Path, shards: list[ShardInfo]) -> None:
    """Remove the shard files of an earlier build (of another genome) that the new manifest does
    not list, so that a rebuilt corpus holds only its own files."""
    listed = {(s.split, f"{s.stem}{suffix}") for s in shards
              for suffix in (".json", ".tokens.u16", ".sentences.i64", ".documents.i64")}
    for folder in {s.split for s in shards} | {p.name for p in out.iterdir() if p.is_dir()}:
        for path in (out / folder).glob("[0-9][0-9][0-9][0-9]_*"):
            if path.is_file() and (folder, path.name) not in listed:
                log.info("removing %s, a shard of an earlier build", path)
                path.unlink()


def _build_shards(genome, tokenizer, tokenizer_id: str, out: Path, config: CorpusConfig, show_progress: bool,
                  workers: int, share: tuple[int, int]) -> tuple[list[ShardInfo], int]:
    """Every piece's shard (this rank's, built or reused; rank 0 also awaits the others') in genome order,
    and the bp tokenized now."""
    rank, world = share
    done: dict[int, ShardInfo] = {}
    built, others = [], []
    with (progress_bar(unit="bp", unit_scale=True, desc="corpus", disable=None if show_progress else True) as progress,
          ShardPool(workers, progress) as pool):
        for record in read_fasta(genome):
            for split, name, start, end in config.pieces(record.name, len(record)):
                index = len(done) + len(built) + len(others)
                folder = out / split
                folder.mkdir(parents=True, exist_ok=True)
                stem = shard_stem(index, name)
                info = _finished_shard(folder, stem, name, config, tokenizer_id)
                if info is not None:
                    log.info("%s: shard already built, skipped", name)
                    done[index] = info
                elif index % world != rank:
                    others.append((index, folder, stem, name))
                else:
                    pool.submit(index, name, functools.partial(
                        build_shard, name, record.sequence[start:end], split, tokenizer, config, folder,
                        tokenizer_id, stem=stem), (end - start) * config.passes)
                    built.append(index)
        done |= {index: pool.result(index) for index in built}
    if rank == 0:
        done |= {index: _await_shard(folder, stem, name, config, tokenizer_id) for index, folder, stem, name in others}
    return [done[index] for index in sorted(done)], sum(done[index].bp for index in built) * config.passes


def _await_shard(folder: Path, stem: str, chrom: str, config: CorpusConfig, tokenizer_id: str,
                 timeout_s: float = 7 * 24 * 3600) -> ShardInfo:
    """The marker of a shard another rank builds, once written."""
    deadline = time.monotonic() + timeout_s
    while (info := _finished_shard(folder, stem, chrom, config, tokenizer_id)) is None:
        if time.monotonic() > deadline:
            raise UserError(f"timed out waiting for another rank to build shard {folder / stem}")
        time.sleep(2)
    return info


def _split_totals(genome, shards: list[ShardInfo], config: CorpusConfig) -> dict[str, dict[str, int]]:
    """Counts per split; a split without sentences is an error (nothing to train or validate on)."""
    if not any(s.sentences for s in shards):
        raise UserError(f"{genome}: no usable sequence (every sentence is mostly N or shorter than "
                        f"{config.sentence_bp[0]} bp)")
    totals = {split: {key: sum(getattr(s, key) for s in shards if s.split == split)
                      for key in ("bp", "documents", "sentences", "tokens", "sentence_bp")} for split in SPLITS}
    empty = [split for split in SPLITS if not totals[split]["sentences"]]
    if empty:
        raise UserError(f"{genome}: the corpus would have no {' and no '.join(empty)} documents (held-out "
                        f"chromosomes: valid {', '.join(config.valid_chromosomes) or 'none'}, test "
                        f"{', '.join(config.test_chromosomes) or 'none'})",
                        hint="name chromosomes of this genome, or hold out tails with --valid-tail-fraction "
                             "and --test-tail-fraction")
    return totals
