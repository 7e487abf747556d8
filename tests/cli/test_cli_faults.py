"""Faults between processes and disks, through the CLI: two runs on one output, a full disk,
an unusable environment. Each ends in exit 0, or in exit 2 with one line, with no user result
lost and nothing partial left."""

from __future__ import annotations

import bz2
import contextlib
import lzma
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from helpers.cli import one_line
from helpers.deepsea import deepsea_rows, write_bundle

from genolong.classifier.directory import default_promoter_model
from genolong.cli.commands import predict as predict_command
from genolong.cli.commands import scan as scan_command
from genolong.cli.commands import variants as variants_command
from genolong.cli.main import main
from genolong.dna.sequence import read_fasta
from genolong.resources import sample_genome
from genolong.training.checkpoints import SafeCheckpointIO, read_checkpoint

VCF = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"




def _argv(command: str, tmp_path, genome, out) -> list[str]:
    if command == "predict-promoter":
        return ["predict-promoter", str(genome), "--out", str(out)]
    if command == "scan":
        return ["scan", "--genome", str(genome), "--out", str(out)]
    vcf = tmp_path / "v.vcf"
    vcf.write_text(VCF + "a\t11\t.\tA\tC\t.\t.\t.\n")
    return ["score-variants", "--vcf", str(vcf), "--genome", str(genome),
            "--model", str(default_promoter_model()), "--out", str(out)]


