"""Hostile inputs to the newer commands (scan, score-variants, explain, promoter prepare-sources),
through the CLI: each ends in exit 0 or in exit 2 with one line naming the file, line or setting,
with no partial output and no user file touched."""

from __future__ import annotations

import gzip
import shutil

import pyfaidx
import pytest
import torch
from helpers.cli import one_line
from helpers.variants import write_vcf

from genolong.classifier.directory import default_promoter_model
from genolong.cli.main import main
from genolong.inference.variants.scoring import ClassifierEffects
from genolong.resources import sample_genome

HEADER = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"




@pytest.mark.parametrize("record, needle", [
    ("a\tx\t.\tA\tC\t.\t.\t.", "v.vcf:3: position 'x' is not a 1-based integer"),
    ("a\t-3\t.\tA\tC\t.\t.\t.", "v.vcf:3: position '-3' is not a 1-based integer"),
    ("a\t10\tA", "v.vcf:3: expected 8 or more tab-separated VCF columns, got 3"),
])
def test_a_malformed_vcf_record_without_contig_lines_is_one_line_not_a_crash(tmp_path, capsys, small_genome,
                                                                             record, needle):
    """htslib crashed cyvcf2 (a segmentation fault) on these records when the header declares no
    contigs: each text line is now checked before htslib parses it."""
    vcf = tmp_path / "v.vcf"
    vcf.write_text(HEADER + record + "\n")
    out = tmp_path / "o.tsv"
    code = main(["score-variants", "--vcf", str(vcf), "--genome", str(small_genome),
                 "--model", str(default_promoter_model()), "--out", str(out)])
    assert code == 2
    one_line(capsys, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa", "v.vcf"]


def test_a_truncated_gzip_vcf_is_one_line(tmp_path, capsys, small_genome):
    vcf = tmp_path / "v.vcf.gz"
    vcf.write_bytes(gzip.compress((HEADER + "a\t11\t.\tA\tC\t.\t.\t.\n").encode())[:50])
    code = main(["score-variants", "--vcf", str(vcf), "--genome", str(small_genome),
                 "--model", str(default_promoter_model()), "--out", str(tmp_path / "o.tsv")])
    assert code == 2
    one_line(capsys, "v.vcf.gz", "truncated or corrupt")
    assert not (tmp_path / "o.tsv").exists()


@pytest.mark.parametrize("content, needle", [
    (bytes(range(256)), "not a text BED file"),
    ("a\t-5\t100\n", "r.bed:1: region a:-5-100 is outside a"),
    ("a\t200\t100\n", "r.bed:1: region a:200-100 is outside a"),
    ("track name=x\nbrowser position a\n#c\na\t100\n", "r.bed:4: not a BED line"),
    ("zz\t0\t10\n", "r.bed:1: chromosome 'zz' is not in the genome"),
    ("track name=x\n", "r.bed: no regions"),
])
@pytest.mark.parametrize("command", ["scan", "explain"])
def test_scan_and_explain_share_one_checked_bed_reader(tmp_path, capsys, small_genome, content, needle, command):
    """A binary BED was a UnicodeDecodeError traceback in both; explain accepted reversed and
    negative regions. Both read BED through ``genolong.inference.bed``."""
    bed = tmp_path / "r.bed"
    bed.write_bytes(content if isinstance(content, bytes) else content.encode())
    if command == "scan":
        argv = ["scan", "--genome", str(small_genome), "--regions", str(bed), "--out", str(tmp_path / "o.bedGraph")]
    else:
        argv = ["explain", "--model", str(default_promoter_model()), "--genome", str(small_genome),
                "--regions", str(bed), "--out", str(tmp_path / "ex"), "--gradients", "none", "--ism-window", "5"]
    assert main(argv) == 2
    one_line(capsys, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa", "r.bed"]


@pytest.mark.parametrize("options, needle", [
    (["--devices", "0"], "argument --devices: must be a positive integer"),
    (["--accelerator", "tpu"], "unknown accelerator 'tpu'"),
    (["--accelerator", "gpu"], "accelerator 'gpu': no CUDA GPU is available"),
])
def test_scan_device_options_are_checked_like_training_ones(tmp_path, capsys, small_genome, options, needle):
    """Lightning's MisconfigurationException was a traceback; scan now uses the training runs'
    shared device checks, before loading anything."""
    if options[-1] == "gpu" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "o.bedGraph"
    assert main(["scan", "--genome", str(small_genome), "--out", str(out), *options]) == 2
    one_line(capsys, needle)
    assert not out.exists()


@pytest.mark.parametrize("command", ["scan", "predict-promoter", "pretrain"])
def test_several_nodes_without_a_multi_node_launch_are_refused_not_awaited(tmp_path, capsys, small_genome,
                                                                           monkeypatch, command):
    """``--num-nodes 2`` on one machine waited forever for a second node (and ignored SIGTERM)."""
    for name in ("SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "LSB_JOBID", "NODE_RANK"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / ("run" if command == "pretrain" else "o.tsv")
    arguments = {
        "scan": ["scan", "--genome", str(small_genome), "--out", str(tmp_path / "o.bedGraph")],
        "predict-promoter": ["predict-promoter", str(small_genome), "--out", str(out), "--devices", "2"],
        "pretrain": ["pretrain", "--genome", str(small_genome), "--out", str(out)],
    }[command]
    assert main([*arguments, "--num-nodes", "2"]) == 2
    one_line(capsys, "--num-nodes 2: no multi-node launch found")
    assert not out.exists() and not (tmp_path / "o.bedGraph").exists()


def test_prepare_sources_keeps_the_output_policy(tmp_path, capsys):
    """prepare-sources declared no path roles: ``--overwrite`` could replace a user's directory."""
    spec = tmp_path / "s.yaml"
    spec.write_text("seed: 1\n")
    out = tmp_path / "d"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    assert main(["promoter", "prepare-sources", "--spec", str(spec), "--out", str(out), "--overwrite"]) == 2
    one_line(capsys, "holds files genolong did not write (such as mine.txt)")
    assert [p.name for p in out.iterdir()] == ["mine.txt"] and (out / "mine.txt").read_text() == "keep"


@pytest.mark.parametrize("content, needle", [
    ("", "the config is empty"),
    ("a: [\n", "invalid YAML"),
    ("- 1\n- 2\n", "a config must be a mapping"),
    (bytes(range(256)), "cannot read the config"),
])
def test_prepare_sources_reads_its_spec_with_the_shared_yaml_reader(tmp_path, capsys, content, needle):
    """An empty, invalid, list or binary spec was a TypeError/YAMLError/AttributeError traceback."""
    spec = tmp_path / "s.yaml"
    spec.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["promoter", "prepare-sources", "--spec", str(spec), "--out", str(tmp_path / "d")]) == 2
    one_line(capsys, "s.yaml", needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_a_stale_fai_beside_the_genome_is_refused_not_trusted(tmp_path, capsys, small_genome):
    """A ``.fai`` of an older version of the FASTA (one 50-bp record) made scan write an empty
    track with exit 0; an index that does not describe its file is now refused."""
    (tmp_path / "g.fa.fai").write_text("a\t50\t3\t300\t301\n")
    out = tmp_path / "o.bedGraph"
    assert main(["scan", "--genome", str(small_genome), "--out", str(out), "--stride", "100"]) == 2
    one_line(capsys, "g.fa.fai does not match the file", "delete")
    assert not out.exists() and (tmp_path / "g.fa.fai").read_text() == "a\t50\t3\t300\t301\n"


def test_a_fai_that_matches_its_genome_is_used(tmp_path, small_genome):
    pyfaidx.Faidx(str(small_genome)).close()  # writes g.fa.fai beside it
    out = tmp_path / "o.bedGraph"
    assert main(["scan", "--genome", str(small_genome), "--out", str(out), "--stride", "100"]) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert {row[0] for row in rows} == {"a", "b"}


def test_a_spec_with_the_wrong_type_of_section_names_the_expected_mapping(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("groups:\n  g1: chr1\n")
    assert main(["promoter", "prepare-sources", "--spec", str(spec), "--out", str(tmp_path / "d")]) == 2
    one_line(capsys, "s.yaml: groups must be a list of SourceGroup mappings")


def test_score_variants_does_not_resume_over_a_genome_edited_since(tmp_path, monkeypatch):
    """The resume identity held the genome's contig names and lengths only: parts scored on the
    old sequence were kept after a base of the genome changed. The file's size and time count now."""
    genome = tmp_path / "g.fa"
    shutil.copy(sample_genome(), genome)
    vcf = write_vcf(tmp_path / "in.vcf")
    argv = ["score-variants", "--vcf", str(vcf), "--genome", str(genome), "--model", str(default_promoter_model()),
            "--out", str(tmp_path / "out.tsv"), "--chunk-size", "3", "--accelerator", "cpu"]
    real_score, calls = ClassifierEffects.score, []

    def interrupted(self, windows):
        calls.append(len(windows))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_score(self, windows)

    monkeypatch.setattr(ClassifierEffects, "score", interrupted)
    assert main(argv) == 130 and (tmp_path / ".out.tsv.partial").is_dir()
    genome.write_text(genome.read_text().replace("ACGT", "ACGA", 1))  # same names and lengths
    scored = []
    monkeypatch.setattr(ClassifierEffects, "score", lambda self, w: scored.append(len(w)) or real_score(self, w))
    assert main(argv) == 0
    assert sum(scored) == 8  # every scored allele again, none taken from the old parts
    assert not (tmp_path / ".out.tsv.partial").exists()


def test_scan_of_a_genome_with_an_empty_record_is_not_called_a_resume(tmp_path, caplog, small_genome):
    """The empty record has no bins, so nothing was left to do for it: the first run said
    "resuming: 1 of 2 chromosomes already scored"."""
    genome = tmp_path / "e.fa"
    genome.write_text(">empty\n" + small_genome.read_text())
    out = tmp_path / "o.bedGraph"
    with caplog.at_level("INFO", logger="genolong"):
        assert main(["scan", "--genome", str(genome), "--out", str(out), "--stride", "100"]) == 0
    assert "resuming" not in caplog.text
    assert {line.split("\t")[0] for line in out.read_text().splitlines()[1:]} == {"a", "b"}


def test_a_directory_given_as_a_variant_file_is_not_called_a_fasta(tmp_path, capsys, small_genome):
    (tmp_path / "d").mkdir()
    assert main(["score-variants", "--vcf", str(tmp_path / "d"), "--genome", str(small_genome),
                 "--model", str(default_promoter_model()), "--out", str(tmp_path / "o.tsv")]) == 2
    assert "FASTA" not in one_line(capsys, "d: is a directory, not a file")


def test_data_status_of_a_file_is_one_line(tmp_path, capsys):
    """``data status --dest FILE`` printed warnings about an unreadable manifest and exit 0."""
    dest = tmp_path / "f"
    dest.write_text("x")
    assert main(["data", "status", "--dest", str(dest)]) == 2
    one_line(capsys, "f: is a file, not a data cache directory")
    assert dest.read_text() == "x"
