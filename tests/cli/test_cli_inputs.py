"""Hostile inputs through the CLI: invalid option values, FASTA headers with TABs, corrupt gzip,
colliding record names in a corpus, damaged prepared data, unusable datasets and bad downloads.
Each ends in exit 0 with correct output or exit 2 with one line naming the file, record or
option, and leaves no partial output."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import zlib

import numpy as np
import pytest
from helpers.classify import random_promoter_model
from helpers.cli import one_line
from helpers.deepsea import deepsea_rows, write_bundle
from helpers.http_server import FixtureServer

from genolong.cli.main import main
from genolong.core.errors import InputError
from genolong.datasets.corpus import Corpus
from genolong.dna.sequence import write_fasta
from genolong.prep.cache import DataCache

BED = "chr1\t894625\t894685\tNOC2L_1\t900\t-\t894635\t894636\n"
ERROR_PAGE = b"<html><body>Service unavailable</body></html>\n"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A tiny tokenizer, with a random 100-bp promoter model over it beside it (``../model``)."""
    return random_promoter_model(tmp_path_factory, window_bp=100).parent / "tokenizer"


# -- option values ----------------------------------------------------------------------------
@pytest.mark.parametrize("argv, needle", [
    (["predict-promoter", "IN", "--stride", "0"], "--stride: must be a positive integer, got '0'"),
    (["predict-promoter", "IN", "--min-length", "0"], "--min-length: must be a positive integer"),
    (["chromatin", "predict", "IN", "--model", "M", "--batch-size", "-1"], "--batch-size: must be a positive integer"),
    (["chromatin", "prepare", "--mat-dir", "D", "--out", "O", "--context", "0"], "--context: must be a positive"),
    (["data", "fetch", "epdnew", "--timeout", "-1"], "--timeout: must be a positive number, got '-1'"),
    (["data", "fetch", "epdnew", "--retries", "-3"], "--retries: must be an integer >= 0, got '-3'"),
    (["data", "fetch", "epdnew", "--timeout", "nan"], "--timeout: expected a finite number"),
    (["tokenizer", "train", "--out", "O", "--min-frequency", "-3"], "--min-frequency: must be an integer >= 0"),
    (["tokenizer", "train", "--out", "O", "--vocab-size", "many"], "--vocab-size: expected an integer"),
    (["corpus", "build", "--genome", "G", "--tokenizer", "T", "--out", "O", "--valid-tail-fraction", "1.5"],
     "--valid-tail-fraction: must be a fraction in [0, 1]"),
    (["promoter", "baseline", "--data", "D", "--k-min", "0"], "--k-min: must be a positive integer"),
    (["genome", "prepare", "IN", "--line-width", "0"], "--line-width: must be a positive integer"),
])
def test_invalid_option_values_are_refused_in_one_line(tmp_path, capsys, argv, needle):
    argv = [str(tmp_path / a) if a in ("IN", "D", "O", "G", "T", "M") else a for a in argv]
    assert main(argv) == 2
    one_line(capsys, needle)
    assert list(tmp_path.iterdir()) == []


def test_tokenizer_region_past_the_record_end_is_refused(tmp_path, capsys):
    genome = tmp_path / "g.fa"
    write_fasta(genome, [("chrA", "ACGT" * 500)])
    out = tmp_path / "tok"
    assert main(["tokenizer", "train", "--genome", str(genome), "--out", str(out), "--vocab-size", "64",
                 "--sample-bp", "2000", "--region", "chrA:1000-5000"]) == 2
    one_line(capsys, "g.fa", "chrA:1000-5000 extends past the record's end (2,000 bp)", "chrA")
    assert not out.exists()


# -- FASTA headers and gzip -------------------------------------------------------------------
def test_a_tab_in_a_header_never_reaches_an_output_column(tokenizer_dir, tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">rec1\tdescription with\ttabs\n" + "ACGT" * 60 + "\n>rec2 plain words\n" + "TTGCA" * 40 + "\n")
    out, bed = tmp_path / "p.tsv", tmp_path / "p.bed"
    assert main(["predict-promoter", str(fasta), "--model", str(tokenizer_dir.parent / "model"), "--out", str(out),
                 "--bed", str(bed)]) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines() if not line.startswith("#")]
    assert {len(row) for row in rows} == {len(rows[0])} and [row[1] for row in rows[1:]] == ["rec1", "rec2"]
    assert all(line.split("\t")[0] in ("rec1", "rec2") for line in bed.read_text().splitlines())