@pytest.mark.parametrize("command, module, function", [
    ("predict-promoter", predict_command, "run_promoter"),
    ("scan", scan_command, "run"),
    ("score-variants", variants_command, "run"),
])
def test_a_second_run_on_an_output_in_use_is_refused_naming_the_first(monkeypatch, tmp_path, capsys, small_genome,
                                                                      command, module, function):
    """The second of two score-variants (or scan) on one --out crashed with a traceback and left
    a stale .partial/ directory; now the first holds a lock on its output and the second stops
    before any work, naming the first's pid and host."""
    out = tmp_path / ("o.tsv.gz" if command == "score-variants" else "o.bedGraph" if command == "scan" else "o.tsv")
    argv = _argv(command, tmp_path, small_genome, out)
    seen = {}

    def first_run(args) -> int:
        seen["second"] = main(argv)
        seen["line"] = capsys.readouterr().err
        out.write_text("the first run's result\n")
        return 0

    monkeypatch.setattr(module, function, first_run)
    assert main(argv) == 0
    assert seen["second"] == 2
    lines = seen["line"].strip().splitlines()
    assert len(lines) == 1 and "in use by another genolong run" in lines[0], lines
    assert f"pid {os.getpid()} on {socket.gethostname()}" in lines[0]
    assert out.read_text() == "the first run's result\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_run_failing_late_never_removes_the_result_of_another(monkeypatch, tmp_path, capsys, small_genome):
    """A predict-promoter that fails on a bad record at the end of its FASTA removed, in its
    clean-up, the --out file another run on the same path had just finished with exit 0."""
    bad = tmp_path / "bad.fa"
    bad.write_text(small_genome.read_text() + ">c\nACGTQQ\n")
    out = tmp_path / "o.tsv"
    original = predict_command.run_promoter
    seen = {}

    def failing_late(args) -> int:
        if args.fasta == bad:  # the first run: the second starts while it is busy
            monkeypatch.setattr(predict_command, "run_promoter", original)
            seen["second"] = main(["predict-promoter", str(small_genome), "--out", str(out)])
            capsys.readouterr()
        return original(args)

    monkeypatch.setattr(predict_command, "run_promoter", failing_late)
    assert main(["predict-promoter", str(bad), "--out", str(out)]) == 2
    one_line(capsys, "bad.fa:6 (record 'c')")
    assert seen["second"] == 2 and not out.exists()
    assert main(["predict-promoter", str(small_genome), "--out", str(out)]) == 0  # once the first has ended
    rows = [line.split("\t") for line in out.read_text().splitlines() if not line.startswith("#")]
    assert [row[rows[0].index("id")] for row in rows[1:]] == ["a", "b"]
    assert not (tmp_path / ".o.tsv.lock").exists()


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(name, kib, free=...)``: a new directory holding a tmpfs of ``kib`` KiB, filled
    up to ``free`` KiB left; skipped where the test may not mount (it needs root)."""
    mounted = []

    def make(name: str, kib: int, *, free: int | None = None) -> Path:
        path = tmp_path / name
        path.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(path)],
                          capture_output=True).returncode:
            pytest.skip("mounting a small file system needs root")
        mounted.append(path)
        if free is not None:
            (path / "filler").write_bytes(bytes((kib - free) * 1024))
        return path

    yield make
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_checkpoints_are_written_beside_their_target_not_in_the_system_temporary_directory(monkeypatch, small_disk):
    """Lightning staged each checkpoint in the system temporary directory and moved it: a full
    /tmp failed the run although its output disk had room."""
    monkeypatch.setattr(tempfile, "tempdir", str(small_disk("tmp", 64, free=0)))
    target = small_disk("out", 1024) / "checkpoints" / "last.ckpt"
    SafeCheckpointIO().save_checkpoint({"state_dict": {"w": torch.arange(4096.0)}}, target)
    assert torch.equal(read_checkpoint(target)["state_dict"]["w"], torch.arange(4096.0))
    assert sorted(p.name for p in target.parent.iterdir()) == ["last.ckpt"]


@pytest.mark.parametrize("free", [0, 8])
def test_a_full_disk_is_one_line_and_leaves_nothing_partial(small_disk, capsys, real_data, free):
    """tokenizer train on a full disk: exit 1 and a traceback. Now exit 2, one line naming the
    output, the reason and the space left, and no temporary directory."""
    disk = small_disk("disk", 64, free=free)
    code = main(["tokenizer", "train", "--genome", str(real_data / "genomes" / "MT-human_NC_012920.1.fa"),
                 "--out", str(disk / "tok"), "--vocab-size", "64", "--sample-bp", "5000", "--chunk-bp", "500"])
    assert code == 2
    one_line(capsys, f"writing --out {disk / 'tok'}", "no space left on device", "MiB free there",
             "nothing")
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]


@pytest.mark.slow
def test_pretrain_on_a_full_disk_is_one_line_and_keeps_its_run_directory(small_disk, tmp_path, capsys):
    """pretrain hitting a full disk while writing a checkpoint: exit 1 and a 40-line traceback.
    Now exit 2 and one line; the run directory stays, for a rerun once there is room."""
    from helpers.training_runs import PRETRAIN, write_config

    from genolong.dna.tokenizer import TokenizerTrainConfig, train_tokenizer
    tokenizer = tmp_path / "tokenizer"
    train_tokenizer(sample_genome(), tokenizer, TokenizerTrainConfig(vocab_size=256, sample_bp=50_000),
                    show_progress=False)
    out = small_disk("disk", 300) / "run"
    code = main(["pretrain", "--genome", str(sample_genome()), "--tokenizer", str(tokenizer), "--config",
                 str(write_config(tmp_path / "micro.yaml", PRETRAIN)), "--out", str(out), "--accelerator", "cpu",
                 "--max-steps", "2"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "".join(err) and err[-1].startswith("genolong pretrain: error: writing --out"), err
    assert "no space left on device" in err[-1] and f"{out} kept" in err[-1]
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def _score(tmp_path, genome, vcf_text, *extra) -> int:
    vcf = tmp_path / "v.vcf"
    if not vcf.exists() or vcf.read_text() != VCF + vcf_text:  # the same file keeps its resume identity
        vcf.write_text(VCF + vcf_text)
    return main(["score-variants", "--vcf", str(vcf), "--genome", str(genome), "--model", str(default_promoter_model()),
                 "--out", str(tmp_path / "o.tsv"), *extra])


def test_variants_on_contigs_the_genome_lacks_are_skipped_and_counted(tmp_path, capsys, small_genome):
    """score-variants stopped the whole run at the first variant on a decoy, alt or unplaced
    contig; now such variants are skipped and counted like a REF mismatch (--missing-contig
    error stops, naming the line), and a VCF none of whose contigs is in the genome is one line
    naming both naming schemes."""
    ref = small_genome.read_text().splitlines()[1][149]
    alt = "C" if ref != "C" else "G"
    records = f"a\t150\t.\t{ref}\t{alt}\t.\t.\t.\nGL000192.1\t10\t.\tA\tC\t.\t.\t.\n"
    assert _score(tmp_path, small_genome, records) == 0
    assert '"skipped: contig not in the genome": 1' in (tmp_path / "o.tsv").read_text()
    assert "1 scored" in capsys.readouterr().err
    (tmp_path / "o.tsv").unlink()
    assert _score(tmp_path, small_genome, records, "--missing-contig", "error") == 2
    one_line(capsys, "v.vcf:4: contig 'GL000192.1' is not in", "--missing-contig skip")
    assert _score(tmp_path, small_genome, "NC_000001.11\t150\t.\tA\tC\t.\t.\t.\n") == 2
    one_line(capsys, "v.vcf: none of its contigs is in", "NC_000001.11", "the genome a, b")
    assert _score(tmp_path, small_genome, f"a\t150\t.\t{ref}\t{ref}\t.\t.\t.\n") == 2
    one_line(capsys, "v.vcf: no allele scored (1 skipped: ALT equals REF)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa", "v.vcf"]


def test_score_variants_does_not_resume_parts_scored_with_another_batch_size(monkeypatch, tmp_path, capsys, caplog,
                                                                               small_genome):
    """Scores depend on --batch-size in the 6th significant digit (float sums over other batch
    shapes), and a resumed run mixed the parts of two batch sizes: the batch size is now part
    of the resume identity."""
    from genolong.inference.variants.run import PartialRun
    monkeypatch.setattr(PartialRun, "remove", lambda self: None)  # keep the parts, as an interrupted run does
    ref = small_genome.read_text().splitlines()[1][149]
    records = f"a\t150\t.\t{ref}\t{'C' if ref != 'C' else 'G'}\t.\t.\t.\n"
    assert _score(tmp_path, small_genome, records, "--batch-size", "1") == 0
    (tmp_path / "o.tsv").unlink()
    with caplog.at_level("INFO", logger="genolong"):
        assert _score(tmp_path, small_genome, records, "--batch-size", "2") == 0
    assert "resuming" not in caplog.text
    with caplog.at_level("INFO", logger="genolong"):
        assert _score(tmp_path, small_genome, records, "--batch-size", "2") == 0
    assert "resuming with 1 chunks done" in caplog.text


def test_a_scan_with_other_settings_removes_the_earlier_work_directory(tmp_path, small_genome):
    """An interrupted scan's hidden work directory stayed beside the output forever after a
    rerun with other settings; the rerun now removes it (one with the same settings is resumed)."""
    out = tmp_path / "o.bedGraph"
    earlier = tmp_path / ".o.bedGraph.scan-0123456789ab"
    earlier.mkdir()
    (earlier / "00000.rank0of1.f32.tmp").write_bytes(bytes(8))
    assert main(["scan", "--genome", str(small_genome), "--out", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa", "o.bedGraph"]


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


@pytest.mark.slow
def test_sigterm_to_the_process_group_of_a_scan_with_workers_is_143_and_one_line(tmp_path):
    """timeout, SLURM and docker stop signal the whole process group: the scan's DataLoader
    workers died of it and the run ended with exit 1 and a 60-line traceback ("DataLoader worker
    is killed by signal: Terminated"). The workers now leave the signal to the main process."""
    out = tmp_path / "o.bedGraph"
    proc = subprocess.Popen([sys.executable, "-m", "genolong.cli.main", "scan", "--genome", str(sample_genome()), "--out",
                             str(out), "--stride", "10", "--workers", "2"],
                            start_new_session=True, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while len(_children(proc.pid)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)  # the workers are reading and tokenising
    os.killpg(proc.pid, signal.SIGTERM)
    err = proc.communicate(timeout=120)[1].strip().splitlines()
    assert proc.returncode == 143, err
    assert "Traceback" not in "\n".join(err) and err[-1].startswith("genolong scan: interrupted"), err
    assert not out.exists()


@pytest.fixture
def indexless_genome(tmp_path):
    """A FASTA without a .fai beside it: reading it builds the index in the cache."""
    path = tmp_path / "g.fa"
    path.write_text(">a\n" + "ACGT" * 50 + "\n")
    return path


def test_an_unusable_cache_directory_is_one_line(monkeypatch, tmp_path, capsys, indexless_genome):
    """GENOLONG_HOME pointing at a file (or a read-only directory, a full disk) was a traceback."""
    (tmp_path / "home").write_text("a file")
    monkeypatch.setenv("GENOLONG_HOME", str(tmp_path / "home"))
    assert main(["genome", "region", str(indexless_genome), "a:0-10"]) == 2
    one_line(capsys, f"the cache directory {tmp_path / 'home' / 'fai'} is unusable (Not a directory)", "GENOLONG_HOME")
    assert main(["data", "fetch", "deepsea", "--offline"]) == 2
    one_line(capsys, f"--dest {tmp_path / 'home' / 'data'}: {tmp_path / 'home'} is a file, not a directory")
    monkeypatch.delenv("GENOLONG_HOME")
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("no home"))))
    assert main(["genome", "region", str(indexless_genome), "a:0-10"]) == 2
    one_line(capsys, "HOME is unset; set GENOLONG_HOME")


