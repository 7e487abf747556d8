"""The BPE DNA tokenizer: losslessness on every real genome, N runs, sampling, CLI errors."""

from __future__ import annotations

import json
import random

import pytest
from transformers import AutoTokenizer

from genolong.cli.main import main
from genolong.core.errors import ConfigError
from genolong.dna.regions import Region
from genolong.dna.sequence import FastaRecord, read_fasta, write_fasta
from genolong.dna.tokenizer import (
    N_RUN_POWERS,
    SPECIAL_TOKENS,
    TokenizerTrainConfig,
    load_tokenizer,
    sample_chunks,
    tokenizer_stats,
    train_tokenizer,
)


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory, real_data):
    out = tmp_path_factory.mktemp("tok") / "bpe"
    config = TokenizerTrainConfig(vocab_size=2048, sample_bp=200_000, seed=0)
    train_tokenizer(real_data / "genomes" / "yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa", out, config,
                    show_progress=False)
    return out


def test_loads_offline_with_autotokenizer(tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    assert len(tok) == 2048
    assert [tok.convert_ids_to_tokens(i) for i in range(5)] == list(SPECIAL_TOKENS)
    ids = tok("ACGTACGT")["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    meta = json.loads((tokenizer_dir / "genolong_tokenizer.json").read_text())
    assert meta["config"]["seed"] == 0 and meta["sample"]["sampled_bp"] <= 200_000


def test_lossless_on_every_real_genome(tokenizer_dir, real_data):
    backend = load_tokenizer(tokenizer_dir).backend_tokenizer
    files = sorted((real_data / "genomes").glob("*.fa*"))
    assert len(files) == 4
    for path in files:
        for record in read_fasta(path):
            pieces = [record.sequence[i:i + 100_000] for i in range(0, len(record), 100_000)]
            encodings = backend.encode_batch(pieces, add_special_tokens=False)
            decoded = backend.decode_batch([e.ids for e in encodings])
            assert "".join(decoded) == record.sequence, path.name
            assert 1 not in {i for e in encodings for i in e.ids}, "no [UNK] on clean input"


def test_n_runs_encode_compactly_and_never_merge_with_bases(tokenizer_dir):
    tok = load_tokenizer(tokenizer_dir)
    run = "N" * 100_000
    ids = tok(run, add_special_tokens=False)["input_ids"]
    assert len(ids) <= 100_000 // 2**N_RUN_POWERS + N_RUN_POWERS
    assert tok.decode(ids) == run
    seq = "ACGTTGCA" + "N" * 37 + "GGATCC"
    tokens = tok.tokenize(seq)
    assert all(set(t) == {"N"} or "N" not in t for t in tokens)
    assert tok.decode(tok(seq)["input_ids"], skip_special_tokens=True) == seq


def test_sampling_is_seeded_uniform_and_skips_n_chunks():
    rng = random.Random(0)
    records = [FastaRecord(f"c{i}", "".join(rng.choice("ACGT") for _ in range(n)))
               for i, n in enumerate([40_000, 20_000, 10_000])]
    records.append(FastaRecord("gap", "N" * 30_000))
    config = TokenizerTrainConfig(vocab_size=100, sample_bp=14_000, chunk_bp=100, seed=3)
    chunks, report = sample_chunks(records, config)
    again, _ = sample_chunks(records, config)
    other, _ = sample_chunks(records, TokenizerTrainConfig(vocab_size=100, sample_bp=14_000, chunk_bp=100, seed=4))
    assert chunks == again and chunks != other
    assert report.sampled_bp == 14_000 and report.genome_bp == 100_000
    assert report.per_record["gap"] == 0
    # uniform across records: each record's share of the sample tracks its share of the bases
    by_record = {r.name: sum(c in r.sequence for c in chunks) for r in records[:3]}
    assert by_record["c0"] > by_record["c1"] > by_record["c2"] > 0


def test_region_restricts_training_text(tmp_path, real_data):
    path = real_data / "genomes" / "chr17.hg19.part.fa"
    meta = train_tokenizer(path, tmp_path / "t", TokenizerTrainConfig(vocab_size=200, sample_bp=10_000),
                           regions=[Region.parse("17:0-20000")], show_progress=False)
    assert meta["sample"]["genome_bp"] == 20_000


def test_stats_report(tokenizer_dir, real_data):
    tok = load_tokenizer(tokenizer_dir)
    report = tokenizer_stats(tok, read_fasta(real_data / "genomes" / "chr17.hg19.part.fa"))
    assert report["bp"] == 40_000
    assert report["bp_per_token"] == pytest.approx(40_000 / report["tokens"])
    assert sum(length * n for length, n in report["token_length_histogram"].items()) == 40_000


@pytest.mark.parametrize("vocab_size, message", [(10, "smaller than the 22 fixed tokens"),
                                                 (70_000, "exceeds 65535")])
def test_bad_vocab_size(vocab_size, message):
    with pytest.raises(ConfigError, match=message):
        TokenizerTrainConfig(vocab_size=vocab_size)


def _run_cli(capsys, *argv):
    code = main(list(map(str, argv)))
    captured = capsys.readouterr()
    return code, captured.err.strip()


@pytest.mark.parametrize(
    "content, expected",
    [
        ("", "empty file"),
        ("ACGT\nACGT\n", "expected a FASTA header"),
        (">a\nACGT\nAC7T\n", ":3 (record 'a'): invalid character '7'"),
        (">a\nACXT\n", "invalid character 'X'"),
        (">a\nAC*T\n", "invalid character '*'"),
        (">a\nACGT\n>a\nACGT\n", ":3 (record 'a'): duplicate record name"),
    ],
)
def test_cli_bad_fasta_is_one_line_exit_2(tmp_path, capsys, content, expected):
    fasta = tmp_path / "bad.fa"
    fasta.write_text(content)
    code, err = _run_cli(capsys, "tokenizer", "train", "--genome", fasta, "--out", tmp_path / "tok",
                         "--vocab-size", 100, "--sample-bp", 1000, "--chunk-bp", 100)
    assert code == 2
    assert "\n" not in err and str(fasta) in err and expected in err
    assert not (tmp_path / "tok").exists()


def test_cli_refuses_foreign_output_dir_and_leaves_nothing_behind(tmp_path, capsys, real_data):
    genome = real_data / "genomes" / "MT-human_NC_012920.1.fa"
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    args = ["tokenizer", "train", "--genome", genome, "--out", out, "--vocab-size", 64,
            "--sample-bp", 5000, "--chunk-bp", 500]
    for force in ([], ["--force"]):  # --force replaces a tokenizer genolong made, never the user's files
        code, err = _run_cli(capsys, *args, *force)
        assert code == 2 and "genolong did not write (such as notes.txt)" in err
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
        assert (out / "notes.txt").read_text() == "keep me"

    code, err = _run_cli(capsys, "tokenizer", "train", "--genome", genome, "--out", tmp_path / "small",
                         "--vocab-size", 8)
    assert code == 2 and "vocab size 8" in err

    ours = [*args[:5], tmp_path / "ours", *args[6:]]
    assert _run_cli(capsys, *ours)[0] == 0
    code, err = _run_cli(capsys, *ours)
    assert code == 2 and "already holds a tokenizer" in err and "--force" in err
    assert _run_cli(capsys, *ours, "--force")[0] == 0
    assert (tmp_path / "ours" / "tokenizer.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours", "out"]  # no temp dirs left behind


def test_failed_training_leaves_no_partial_output(tmp_path, monkeypatch, real_data):
    import genolong.dna.tokenizer as module

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(module, "_finish", broken)
    with pytest.raises(RuntimeError):
        train_tokenizer(real_data / "genomes" / "MT-human_NC_012920.1.fa", tmp_path / "t",
                        TokenizerTrainConfig(vocab_size=64, sample_bp=5000, chunk_bp=500), show_progress=False)
    assert list(tmp_path.iterdir()) == []


def test_genome_without_usable_sequence(tmp_path, capsys):
    fasta = tmp_path / "gaps.fa"
    write_fasta(fasta, [("chrUn", "N" * 5000)])
    code, err = _run_cli(capsys, "tokenizer", "train", "--genome", fasta, "--out", tmp_path / "t",
                         "--vocab-size", 64, "--sample-bp", 1000, "--chunk-bp", 100)
    assert code == 2 and "no usable sequence" in err


def test_cli_stats(tmp_path, capsys, tokenizer_dir, real_data):
    code = main(["tokenizer", "stats", "--tokenizer", str(tokenizer_dir), "--genome",
                 str(real_data / "genomes" / "chr17.hg19.part.fa"), "--json", str(tmp_path / "s.json")])
    assert code == 0
    assert "bp/token" in capsys.readouterr().out
    assert json.loads((tmp_path / "s.json").read_text())["bp"] == 40_000