def test_genome_prepare_plain_writes_a_fai_that_fetch_reads(tmp_path, capsys):
    fasta = tmp_path / "g.fa"
    fasta.write_text(">chrA\tsome\tdescription\nACGTACGTAC\nGGCC\n>chrB x\nTTTT\n")
    out = tmp_path / "prepared.fa"
    assert main(["genome", "prepare", str(fasta), "--plain", "--out", str(out)]) == 0
    assert [line.split("\t")[0] for line in (tmp_path / "prepared.fa.fai").read_text().splitlines()] == ["chrA", "chrB"]
    capsys.readouterr()
    assert main(["genome", "region", str(out), "chrA:2-8"]) == 0
    assert capsys.readouterr().out.splitlines() == [">chrA:2-8(+)", "GTACGT"]


def corrupt_deflate(text: bytes) -> bytes:
    """A gzip file with an intact header whose deflate stream makes zlib fail (not a CRC error)."""
    data = gzip.compress(text, mtime=0)
    for offset in range(10, len(data) - 8):
        bad = bytearray(data)
        bad[offset] ^= 0xFF
        try:
            gzip.decompress(bytes(bad))
        except zlib.error:
            return bytes(bad)
        except (OSError, EOFError):
            continue
    raise AssertionError("no corruption gives a zlib.error")


@pytest.mark.parametrize("argv", [
    ["genome", "prepare", "IN", "--out", "OUT"],
    ["tokenizer", "train", "--genome", "IN", "--out", "OUT", "--vocab-size", "64", "--sample-bp", "2000"],
    ["predict-promoter", "IN", "--out", "OUT"],
])
def test_a_corrupt_gzip_stream_is_one_line(tmp_path, capsys, argv):
    genome = tmp_path / "g.fa.gz"
    genome.write_bytes(corrupt_deflate(b">chrA\n" + b"ACGTTGCA" * 5000 + b"\n"))
    out = tmp_path / "out"
    assert main([str(genome) if a == "IN" else str(out) if a == "OUT" else a for a in argv]) == 2
    one_line(capsys, "g.fa.gz", "cannot read", "truncated or corrupt")
    assert not out.exists()


def edit_manifest(directory, name, change):
    manifest = json.loads((directory / name).read_text())
    change(manifest)
    (directory / name).write_text(json.dumps(manifest))


# -- the corpus -------------------------------------------------------------------------------
CORPUS_YAML = ("passes: 1\nmax_start_offset: 10\nsentence_bp: [50, 100]\nsentences_per_document: [5, 10]\n"
               "valid_chromosomes: []\ntest_chromosomes: []\nvalid_tail_fraction: 0.2\ntest_tail_fraction: 0.2\n")


@pytest.fixture(scope="module")
def colliding_corpus(tokenizer_dir, tmp_path_factory):
    """A corpus of records `a/b` and `a_b`, whose sanitised names are equal."""
    work = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    records = {name: "".join(rng.choice(list("ACGT"), 3000)) for name in ("a/b", "a_b")}
    write_fasta(work / "g.fa", list(records.items()))
    (work / "c.yaml").write_text(CORPUS_YAML)
    assert main(["corpus", "build", "--genome", str(work / "g.fa"), "--tokenizer", str(tokenizer_dir),
                 "--out", str(work / "corpus"), "--config", str(work / "c.yaml")]) == 0
    return work / "corpus", records


def test_records_whose_names_sanitise_alike_keep_their_own_shards(colliding_corpus, tokenizer_dir):
    from genolong.dna.tokenizer import load_tokenizer

    corpus_dir, records = colliding_corpus
    backend = load_tokenizer(tokenizer_dir).backend_tokenizer
    (first, second) = Corpus(corpus_dir).shards("train")
    assert (first.chrom, second.chrom) == ("a/b", "a_b")
    for shard in (first, second):
        start, end = shard.sentences[shard.documents[0, 0]], shard.sentences[shard.documents[0, 1]]
        text = backend.decode(shard.tokens[start:end].tolist())
        bp = int(shard.documents[0, 3])
        assert text == records[shard.chrom][bp:bp + len(text)] and len(text) > 100
    assert len(list((corpus_dir / "train").glob("*.tokens.u16"))) == 2


