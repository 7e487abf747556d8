"""The BPE DNA tokenizer (BigBird Sec. 5: a 32K BPE table, ~8.78 bp per token).

Built with HF ``tokenizers`` over ``A C G T N`` plus ``[PAD] [UNK] [CLS] [SEP] [MASK]``, saved with
``save_pretrained`` (``AutoTokenizer.from_pretrained(dir)`` loads it offline). Trained on a seeded
reservoir sample of chunks (bounded memory); runs of ``N`` are isolated by the pre-tokenizer, left out of
training and encoded by the tokens ``N`` x 2, 4, ..., 4096 appended afterwards; lossless:
``decode(encode(x)) == clean(x)``. Design and numbers: docs/guide/tokenizer-corpus.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from genolong.core.errors import ConfigError, InputError, UserError, first_line, is_library_failure
from genolong.core.files import MARKER, atomic_path, mark_directory
from genolong.dna.regions import Region, iter_regions
from genolong.dna.sequence import ALPHABET, FastaRecord

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: Tokens N^2, N^4, ..., N^(2^N_RUN_POWERS) are added after training.
N_RUN_POWERS = 12
#: Token ids are stored as uint16 in corpus shards.
MAX_VOCAB_SIZE = 65535
METADATA_FILE = "genolong_tokenizer.json"
_N_RUN = re.compile("N+")


@dataclass
class TokenizerTrainConfig:
    """How to train the tokenizer: ``vocab_size`` counts the special and N-run tokens; ``sample_bp`` bases
    of training text, in chunks of ``chunk_bp``, bound the memory (about 70 bytes of trainer memory per
    base); chunks with a larger N fraction than ``max_n_fraction`` are not sampled; ``min_frequency`` is
    the minimum pair count of a merge; ``seed`` seeds the sample."""

    vocab_size: int = 32000
    sample_bp: int = 16_000_000
    chunk_bp: int = 1000
    max_n_fraction: float = 0.5
    min_frequency: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        floor = len(SPECIAL_TOKENS) + len(ALPHABET) + N_RUN_POWERS
        if self.vocab_size < floor:
            raise ConfigError(
                f"vocab size {self.vocab_size} is smaller than the {floor} fixed tokens "
                f"({len(SPECIAL_TOKENS)} special, {len(ALPHABET)} bases, {N_RUN_POWERS} N-run tokens)")
        if self.vocab_size > MAX_VOCAB_SIZE:
            raise ConfigError(f"vocab size {self.vocab_size} exceeds {MAX_VOCAB_SIZE} (token ids are uint16)")
        if self.chunk_bp < 1 or self.sample_bp < self.chunk_bp:
            raise ConfigError(f"need 1 <= chunk_bp <= sample_bp, got chunk_bp={self.chunk_bp}, "
                              f"sample_bp={self.sample_bp}")
        if not 0.0 <= self.max_n_fraction <= 1.0:
            raise ConfigError(f"max_n_fraction must be in [0, 1], got {self.max_n_fraction}")
        if self.min_frequency < 0:
            raise ConfigError(f"min_frequency must be >= 0, got {self.min_frequency}")


@dataclass
class SampleReport:
    genome_bp: int = 0
    eligible_chunks: int = 0
    sampled_chunks: int = 0
    sampled_bp: int = 0
    per_record: dict[str, int] = field(default_factory=dict)


def sample_chunks(records: Iterable[FastaRecord], config: TokenizerTrainConfig) -> tuple[list[str], SampleReport]:
    """A seeded, uniform reservoir sample of genome chunks (Vitter's Algorithm R), in genome order, and a
    report of what was seen. Each record is cut into ``chunk_bp`` chunks from a random offset; chunks that
    are mostly ``N`` are skipped. Memory: one record plus ``sample_bp`` bases."""
    rng = np.random.default_rng(config.seed)
    capacity = config.sample_bp // config.chunk_bp
    reservoir: list[tuple[int, str]] = []  # (global chunk index, chunk)
    report = SampleReport()
    seen = 0
    for record in records:
        seq = record.sequence
        report.genome_bp += len(seq)
        offset = int(rng.integers(0, config.chunk_bp)) if len(seq) > 2 * config.chunk_bp else 0
        starts = range(offset, len(seq) - config.chunk_bp + 1, config.chunk_bp)
        if len(seq) < config.chunk_bp:  # a short record is one chunk
            starts = range(0, 1) if seq else range(0)
        draws = rng.random(len(starts))  # one uniform per chunk, drawn in bulk
        for start, u in zip(starts, draws, strict=True):
            chunk = seq[start:start + config.chunk_bp]
            if chunk.count("N") > config.max_n_fraction * len(chunk):
                continue
            seen += 1
            if len(reservoir) < capacity:
                reservoir.append((seen, chunk))
            else:
                slot = int(u * seen)
                if slot < capacity:
                    reservoir[slot] = (seen, chunk)
        report.per_record[record.name] = seen - sum(report.per_record.values())
    report.eligible_chunks = seen
    reservoir.sort()
    chunks = [chunk for _, chunk in reservoir]
    report.sampled_chunks = len(chunks)
    report.sampled_bp = sum(len(c) for c in chunks)
    return chunks, report


def _training_words(chunks: list[str]) -> Iterator[str]:
    """The chunks with their N runs removed (N runs never enter BPE training)."""
    return (piece for chunk in chunks for piece in _N_RUN.split(chunk) if piece)


def _base_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("N+"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


def _add_n_run_tokens(tok):
    """Append the N-run tokens and their merges (N+N -> NN, NN+NN -> NNNN, ...)."""
    from tokenizers import Tokenizer

    spec = json.loads(tok.to_str())
    vocab, merges = spec["model"]["vocab"], spec["model"]["merges"]
    next_id = max(vocab.values()) + 1
    for power in range(1, N_RUN_POWERS + 1):
        half, token = "N" * 2 ** (power - 1), "N" * 2**power
        if token not in vocab:
            vocab[token] = next_id
            next_id += 1
        merges.append([half, half] if isinstance(merges[0] if merges else [], list) else f"{half} {half}")
    return Tokenizer.from_str(json.dumps(spec))


def _finish(tok, model_max_length: int):
    """Wrap a trained ``tokenizers.Tokenizer`` as a transformers fast tokenizer."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=model_max_length, clean_up_tokenization_spaces=False)


def check_output_dir(out: Path, *, force: bool) -> None:
    """Refuse an existing directory unless it holds a tokenizer and ``force`` is given: files
    that are not a tokenizer are never replaced."""
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(f"{out} exists and is not a directory")
    if not any(p.name != MARKER for p in out.iterdir()):
        return
    if not (out / "tokenizer.json").exists():
        raise UserError(f"output directory {out} holds files that are not a tokenizer",
                        hint="choose a new or empty directory")
    if not force:
        raise UserError(f"output directory {out} already holds a tokenizer", hint="pass --force to replace it")


def train_tokenizer(genome: str | Path, out: str | Path, config: TokenizerTrainConfig, *,
                    regions: list[Region] | None = None, force: bool = False,
                    model_max_length: int = 4096, show_progress: bool = True) -> dict:
    """Train the BPE tokenizer on a sample of ``genome``, save it to ``out`` atomically and return the
    metadata written to ``out/genolong_tokenizer.json`` (config, sample report, timings)."""
    from tokenizers import trainers

    out = Path(out)
    check_output_dir(out, force=force)
    started = time.perf_counter()
    chunks, report = sample_chunks(iter_regions(genome, regions), config)
    if not chunks:
        raise UserError(f"{genome}: no usable sequence to train on (every chunk is mostly N or too short)")
    sampled = time.perf_counter()

    tok = _base_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=config.vocab_size - N_RUN_POWERS,
                                  min_frequency=config.min_frequency, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=list(ALPHABET), limit_alphabet=len(ALPHABET),
                                  show_progress=show_progress)
    tok.train_from_iterator(_training_words(chunks), trainer=trainer, length=len(chunks))
    del chunks
    tok = _add_n_run_tokens(tok)
    trained = time.perf_counter()

    metadata = {"format": "genolong-bpe-dna/1", "genome": str(genome),
                "regions": [asdict(r) for r in regions or []], "config": asdict(config),
                "vocab_size": tok.get_vocab_size(),
                "sample": {k: v for k, v in asdict(report).items() if k != "per_record"},
                "sample_per_record": report.per_record,
                "seconds": {"sample": round(sampled - started, 2), "train": round(trained - sampled, 2)}}
    with atomic_path(out, directory=True) as tmp:
        _finish(tok, model_max_length).save_pretrained(str(tmp))
        (tmp / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
        mark_directory(tmp, "tokenizer")
    return metadata


def load_tokenizer(path: str | Path):
    """Load a saved tokenizer directory as a transformers ``PreTrainedTokenizerFast``.

    Raises:
        UserError: ``path`` is not a genolong tokenizer directory.
        InputError: its ``tokenizer.json`` or ``tokenizer_config.json`` is unreadable, or it
            lacks one of the special tokens.
    """
    from transformers import PreTrainedTokenizerFast

    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        raise UserError(f"{path} is not a tokenizer directory (no tokenizer.json)",
                        hint="train one with `genolong tokenizer train`")
    try:
        _check_bpe_model(json.loads((path / "tokenizer.json").read_text())["model"])
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    except BaseException as err:  # JSON, Key, Type errors, or a Rust panic of tokenizers
        if not is_library_failure(err):
            raise
        raise InputError(path / "tokenizer.json", f"not a readable tokenizer: {'no key ' if isinstance(err, KeyError) else ''}{first_line(err)}",
                         hint="re-save the tokenizer, or train one with `genolong tokenizer train`") from None
    if None in (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id):
        raise InputError(path, "not a genolong tokenizer: [CLS], [SEP], [PAD] and [MASK] are not all defined "
                         "(tokenizer.json, tokenizer_config.json)")
    return tokenizer


def check_tokenizer_model(tokenizer) -> None:
    """Raise ValueError unless genolong's commands can read the fast ``tokenizer``: the rule
    :func:`load_tokenizer` applies to a saved ``tokenizer.json`` (a BPE table or a WordLevel vocabulary)."""
    _check_bpe_model(json.loads(tokenizer.backend_tokenizer.to_str())["model"])


def _check_bpe_model(model: dict) -> None:
    """Raise ValueError unless ``tokenizer.json``'s ``model`` is a consistent BPE table (``tokenizers``
    panics on an inconsistent one) or a WordLevel vocabulary (Nucleotide Transformer's, from ``genolong
    convert``): unique integer ids, every merge's parts and result in the vocabulary."""
    if not isinstance(model, dict) or model.get("type") not in ("BPE", "WordLevel"):
        raise ValueError("its model is not a BPE table")
    vocab, merges = model.get("vocab"), model.get("merges") if model["type"] == "BPE" else []
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise ValueError("its BPE table has no vocab mapping or merges list")
    ids = list(vocab.values())
    if not all(isinstance(i, int) and i >= 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError("the vocabulary's ids are not distinct non-negative integers")
    for merge in merges:
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2 or not all(
                isinstance(p, str) and p in vocab for p in parts) or "".join(parts) not in vocab:
            raise ValueError(f"merge {merge!r} is not a pair of tokens of the vocabulary")


#: Parts of a ``tokenizers`` JSON that decide which ids a sequence encodes to (not truncation,
#: padding or the decoder).
_ID_DEFINING_PARTS = ("model", "added_tokens", "normalizer", "pre_tokenizer", "post_processor")


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 (64 hex digits) of what maps text to ids, as canonical JSON: the vocabulary, merges, special
    and added tokens, normaliser, pre-tokenizer and post-processor; for a "slow" tokenizer without a
    ``tokenizers`` backend (ESM's ``vocab.txt``), its class, vocabulary and special tokens. Equal
    fingerprints encode identically; swapping two ids changes it."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        parts = {"class": type(tokenizer).__name__, "vocab": tokenizer.get_vocab(),
                 "special": tokenizer.special_tokens_map}
    else:
        spec = json.loads(backend.to_str())
        parts = {part: spec.get(part) for part in _ID_DEFINING_PARTS}
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def token_lengths(tokenizer) -> np.ndarray:
    """Bases covered by each token id, shape (vocab_size,); 0 for special tokens."""
    vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
    lengths = np.zeros(max(vocab.values()) + 1, dtype=np.int64)
    for token, index in vocab.items():
        lengths[index] = 0 if token in SPECIAL_TOKENS else len(token)
    return lengths


def tokenizer_stats(tokenizer, records: Iterable[FastaRecord], *, piece_bp: int = 32_768,
                    batch_size: int = 64, max_bp: int | None = None) -> dict:
    """bp/token, token-length histogram and batch-encode throughput over ``records``, cut into ``piece_bp``
    pieces (about one 4K-token window) encoded in parallel without special tokens."""
    backend = tokenizer.backend_tokenizer
    bp_of = token_lengths(tokenizer)
    total_bp = 0
    histogram = np.zeros(int(bp_of.max()) + 1, dtype=np.int64)
    encode_seconds = 0.0
    batch: list[str] = []

    def flush() -> None:
        nonlocal encode_seconds
        start = time.perf_counter()
        encodings = backend.encode_batch_fast(batch, add_special_tokens=False)
        encode_seconds += time.perf_counter() - start
        for enc in encodings:
            histogram[:] += np.bincount(bp_of[np.asarray(enc.ids)], minlength=len(histogram))
        batch.clear()

    for record in records:
        seq = record.sequence
        for start in range(0, len(seq), piece_bp):
            if max_bp is not None and total_bp >= max_bp:
                break
            piece = seq[start:start + piece_bp]
            batch.append(piece)
            total_bp += len(piece)
            if len(batch) == batch_size:
                flush()
    if batch:
        flush()
    total_tokens = int(histogram.sum())
    if total_tokens == 0:
        raise UserError("no sequence to measure")
    return {"bp": total_bp, "tokens": total_tokens, "bp_per_token": total_bp / total_tokens,
            "encode_mbp_per_s": total_bp / encode_seconds / 1e6,
            "token_length_histogram": {length: int(n) for length, n in enumerate(histogram) if n}}
