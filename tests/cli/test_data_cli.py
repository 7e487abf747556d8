"""``genolong data fetch/status`` and ``genolong genome prepare`` end to end, against 127.0.0.1 only."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shlex
import sys
import tarfile

import pytest
from helpers.http_server import FixtureServer

from genolong.cli.main import COMMAND_MODULES, build_parser, main
from genolong.dna.genome import Genome
from genolong.prep.cache import DataCache
from genolong.prep.integrity import BsdSum
from genolong.prep.sources import USAGES, ready_path

HG19_TOY = ">chr1\nNNNNacgtACGTacgtACGTAAAA\nCCCCGGGG\n>chrM\nGATCACAGGT\n>chr6_apd_hap1\nACGTN\n"
ENSEMBL_TOY = ">1 dna:chromosome chromosome:GRCh37:1:1:24:1 REF\nNNNNACGTACGTACGTACGTAAAA\n>MT dna:chromosome\nGATCACAGGT\n"
BED = "chr1\t894625\t894685\tNOC2L_1\t900\t-\t894635\t894636\nchr1\t895906\t895966\tKLHL17_1\t900\t+\t895955\t895956\n"


def gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


def tarball(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def bsd_sum_line(data: bytes, name: str) -> str:
    digest = BsdSum()
    digest.update(data)
    checksum, blocks = digest.hexdigest().split()
    return f"{int(checksum):05d} {int(blocks):5d} {name}\n"


@pytest.fixture
def server():
    hg19 = gz(HG19_TOY)
    ensembl = gz(ENSEMBL_TOY)
    deepsea = {f"deepsea_train/{split}.mat": split.encode() * 100 for split in ("train", "valid", "test")}
    files = {
        "ucsc/hg19.fa.gz": hg19,
        "ucsc/md5sum.txt": f"{hashlib.md5(hg19).hexdigest()}  hg19.fa.gz\n".encode(),
        "ens/Homo_sapiens.GRCh37.dna.primary_assembly.fa.gz": ensembl,
        "ens/CHECKSUMS": (
            "04229     1 README\n" + bsd_sum_line(ensembl, "Homo_sapiens.GRCh37.dna.primary_assembly.fa.gz")
        ).encode(),
        "badmd5/hg19.fa.gz": hg19,
        "badmd5/md5sum.txt": b"00000000000000000000000000000000  hg19.fa.gz\n",
        "nomd5/hg19.fa.gz": hg19,
        "epd/Hs_EPDnew_006_hg19.bed": BED.encode(),
        "epd/error.html": b"<html><body>Service unavailable</body></html>\n",
        "deepsea/bundle.tar.gz": tarball(deepsea),
        "deepsea/evil.tar.gz": tarball({"deepsea_train/../../evil.mat": b"x"}),
    }
    with FixtureServer(files=files) as running:
        yield running


def run(*argv: str) -> int:
    return main(list(argv))


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_fetch_epdnew_then_status_and_offline(server, tmp_path, capsys):
    dest = str(tmp_path / "cache")
    assert run("data", "fetch", "epdnew", "--offline", "--dest", dest) == 2
    assert "--offline" in one_line_error(capsys)

    assert (
        run("data", "fetch", "epdnew", "--dest", dest, "--url", server.url("epd/Hs_EPDnew_006_hg19.bed")) == 0
    )
    bed = tmp_path / "cache/epdnew/Hs_EPDnew_006_hg19.bed"
    assert bed.read_text() == BED and str(bed) in capsys.readouterr().out
    manifest = json.loads((tmp_path / "cache/manifest.json").read_text())
    record = manifest["files"]["epdnew/Hs_EPDnew_006_hg19.bed"]
    assert (record["size"], record["digests"]["sha256"]) == (
        len(BED),
        hashlib.sha256(BED.encode()).hexdigest(),
    )

    assert run("data", "fetch", "epdnew", "--offline", "--dest", dest) == 0  # the cache suffices
    assert len(server.requests("epd/Hs_EPDnew_006_hg19.bed")) == 1

    assert run("data", "status", "--dest", dest, "--verify") == 0
    out = capsys.readouterr().out
    assert "epdnew (epd)" in out and "ready" in out and "sha256 re-checked" in out
    assert "grch37 (ucsc)" in out and "missing" in out
    assert "# first: genolong data fetch grch37" in out  # promoter prepare needs the genome too


def test_checksum_mismatch_removes_the_file_and_exits_2(server, tmp_path, capsys):
    dest = tmp_path / "cache"
    url = server.url("epd/Hs_EPDnew_006_hg19.bed")
    assert run("data", "fetch", "epdnew", "--dest", str(dest), "--url", url, "--sha256", "ab" * 32) == 2
    err = one_line_error(capsys)
    assert err.startswith("genolong data fetch: error:") and "sha256 mismatch" in err and "removed" in err
    assert not dest.exists()  # the new cache directory held nothing but a lock: removed


def test_provider_md5_mismatch_and_404_exit_2(server, tmp_path, capsys):
    dest = str(tmp_path / "cache")
    assert run("data", "fetch", "grch37", "--dest", dest, "--url", server.url("badmd5/hg19.fa.gz")) == 2
    assert "md5 mismatch" in one_line_error(capsys)
    assert run("data", "fetch", "epdnew", "--dest", dest, "--url", server.url("epd/missing.bed")) == 2
    assert "404" in one_line_error(capsys)


def test_an_error_page_served_as_the_bed_is_refused(server, tmp_path, capsys):
    assert run("data", "fetch", "epdnew", "--dest", str(tmp_path), "--url", server.url("epd/error.html")) == 2
    assert "not a BED file" in one_line_error(capsys)


def test_fetch_grch37_from_ucsc_prepares_an_indexed_genome(server, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert run("data", "fetch", "grch37", "--dest", str(cache), "--url", server.url("ucsc/hg19.fa.gz")) == 0
    genome_path = ready_path("grch37", cache=DataCache(cache))
    assert genome_path == cache / "grch37/hg19.fa.bgz"
    with Genome(genome_path) as genome:
        assert genome.chromosomes == {"chr1": 32, "chrM": 10, "chr6_apd_hap1": 5}
        assert genome.fetch("1", 4, 12) == "ACGTACGT"
    table = (cache / "grch37/hg19.fa.bgz.chromosomes.tsv").read_text().splitlines()
    assert table[1] == "chr1\t32\t0.125000\t0.250000"  # 4 N; 8 soft-masked bases
    capsys.readouterr()
    assert run("data", "status", "--dest", str(cache)) == 0
    out = capsys.readouterr().out
    assert "md5 from " + server.url("ucsc/md5sum.txt") in out
    assert f"genolong tokenizer train --genome {genome_path}" in out


def test_fetch_grch37_from_ensembl_checks_bsd_sum_and_renames_to_ucsc(server, tmp_path):
    cache = tmp_path / "cache"
    url = server.url("ens/Homo_sapiens.GRCh37.dna.primary_assembly.fa.gz")
    assert run("data", "fetch", "grch37", "--provider", "ensembl", "--dest", str(cache), "--url", url) == 0
    manifest = json.loads((cache / "manifest.json").read_text())
    (record,) = manifest["files"].values()
    assert record["verified"] == ["bsd-sum from " + server.url("ens/CHECKSUMS")]
    with Genome(ready_path("grch37", "ensembl", cache=DataCache(cache))) as genome:
        assert list(genome.chromosomes) == ["chr1", "chrM"]


def test_a_mirror_without_checksum_file_is_accepted_with_a_warning(server, tmp_path, caplog):
    assert (
        run("data", "fetch", "grch37", "--dest", str(tmp_path), "--url", server.url("nomd5/hg19.fa.gz")) == 0
    )
    assert "no checksum file at" in caplog.text


def test_fetch_deepsea_unpacks_the_bundle_and_refuses_a_traversal(server, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert (
        run("data", "fetch", "deepsea", "--dest", str(cache), "--url", server.url("deepsea/evil.tar.gz")) == 2
    )
    assert "climbs out with '..'" in one_line_error(capsys)
    assert not (tmp_path / "evil.mat").exists()

    other = tmp_path / "other"
    assert (
        run("data", "fetch", "deepsea", "--dest", str(other), "--url", server.url("deepsea/bundle.tar.gz"))
        == 0
    )
    mat_dir = ready_path("deepsea", cache=DataCache(other))
    assert mat_dir == other / "deepsea/deepsea_train_bundle.v0.9/deepsea_train"
    assert sorted(path.name for path in mat_dir.iterdir()) == ["test.mat", "train.mat", "valid.mat"]


def test_status_reports_a_partial_download(tmp_path, capsys):
    (tmp_path / "deepsea").mkdir()
    (tmp_path / "deepsea/deepsea_train_bundle.v0.9.tar.gz.part").write_bytes(b"x" * 2048)
    assert run("data", "status", "--dest", str(tmp_path)) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("deepsea")]
    assert line.split()[2:7] == ["partial", "2.0", "KiB", "downloaded", "so"]


def test_bad_combinations_are_user_errors(tmp_path, capsys):
    assert run("data", "fetch", "all", "--url", "http://127.0.0.1:9/x", "--dest", str(tmp_path)) == 2
    assert "one target" in one_line_error(capsys)
    assert run("data", "fetch", "epdnew", "--provider", "ensembl", "--dest", str(tmp_path)) == 2
    assert "GRCh37" in one_line_error(capsys)


@pytest.mark.parametrize(("needs", "command"), USAGES)
def test_advertised_commands_parse_with_the_real_cli(needs, command):
    """``data status`` prints these; they must stay valid as the other commands evolve."""
    argv = shlex.split(command.format(grch37="g.fa.bgz", epdnew="tss.bed", deepsea="mats"))
    assert argv[0] == "genolong"
    assert argv[1] in COMMAND_MODULES, f"`data status` advertises `{command}`, but genolong has no {argv[1]} command"
    args = build_parser().parse_args(argv[1:])
    assert hasattr(args, "func")


def test_an_advertised_command_whose_group_is_removed_fails_the_check(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "COMMAND_MODULES", [m for m in COMMAND_MODULES if m != "corpus"])
    needs, command = next(usage for usage in USAGES if usage[1].startswith("genolong corpus "))
    with pytest.raises(AssertionError, match="genolong has no corpus command"):
        test_advertised_commands_parse_with_the_real_cli(needs, command)


def test_genome_prepare_command(real_data, tmp_path, capsys):
    source = real_data / "genomes" / "chr17.hg19.part.fa"
    out = tmp_path / "chr17.fa.bgz"
    assert run("genome", "prepare", str(source), "--out", str(out), "--names", "ensembl") == 0
    assert "1 sequences, 40,000 bp" in capsys.readouterr().out
    assert (
        (tmp_path / "chr17.fa.bgz.chromosomes.tsv")
        .read_text()
        .splitlines()[1]
        .startswith("17\t40000\t0.000000\t0.4")
    )
    with Genome(out) as genome:
        assert genome.fetch("chr17", 0, 10) == genome.fetch("17", 0, 10)
    assert run("genome", "prepare", str(source), "--out", str(source), "--plain") == 2
    assert "is the input" in one_line_error(capsys)