def test_a_legacy_corpus_with_colliding_shard_names_is_refused(colliding_corpus, tmp_path, capsys):
    legacy = shutil.copytree(colliding_corpus[0], tmp_path / "legacy")
    manifest = json.loads((legacy / "corpus.json").read_text())
    for shard in manifest["shards"]:
        shard.pop("stem")
    (legacy / "corpus.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="older genolong whose shard files collide"):
        Corpus(legacy)


@pytest.mark.parametrize("damage, needle", [
    (lambda c: (c / "corpus.json").write_text("{broken"), "corpus.json: invalid JSON"),
    (lambda c: (c / "corpus.json").write_text('{"format": "something/1"}'), "not a genolong corpus manifest"),
    (lambda c: (c / "corpus.json").write_text("[1, 2]"), "not a genolong corpus manifest"),
    (lambda c: [p.write_bytes(p.read_bytes()[:10]) for p in (c / "train").glob("*.tokens.u16")],
     ".tokens.u16: missing or truncated"),
    (lambda c: edit_manifest(c, "corpus.json", lambda m: m["shards"][0].update(stem="../../../etc/x")),
     "would lie outside the corpus directory"),
    (lambda c: edit_manifest(c, "corpus.json", lambda m: m["shards"][0].update(split="../..")),
     "would lie outside the corpus directory"),
])
def test_a_damaged_corpus_is_refused_naming_the_file(colliding_corpus, tmp_path, damage, needle):
    corpus = shutil.copytree(colliding_corpus[0], tmp_path / "corpus")
    damage(corpus)
    with pytest.raises(InputError, match=re.escape(needle)):
        Corpus(corpus).shards("train")


def test_corpus_build_into_a_corpus_with_a_broken_manifest_is_one_line(colliding_corpus, tokenizer_dir, tmp_path,
                                                                      capsys):
    corpus = shutil.copytree(colliding_corpus[0], tmp_path / "corpus")
    (corpus / "corpus.json").write_text("{broken")
    (tmp_path / "c.yaml").write_text(CORPUS_YAML)
    assert main(["corpus", "build", "--genome", str(colliding_corpus[0].parent / "g.fa"), "--tokenizer",
                 str(tokenizer_dir), "--out", str(corpus), "--config", str(tmp_path / "c.yaml")]) == 2
    one_line(capsys, "corpus.json: invalid JSON")
    assert (corpus / "corpus.json").read_text() == "{broken"


def test_a_foreign_shard_marker_is_rebuilt_not_trusted(colliding_corpus, tokenizer_dir, tmp_path):
    corpus = shutil.copytree(colliding_corpus[0], tmp_path / "corpus")
    (stem,) = [s["stem"] for s in json.loads((corpus / "corpus.json").read_text())["shards"]
               if (s["chrom"], s["split"]) == ("a_b", "train")]
    marker = corpus / "train" / f"{stem}.json"
    marker.write_text('{"unrelated": true}')
    (tmp_path / "c.yaml").write_text(CORPUS_YAML)
    assert main(["corpus", "build", "--genome", str(colliding_corpus[0].parent / "g.fa"), "--tokenizer",
                 str(tokenizer_dir), "--out", str(corpus), "--config", str(tmp_path / "c.yaml")]) == 0
    assert json.loads(marker.read_text())["chrom"] == "a_b"


def test_a_corpus_without_validation_documents_is_refused(tokenizer_dir, tmp_path, capsys):
    write_fasta(tmp_path / "g.fa", [("chr1", "ACGT" * 500)])
    (tmp_path / "c.yaml").write_text(CORPUS_YAML.replace("valid_tail_fraction: 0.2", "valid_tail_fraction: 0.0"))
    assert main(["corpus", "build", "--genome", str(tmp_path / "g.fa"), "--tokenizer", str(tokenizer_dir),
                 "--out", str(tmp_path / "corpus"), "--config", str(tmp_path / "c.yaml")]) == 2
    one_line(capsys, "g.fa", "no valid documents", "--valid-tail-fraction")
    assert not (tmp_path / "corpus" / "corpus.json").exists()


# -- promoter datasets ------------------------------------------------------------------------
def promoter_dataset(tmp_path, positives, negatives):
    write_fasta(tmp_path / "pos.fa", positives)
    write_fasta(tmp_path / "neg.fa", negatives)
    return ["promoter", "prepare", "--fasta", str(tmp_path / "pos.fa"), "--negatives", "fasta",
            "--negative-fasta", str(tmp_path / "neg.fa"), "--out", str(tmp_path / "data")]


def test_duplicate_inputs_leaving_a_split_without_a_label_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(1)
    same = "".join(rng.choice(list("ACGT"), 60))
    negatives = [(f"n{i}", "".join(rng.choice(list("ACGT"), 60))) for i in range(30)]
    assert main(promoter_dataset(tmp_path, [(f"p{i}", same) for i in range(30)], negatives)) == 2
    one_line(capsys, "splits without promoters or without non-promoters", "duplicate")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("edit, needle", [
    (lambda seq: "QQQ" + seq[3:], "invalid character 'Q'"),
    (lambda seq: seq[:-5], "sequence of 55 bp; the dataset's are 60 bp"),
])
def test_baseline_refuses_a_damaged_dataset_row(tmp_path, capsys, edit, needle):
    rng = np.random.default_rng(2)
    rows = [[(f"{kind}{i}", "".join(rng.choice(list("ACGT"), 60))) for i in range(30)] for kind in "pn"]
    assert main(promoter_dataset(tmp_path, *rows)) == 0
    train = tmp_path / "data" / "train.tsv"
    lines = train.read_text().splitlines()
    fields = lines[3].split("\t")
    fields[6] = edit(fields[6])
    lines[3] = "\t".join(fields)
    train.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["promoter", "baseline", "--data", str(tmp_path / "data")]) == 2
    one_line(capsys, f"{train}:4", f"record {fields[0]!r}", needle)
    assert not (tmp_path / "data" / "kmer_baseline.json").exists()