def test_standard_output_problems_are_one_line_or_a_quiet_end(monkeypatch, tmp_path, capsys, indexless_genome):
    """`genolong genome region ... | head -c 10` was a BrokenPipeError traceback, `> /dev/full` a
    traceback, and with standard output closed the command exited 0 with its output gone."""
    monkeypatch.setenv("GENOLONG_HOME", str(tmp_path / "cache"))
    argv = ["genome", "region", str(indexless_genome), "a:0-200"]
    full = open("/dev/full", "w")  # noqa: SIM115 (closed below, where its unwritten buffer fails again)
    monkeypatch.setattr(sys, "stdout", full)
    assert main(argv) == 2
    with contextlib.suppress(OSError):
        full.close()
    one_line(capsys, "writing standard output: no space left on device")
    monkeypatch.setattr(sys, "stdout", None)
    assert main(argv) == 2
    one_line(capsys, "standard output is closed")
    read, write = os.pipe()
    os.close(read)  # the reader (head) has ended
    with os.fdopen(write, "w") as pipe:
        monkeypatch.setattr(sys, "stdout", pipe)
        assert main(argv) == 128 + signal.SIGPIPE
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_a_deleted_working_directory_is_one_line(tmp_path):
    """transformers could not even be imported (a FileNotFoundError traceback)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"import os, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); from genolong.cli.main import main; " \
             "sys.exit(main(['genome', 'region', 'g.fa', 'a:0-10']))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip() == ("genolong genome region: error: the working directory no longer exists; "
                                   "cd to an existing directory")


@pytest.mark.parametrize("encode", [
    pytest.param(bz2.compress, id="bzip2"),
    pytest.param(lzma.compress, id="xz"),
    pytest.param(lambda data: data.replace(b"\n", b"\r"), id="CR-only"),
    pytest.param(lambda data: data.replace(b"\n", b"\r", 2), id="mixed endings"),
])
def test_compressed_and_cr_only_fasta_read_as_the_plain_file(tmp_path, small_genome, encode):
    """A bzip2, xz or CR-only FASTA was read as text, one header line, or a decoding error."""
    other = tmp_path / "other.fa"
    other.write_bytes(encode(small_genome.read_bytes()))
    assert list(read_fasta(other)) == list(read_fasta(small_genome))


def test_fasta_inputs_that_cannot_be_read_name_the_reason(tmp_path, capsys, small_genome):
    """A zstd FASTA was 'a UTF-8 decoding error'; a CR-only genome was indexed as one header line
    and the error blamed the region; a bzip2 genome cannot be read at random."""
    zstd = tmp_path / "g.fa.zst"
    zstd.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(20))
    assert main(["predict-promoter", str(zstd), "--out", str(tmp_path / "o.tsv")]) == 2
    one_line(capsys, f"{zstd}: zstd-compressed, which genolong does not read", f"zstd -d {zstd}")
    cr = tmp_path / "cr.fa"
    cr.write_bytes(small_genome.read_bytes().replace(b"\n", b"\r"))
    assert main(["genome", "region", str(cr), "a:0-10"]) == 2
    one_line(capsys, f"{cr}: has CR-only (classic Mac) or mixed line endings", "genolong genome prepare")
    packed = tmp_path / "g.fa.bz2"
    packed.write_bytes(bz2.compress(small_genome.read_bytes()))
    assert main(["genome", "region", str(packed), "a:0-10"]) == 2
    one_line(capsys, f"{packed} is bzip2-compressed, not bgzip", "genolong genome prepare")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cr.fa", "g.fa", "g.fa.bz2", "g.fa.zst"]


def test_a_truncated_kmer_component_is_one_line(tmp_path, capsys, small_genome):
    """A truncated kmer_component.npz in a model directory was a BadZipFile traceback."""
    model = Path(shutil.copytree(default_promoter_model(), tmp_path / "model"))
    data = (model / "kmer_component.npz").read_bytes()
    (model / "kmer_component.npz").write_bytes(data[: len(data) // 2])
    assert main(["predict-promoter", str(small_genome), "--model", str(model), "--out", str(tmp_path / "o.tsv")]) == 2
    one_line(capsys, "kmer_component.npz: not a k-mer component (truncated or damaged")
    assert not (tmp_path / "o.tsv").exists()


def test_a_header_that_is_not_utf8_is_refused_not_altered(tmp_path, capsys, small_genome):
    """A header with non-UTF-8 bytes came out altered (r\\ufffd\\ufffdid) in the output's id column."""
    fasta = tmp_path / "latin1.fa"
    fasta.write_bytes(small_genome.read_bytes().replace(b">b", b">r\xe9\xe9id"))
    assert main(["predict-promoter", str(fasta), "--out", str(tmp_path / "o.tsv")]) == 2
    one_line(capsys, f"{fasta}:3: header is not UTF-8 text (byte 0xe9 at column 3)")
    assert not (tmp_path / "o.tsv").exists()


