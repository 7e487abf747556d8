"""Document-style corpus: cutting rule, shard contents vs the genome, determinism, resume."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest

import genolong.datasets.corpus_build as corpus_module
from genolong.cli.main import main
from genolong.config import dump_yaml, from_dict, load_yaml
from genolong.core.errors import ConfigError, UserError
from genolong.core.files import atomic_path
from genolong.datasets.corpus import MANIFEST, Corpus
from genolong.datasets.corpus_build import CorpusConfig, build_corpus, cut_documents
from genolong.dna.sequence import read_fasta, write_fasta
from genolong.dna.tokenizer import TokenizerTrainConfig, load_tokenizer, train_tokenizer


def test_cut_documents_follows_bigbird_rule():
    config = CorpusConfig()
    rng = np.random.default_rng(0)
    docs = cut_documents(2_000_000, rng, config)
    sentences = [s for doc in docs for s in doc]
    assert 0 <= sentences[0][0] < 5000
    assert all(a[1] == b[0] for a, b in zip(sentences, sentences[1:], strict=False)), "consecutive, no gaps"
    assert sentences[-1][1] == 2_000_000
    assert all(500 <= e - s <= 1000 for s, e in sentences[:-1])
    assert all(50 <= len(doc) <= 100 for doc in docs[:-1])


@pytest.fixture(scope="module")
def genome_and_tokenizer(tmp_path_factory, real_data):
    folder = tmp_path_factory.mktemp("corpus_inputs")
    rng = random.Random(0)
    records = [(r.name, r.sequence) for r in read_fasta(real_data / "genomes" / "chr17.hg19.part.fa")]
    records += [("chr7", "".join(rng.choice("ACGT") for _ in range(30_000))),
                ("chr8", "N" * 2000 + "".join(rng.choice("ACGT") for _ in range(20_000))),
                ("chrUn_gap", "N" * 6000)]
    genome = folder / "g.fa"
    write_fasta(genome, records)
    tok = folder / "tok"
    train_tokenizer(genome, tok, TokenizerTrainConfig(vocab_size=512, sample_bp=50_000), show_progress=False)
    return genome, tok, dict(records)


SMALL = dict(passes=2, sentence_bp=[50, 100], sentences_per_document=[5, 10], max_start_offset=200)


def _build(genome, tok, out, workers=1, share=(0, 1), **overrides):
    return build_corpus(genome, tok, out, from_dict(CorpusConfig, SMALL | overrides), show_progress=False,
                        workers=workers, share=share)


def test_shards_decode_back_to_the_genome(genome_and_tokenizer, tmp_path):
    genome, tok, records = genome_and_tokenizer
    manifest = _build(genome, tok, tmp_path / "c")
    assert {s["chrom"]: s["split"] for s in manifest["shards"]} == {
        "chr17": "train", "chr7": "valid", "chr8": "test", "chrUn_gap": "train"}
    backend = load_tokenizer(tok).backend_tokenizer
    corpus = Corpus(tmp_path / "c")
    checked = 0
    for split, name in [("train", "chr17"), ("valid", "chr7"), ("test", "chr8")]:
        (shard,) = [s for s in corpus.shards(split) if s.chrom == name]
        tokens, sentences, documents = shard.tokens, shard.sentences, shard.documents
        assert sentences[-1] == len(tokens)
        assert set(documents[:, 2]) == {0, 1}, "both passes present"
        seq = records[name]
        for first, end, _, bp_start in documents:
            text = backend.decode(tokens[sentences[first]:sentences[end]].tolist())
            if "N" not in seq[bp_start:bp_start + len(text)]:  # documents with dropped N sentences skip bases
                assert text == seq[bp_start:bp_start + len(text)]
                checked += 1
        sizes = documents[:, 1] - documents[:, 0]
        assert sizes.max() <= 10 and (sizes < 5).sum() <= 2 + (name == "chr8") * 2, "short: only at the ends"
    assert checked > 10
    chr8 = next(s for s in manifest["shards"] if s["chrom"] == "chr8")
    assert chr8["dropped_sentences"] > 0, "the N run's sentences are dropped"
    gap = next(s for s in manifest["shards"] if s["chrom"] == "chrUn_gap")
    assert gap["sentences"] == 0


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.u16"))} | {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.i64"))}


def test_same_seed_byte_identical_other_seed_differs(genome_and_tokenizer, tmp_path):
    genome, tok, _ = genome_and_tokenizer
    _build(genome, tok, tmp_path / "a", seed=1)
    _build(genome, tok, tmp_path / "b", seed=1, encode_batch=7)  # batching does not change bytes
    _build(genome, tok, tmp_path / "c", seed=2)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def test_resume_skips_finished_chromosomes(genome_and_tokenizer, tmp_path, monkeypatch):
    genome, tok, _ = genome_and_tokenizer
    real = corpus_module.build_shard
    built = []

    def failing_on_chr8(name, *args, **kwargs):
        if name == "chr8":
            raise KeyboardInterrupt
        built.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(corpus_module, "build_shard", failing_on_chr8)
    with pytest.raises(KeyboardInterrupt):
        _build(genome, tok, tmp_path / "c")
    assert built == ["chr17", "chr7"]
    assert not list((tmp_path / "c" / "test").glob("*chr8.tokens.u16"))
    assert not list((tmp_path / "c").rglob("*.tmp")), "no partial files left"

    built.clear()
    monkeypatch.setattr(corpus_module, "build_shard", lambda name, *a, **k: built.append(name) or real(name, *a, **k))
    _build(genome, tok, tmp_path / "c")
    assert built == ["chr8", "chrUn_gap"]
    _build(genome, tok, tmp_path / "fresh")
    assert _digest(tmp_path / "c") == _digest(tmp_path / "fresh")


def _files(folder):
    """Every file's bytes; the manifest without its timing."""
    files = {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    manifest = json.loads(files.pop(Path(MANIFEST)))
    return files, {key: value for key, value in manifest.items() if key != "build"}


def test_two_workers_write_the_bytes_of_one_process(genome_and_tokenizer, tmp_path, capsys):
    genome, tok, _ = genome_and_tokenizer
    for workers in ("1", "2"):
        assert main(["corpus", "build", "--genome", str(genome), "--tokenizer", str(tok), "--out",
                     str(tmp_path / workers), "--passes", "2", "--workers", workers]) == 0
    one, two = _files(tmp_path / "1"), _files(tmp_path / "2")
    assert len(one[0]) == 4 * 4 + 1 and one == two  # 4 files per shard, the directory marker; the manifest
    assert "built" in capsys.readouterr().out


def test_ranks_build_their_share_and_rank_0_the_manifest(genome_and_tokenizer, tmp_path, monkeypatch):
    """Two ranks of a launch (run one after the other here): rank 1 builds shards 1 and 3, rank 0 shards 0
    and 2, waits for the others' and writes the corpus of one process."""
    genome, tok, _ = genome_and_tokenizer
    real, built = corpus_module.build_shard, []
    monkeypatch.setattr(corpus_module, "build_shard", lambda name, *a, **k: built.append(name) or real(name, *a, **k))
    assert _build(genome, tok, tmp_path / "ranks", share=(1, 2)) is None
    assert built == ["chr7", "chrUn_gap"]
    _build(genome, tok, tmp_path / "ranks", share=(0, 2))
    assert built == ["chr7", "chrUn_gap", "chr17", "chr8"]
    _build(genome, tok, tmp_path / "one")
    assert _files(tmp_path / "ranks") == _files(tmp_path / "one")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_workers_and_leaves_no_partial_file(genome_and_tokenizer, tmp_path, monkeypatch, capsys,
                                                               signum, code):
    genome, tok, _ = genome_and_tokenizer
    real = corpus_module.build_shard

    def signal_the_parent_from_chr8(name, *args, **kwargs):
        if name == "chr8":  # in a worker: write a temporary file, then signal the command and wait
            with atomic_path(tmp_path / "out" / "test" / "partial.u16") as tmp:
                tmp.write_bytes(b"half")
                os.kill(os.getppid(), signum)
                time.sleep(60)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(corpus_module, "build_shard", signal_the_parent_from_chr8)
    started = time.monotonic()
    assert main(["corpus", "build", "--genome", str(genome), "--tokenizer", str(tok), "--out", str(tmp_path / "out"),
                 "--passes", "2", "--workers", "2"]) == code
    assert time.monotonic() - started < 30  # the worker was stopped, not waited for
    assert capsys.readouterr().err == f"genolong corpus build: interrupted by {signal.Signals(signum).name}\n"
    assert not list((tmp_path / "out").rglob("*.tmp")) and not (tmp_path / "out" / "manifest.json").exists()


def test_a_worker_that_dies_stops_the_build_with_one_line(genome_and_tokenizer, tmp_path, monkeypatch, capsys):
    genome, tok, _ = genome_and_tokenizer
    real = corpus_module.build_shard
    monkeypatch.setattr(corpus_module, "build_shard", lambda name, *a, **k: os.kill(os.getpid(), signal.SIGKILL)
                        if name == "chr8" else real(name, *a, **k))
    assert main(["corpus", "build", "--genome", str(genome), "--tokenizer", str(tok), "--out", str(tmp_path / "out"),
                 "--passes", "2", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "the worker building shard chr8 died (exit status -9)" in err and len(err.splitlines()) <= 2


def test_tail_holdout_for_single_chromosome_genomes(genome_and_tokenizer, tmp_path):
    genome, tok, _ = genome_and_tokenizer
    manifest = _build(genome, tok, tmp_path / "c", valid_chromosomes=[], test_chromosomes=[],
                      valid_tail_fraction=0.1, test_tail_fraction=0.1)
    names = {s["chrom"]: s["split"] for s in manifest["shards"]}
    assert names["chr17"] == "train" and names["chr17:32000-36000"] == "valid"
    assert names["chr17:36000-40000"] == "test"


def test_refuses_a_corpus_built_otherwise(genome_and_tokenizer, tmp_path):
    genome, tok, _ = genome_and_tokenizer
    _build(genome, tok, tmp_path / "c")
    with pytest.raises(UserError, match="another tokenizer or configuration"):
        _build(genome, tok, tmp_path / "c", seed=5)


def test_no_usable_sequence(tmp_path, genome_and_tokenizer, capsys):
    _, tok, _ = genome_and_tokenizer
    write_fasta(tmp_path / "gaps.fa", [("chr1", "N" * 5000)])
    code = main(["corpus", "build", "--genome", str(tmp_path / "gaps.fa"), "--tokenizer", str(tok),
                 "--out", str(tmp_path / "c")])
    assert code == 2 and "no usable sequence" in capsys.readouterr().err


def test_cli_with_yaml_config(genome_and_tokenizer, tmp_path, capsys):
    genome, tok, _ = genome_and_tokenizer
    (tmp_path / "c.yaml").write_text(dump_yaml(from_dict(CorpusConfig, SMALL)))
    assert main(["corpus", "build", "--genome", str(genome), "--tokenizer", str(tok), "--out", str(tmp_path / "c"),
                 "--config", str(tmp_path / "c.yaml"), "--passes", "1"]) == 0
    manifest = json.loads((tmp_path / "c" / "corpus.json").read_text())
    assert manifest["config"]["passes"] == 1 and manifest["config"]["sentence_bp"] == [50, 100]
    assert "tokens" in capsys.readouterr().out


@pytest.mark.parametrize("data, message", [
    ({"passes": 0}, "passes must be >= 1"),
    ({"sentence_bp": [900, 500]}, "sentence_bp must be an inclusive range"),
    ({"valid_chromosomes": ["7"], "test_chromosomes": ["chr7"]}, "both in validation and test"),
    ({"valid_tail_fraction": 0.6, "test_tail_fraction": 0.5}, "sum to less than 1"),
    ({"pases": 3}, "unknown key pases (did you mean passes"),
])
def test_bad_configs(data, message, tmp_path):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_dict(CorpusConfig, data)
    (tmp_path / "bad.yaml").write_text("passes: [unclosed\n")
    with pytest.raises(UserError, match="invalid YAML"):
        load_yaml(tmp_path / "bad.yaml", CorpusConfig)