# -- prepared chromatin data ------------------------------------------------------------------
@pytest.fixture(scope="module")
def prepared(real_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("chromatin")
    bundle = write_bundle(work / "bundle", *deepsea_rows(real_data))
    assert main(["chromatin", "prepare", "--mat-dir", str(bundle), "--out", str(work / "prepared")]) == 0
    return work


def finetune_chromatin(data, tmp_path) -> int:
    return main(["chromatin", "finetune", "--data", str(data), "--out", str(tmp_path / "run")])


def test_a_truncated_mat_file_is_one_line(prepared, tmp_path, capsys):
    bundle = shutil.copytree(prepared / "bundle", tmp_path / "bundle")
    data = (bundle / "train.mat").read_bytes()
    (bundle / "train.mat").write_bytes(data[: len(data) // 2])
    assert main(["chromatin", "prepare", "--mat-dir", str(bundle), "--out", str(tmp_path / "out")]) == 2
    one_line(capsys, "train.mat", "unreadable HDF5", "truncated or damaged")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage, needle", [
    (lambda d: (d / "manifest.json").write_text("{"), "manifest.json: invalid JSON"),
    (lambda d: (d / "manifest.json").write_text('{"format": "genolong.chromatin/1"}'), "malformed manifest"),
    (lambda d: edit_manifest(d, "manifest.json", lambda m: m["splits"]["test"]["files"].update(sequences="../other/test.sequences.npy")),
     "lies outside the dataset directory"),
    (lambda d: edit_manifest(d, "manifest.json", lambda m: m["splits"]["test"]["files"].update(sequences="/etc/passwd")),
     "lies outside the dataset directory"),
    (lambda d: (d / "train.labels.npy").write_bytes((d / "train.labels.npy").read_bytes()[:300]),
     "truncated or not a .npy array"),
    (lambda d: (d / "valid.sequences.npy").unlink(), "missing from the prepared dataset"),
])
def test_a_damaged_prepared_directory_is_one_line(prepared, tmp_path, capsys, damage, needle):
    data = shutil.copytree(prepared / "prepared", tmp_path / "prepared")
    (tmp_path / "other").mkdir()
    shutil.copy(data / "test.sequences.npy", tmp_path / "other" / "test.sequences.npy")
    damage(data)
    assert finetune_chromatin(data, tmp_path) == 2
    one_line(capsys, needle)
    assert not (tmp_path / "run" / "model").exists()


# -- downloads --------------------------------------------------------------------------------
@pytest.fixture
def server():
    with FixtureServer(files={"good/Hs.bed": BED.encode(), "bad/Hs.bed": ERROR_PAGE}) as running:
        yield running


def test_a_download_that_fails_preparation_is_set_aside_and_fetched_again(server, tmp_path, capsys):
    dest = tmp_path / "cache"  # a cache in use (a new one would be removed whole after the error)
    DataCache(dest).fetch(server.url("good/Hs.bed"), "other/x.bed", timeout=5.0, progress=False)
    assert main(["data", "fetch", "epdnew", "--dest", str(dest), "--url", server.url("bad/Hs.bed")]) == 2
    one_line(capsys, "not a BED file", "moved to Hs_EPDnew_006_hg19.bed.rejected", "run the command again")
    assert (dest / "epdnew" / "Hs_EPDnew_006_hg19.bed.rejected").read_bytes() == ERROR_PAGE
    assert not (dest / "epdnew" / "Hs_EPDnew_006_hg19.bed").exists()
    assert main(["data", "fetch", "epdnew", "--dest", str(dest), "--url", server.url("good/Hs.bed")]) == 0
    assert (dest / "epdnew" / "Hs_EPDnew_006_hg19.bed").read_text() == BED


def test_a_cached_file_that_no_longer_verifies_is_downloaded_again(server, tmp_path):
    cache = DataCache(tmp_path)
    options = {"timeout": 5.0, "backoff": 0.0, "progress": False}
    cache.fetch(server.url("good/Hs.bed"), "epdnew/x.bed", **options)
    path = tmp_path / "epdnew" / "x.bed"
    stat = path.stat()
    path.write_bytes(BED.replace("NOC2L", "XXXXX").encode())  # same size, same mtime: bit rot
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    cache.fetch(server.url("good/Hs.bed"), "epdnew/x.bed", **options)
    assert path.read_text() == BED and len(server.requests("good/Hs.bed")) == 2
    assert (tmp_path / "epdnew" / "x.bed.rejected").exists()