def test_chromatin_prepare_dropping_every_row_is_one_line(real_data, tmp_path, capsys):
    """chromatin prepare --unlocated drop with the wrong genome wrote an empty dataset, exit 0."""
    bundle = write_bundle(tmp_path / "mat", *deepsea_rows(real_data))
    (tmp_path / "other.fa").write_text(">chr1\n" + "ACGT" * 500 + "\n")
    assert main(["chromatin", "prepare", "--mat-dir", str(bundle), "--out", str(tmp_path / "o"),
                 "--genome", str(tmp_path / "other.fa"), "--unlocated", "drop"]) == 2
    one_line(capsys, "--unlocated drop: none of the", "rows is located exactly once in", "--unlocated keep")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mat", "other.fa"]


def test_a_corpus_rebuilt_from_another_genome_holds_only_its_own_shards(tmp_path, capsys):
    """Rebuilding a corpus into the same --out from another genome left the old genome's shard
    files there, unlisted."""
    from helpers.classify import tiny_tokenizer
    tokenizer = tiny_tokenizer(tmp_path / "tokenizer")
    config = tmp_path / "c.yaml"
    config.write_text("passes: 1\nmax_start_offset: 10\nsentence_bp: [50, 100]\nsentences_per_document: [5, 10]\n"
                      "valid_chromosomes: []\ntest_chromosomes: []\nvalid_tail_fraction: 0.2\ntest_tail_fraction: 0.2\n")
    out = tmp_path / "corpus"
    for name in ("old", "new"):
        (tmp_path / f"{name}.fa").write_text(f">{name}\n{small_sequence(name)}\n")
        assert main(["corpus", "build", "--genome", str(tmp_path / f"{name}.fa"), "--tokenizer", str(tokenizer),
                     "--out", str(out), "--config", str(config)]) == 0
    shards = {p.name.split(".")[0] for p in out.glob("*/[0-9]*")}
    assert shards == {"0000_new", "0001_new_2400-3200", "0002_new_3200-4000"}, shards


def small_sequence(name: str) -> str:
    """4 kb of the shipped sample genome, another stretch for each name."""
    sequence = next(iter(read_fasta(sample_genome()))).sequence
    start = 20000 if name == "old" else 30000
    return sequence[start:start + 4000]


def test_data_status_warns_once_about_an_unreadable_manifest(tmp_path, caplog):
    """The warning about an unreadable cache manifest was repeated four times."""
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "manifest.json").write_text("{broken")
    with caplog.at_level("WARNING"):
        assert main(["data", "status", "--dest", str(tmp_path / "cache")]) == 0
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "ignoring unreadable" in caplog.records[0].message and len(caplog.records) == 1


@pytest.mark.slow
def test_sigterm_to_the_process_group_of_score_variants_is_143_and_the_rerun_resumes(tmp_path, small_genome):
    """What timeout, SLURM and docker stop send, during score-variants: exit 143 and one line,
    the finished chunks kept; the same command then continues to exit 0."""
    sequence = "".join(small_genome.read_text().splitlines()[1::2])
    records = "".join(f"{'a' if i < 300 else 'b'}\t{i % 300 + 1}\t.\t{base}\t{'C' if base != 'C' else 'G'}\t.\t.\t.\n"
                      for i, base in enumerate(sequence))
    (tmp_path / "v.vcf").write_text(VCF + records)
    argv = [sys.executable, "-m", "genolong.cli.main", "score-variants", "--vcf", str(tmp_path / "v.vcf"), "--genome",
            str(small_genome), "--model", str(default_promoter_model()), "--out", str(tmp_path / "o.tsv"),
            "--chunk-size", "16"]
    proc = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.PIPE, text=True)
    partial = tmp_path / ".o.tsv.partial"
    deadline = time.monotonic() + 300
    while not list(partial.glob("part-*.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGTERM)
    err = proc.communicate(timeout=120)[1].strip().splitlines()
    assert proc.returncode == 143, err
    assert "Traceback" not in "\n".join(err) and err[-1].startswith("genolong score-variants: interrupted"), err
    assert list(partial.glob("part-*.json")) and not (tmp_path / "o.tsv").exists()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "resuming with" in done.stderr, done.stderr[-2000:]
    assert f"{len(sequence)} alleles" in done.stderr and not partial.exists()


def test_two_data_fetch_runs_share_the_cache(monkeypatch, tmp_path, capsys):
    """A shared cache is not locked as one run's output: concurrent fetches wait for each other
    on the cache's own locks (file by file), as `data fetch --help` says."""
    from genolong.cli.commands import data as data_command
    argv = ["data", "fetch", "deepsea", "--offline", "--dest", str(tmp_path / "cache")]
    seen, original = {}, data_command.run_fetch

    def first_fetch(args) -> int:
        monkeypatch.setattr(data_command, "run_fetch", original)
        seen["code"] = main(argv)
        seen["err"] = capsys.readouterr().err
        return 0

    monkeypatch.setattr(data_command, "run_fetch", first_fetch)
    assert main(argv) == 0
    assert "in use by another genolong run" not in seen["err"] and "offline" in seen["err"], seen


@pytest.mark.parametrize("records, reason", [
    pytest.param(">a\nACGTACGTAC\n>b\nACGT\n", "shorter than the model's window", id="chromosomes shorter than a window"),
    pytest.param(">a\n" + "N" * 600 + "\n", "more than 0.5 N (--max-n-fraction)", id="all N"),
])
def test_a_scan_without_a_window_to_score_is_one_line_and_writes_nothing(tmp_path, capsys, records, reason):
    """A scan of chromosomes shorter than the model's window, or all N, wrote empty tracks with exit 0."""
    genome = tmp_path / "g.fa"
    genome.write_text(records)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["scan", "--genome", str(genome), "--out", str(tmp_path / "o.bedGraph"),
                 "--skipped", str(tmp_path / "s.bed")]) == 2
    line = one_line(capsys)
    assert "no window" in line and reason in line and "nothing written" in line, line
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".fai") == before


@pytest.mark.parametrize("companion", ["out.fa.fai", "out.fa.chromosomes.tsv"])
def test_genome_prepare_keeps_the_output_policy_for_the_files_beside_its_out(tmp_path, capsys, small_genome, companion):
    """genome prepare checked only --out: an index or table path that was a directory ended in a
    traceback, a FIFO was replaced. They are outputs like --out now: refused in one line before any
    work; an existing --out file is replaced, as every command replaces an output file."""
    out = tmp_path / "out.fa"
    out.write_text("an older copy\n")
    (tmp_path / companion).mkdir()
    argv = ["genome", "prepare", str(small_genome), "--out", str(out), "--plain"]
    assert main(argv) == 2
    one_line(capsys, f"{tmp_path / companion}: is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["g.fa", "out.fa", companion])
    assert out.read_text() == "an older copy\n"
    (tmp_path / companion).rmdir()
    os.mkfifo(tmp_path / companion)
    assert main(argv) == 2
    one_line(capsys, "not a regular file (a FIFO")
    assert stat.S_ISFIFO((tmp_path / companion).lstat().st_mode)
    (tmp_path / companion).unlink()
    assert main(argv) == 0
    assert [r.sequence for r in read_fasta(out)] == [r.sequence for r in read_fasta(small_genome)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa", "out.fa", "out.fa.chromosomes.tsv", "out.fa.fai"]


def test_an_invalid_character_met_by_random_access_names_file_line_and_record(tmp_path, capsys, small_genome):
    """genome region, scan (its DataLoader worker) and score-variants read the genome at random: an
    invalid character was "invalid character 'Q' at position 4" (no file, no record) or a traceback."""
    lines = small_genome.read_text().splitlines()
    lines[3] = lines[3][:40] + "Q" + lines[3][41:]  # record b, its sequence line
    genome = tmp_path / "q.fa"
    genome.write_text("\n".join(lines) + "\n")
    where = f"{genome}:4 (record 'b'): invalid character 'Q' (column 41)"
    assert main(["genome", "region", str(genome), "b:0-60"]) == 2
    one_line(capsys, where)
    assert main(["scan", "--genome", str(genome), "--out", str(tmp_path / "o.bedGraph")]) == 2
    one_line(capsys, where)
    (tmp_path / "v.vcf").write_text(VCF + f"b\t30\t.\t{lines[3][29]}\tT\t.\t.\t.\n")
    assert main(["score-variants", "--vcf", str(tmp_path / "v.vcf"), "--genome", str(genome), "--model",
                 str(default_promoter_model()), "--out", str(tmp_path / "o.tsv")]) == 2
    one_line(capsys, where)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".fai") == ["g.fa", "q.fa", "v.vcf"]


def test_convert_on_a_full_disk_is_one_line_and_leaves_nothing(small_disk, capsys, real_data, tmp_path):
    """convert on a full disk: exit 1 and a traceback; now the one line of every full disk."""
    from test_convert_cli import gena_bert_source

    gena_bert_source(real_data, tmp_path / "src")
    disk = small_disk("disk", 64, free=8)
    assert main(["convert", str(tmp_path / "src"), "--out", str(disk / "model")]) == 2
    one_line(capsys, f"writing --out {disk / 'model'}", "no space left on device", "nothing")
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]
