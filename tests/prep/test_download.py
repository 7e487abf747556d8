"""Downloads against a real HTTP server on 127.0.0.1: full, resumed, cut, stalled, 404, bad checksum."""

from __future__ import annotations

import hashlib
import random
import shutil
import socket
import subprocess
import time

import pytest
from helpers.http_server import Behaviour, FixtureServer

from genolong.core.errors import UserError
from genolong.prep.integrity import (
    BsdSum,
    Checksum,
    file_digests,
    parse_md5sum,
    parse_sum_checksums,
    sha256_checksum,
)
from genolong.prep.transfer import (
    ChecksumMismatch,
    DownloadError,
    NotFoundError,
    download,
    fetch_bytes,
    partial_path,
)

FAST = {"timeout": 2.0, "backoff": 0.0, "progress": False}


@pytest.fixture
def payload() -> bytes:
    return random.Random(5).randbytes(300_000)


@pytest.fixture
def server(payload):
    with FixtureServer(files={"data/genome.fa.gz": payload}) as running:
        yield running


def sha256(data: bytes) -> Checksum:
    return sha256_checksum(hashlib.sha256(data).hexdigest())


def test_full_download_is_verified_and_leaves_no_part(server, payload, tmp_path):
    dest = tmp_path / "genome.fa.gz"
    result = download(server.url("data/genome.fa.gz"), dest, expected=[sha256(payload)], **FAST)
    assert dest.read_bytes() == payload
    assert (result.size, result.fetched) == (len(payload), len(payload))
    assert result.digests["sha256"] == hashlib.sha256(payload).hexdigest()
    assert not partial_path(dest).exists()
    assert [served.status for served in server.requests("data/genome.fa.gz")] == [200]


def test_interrupted_download_resumes_with_a_range_request(server, payload, tmp_path):
    server.behaviour["data/genome.fa.gz"] = Behaviour(cut_after=100_000)
    dest = tmp_path / "genome.fa.gz"
    with pytest.raises(DownloadError, match="connection closed after 100000 of 300000 bytes"):
        download(server.url("data/genome.fa.gz"), dest, retries=0, **FAST)
    assert not dest.exists()
    assert partial_path(dest).stat().st_size == 100_000

    result = download(server.url("data/genome.fa.gz"), dest, expected=[sha256(payload)], **FAST)
    assert dest.read_bytes() == payload
    first, second = server.requests("data/genome.fa.gz")
    assert (first.range, first.sent) == (None, 100_000)
    assert (second.range, second.status) == ("bytes=100000-", 206)
    assert second.sent == result.fetched == len(payload) - 100_000 < len(payload)


def test_cut_connections_are_retried_within_one_call(server, payload, tmp_path):
    server.behaviour["data/genome.fa.gz"] = Behaviour(cut_after=70_000, cuts=3)
    dest = tmp_path / "genome.fa.gz"
    download(server.url("data/genome.fa.gz"), dest, expected=[sha256(payload)], retries=1, **FAST)
    assert dest.read_bytes() == payload
    ranges = [served.range for served in server.requests("data/genome.fa.gz")]
    assert ranges == [None, "bytes=70000-", "bytes=140000-", "bytes=210000-"]


def test_server_ignoring_range_restarts_cleanly(server, payload, tmp_path):
    server.behaviour["data/genome.fa.gz"] = Behaviour(cut_after=120_000, ignore_range=True)
    dest = tmp_path / "genome.fa.gz"
    download(server.url("data/genome.fa.gz"), dest, expected=[sha256(payload)], retries=2, **FAST)
    assert dest.read_bytes() == payload
    statuses = [(served.range, served.status) for served in server.requests("data/genome.fa.gz")]
    assert statuses == [(None, 200), ("bytes=120000-", 200)]


@pytest.mark.parametrize("honours_if_range", [True, False])
def test_a_file_changed_on_the_server_is_not_spliced(server, payload, tmp_path, honours_if_range):
    server.behaviour["data/genome.fa.gz"] = Behaviour(cut_after=100_000, ignore_if_range=not honours_if_range)
    dest = tmp_path / "genome.fa.gz"
    with pytest.raises(DownloadError):
        download(server.url("data/genome.fa.gz"), dest, retries=0, **FAST)
    new_version = payload[::-1]
    server.files["data/genome.fa.gz"] = new_version
    download(server.url("data/genome.fa.gz"), dest, expected=[sha256(new_version)], retries=1, **FAST)
    assert dest.read_bytes() == new_version
    assert not list(tmp_path.glob("*.validator"))
    second = server.requests("data/genome.fa.gz")[1]
    assert second.range == "bytes=100000-"
    assert second.status == (200 if honours_if_range else 206)  # 206: we notice the new ETag and restart


def test_complete_part_file_is_finished_without_refetching(server, payload, tmp_path):
    dest = tmp_path / "genome.fa.gz"
    partial_path(dest).write_bytes(payload)
    result = download(server.url("data/genome.fa.gz"), dest, expected=[sha256(payload)], **FAST)
    assert result.fetched == 0 and dest.read_bytes() == payload
    assert [served.status for served in server.requests("data/genome.fa.gz")] == [416]


def test_checksum_mismatch_removes_the_download(server, tmp_path):
    dest = tmp_path / "genome.fa.gz"
    with pytest.raises(ChecksumMismatch, match="sha256 mismatch: expected 0000") as caught:
        download(server.url("data/genome.fa.gz"), dest, expected=[sha256_checksum("0" * 64)], **FAST)
    assert "removed" in str(caught.value)
    assert not dest.exists() and not partial_path(dest).exists()


def test_provider_md5_is_checked(server, payload, tmp_path):
    good = Checksum("md5", hashlib.md5(payload).hexdigest(), "md5sum.txt")
    result = download(server.url("data/genome.fa.gz"), tmp_path / "a", expected=[good], **FAST)
    assert result.digests["md5"] == good.value
    bad = Checksum("md5", "f" * 32, "md5sum.txt")
    with pytest.raises(ChecksumMismatch, match="md5 mismatch"):
        download(server.url("data/genome.fa.gz"), tmp_path / "b", expected=[bad], **FAST)


def test_404_is_a_one_line_user_error(server, tmp_path):
    dest = tmp_path / "missing.bed"
    with pytest.raises(NotFoundError, match="the server says 404") as caught:
        download(server.url("nothing/here.bed"), dest, **FAST)
    assert isinstance(caught.value, UserError) and "\n" not in str(caught.value)
    assert not dest.exists() and not partial_path(dest).exists()
    assert len(server.requests("nothing/here.bed")) == 1  # a 404 is not retried


def test_stalled_server_times_out_retries_and_fails_fast(server, tmp_path):
    server.behaviour["data/genome.fa.gz"] = Behaviour(stall=True)
    started = time.monotonic()
    with pytest.raises(DownloadError, match="timed out.*gave up after 3 attempt"):
        download(
            server.url("data/genome.fa.gz"),
            tmp_path / "x",
            timeout=0.2,
            retries=2,
            backoff=0.01,
            progress=False,
        )
    assert time.monotonic() - started < 3.0
    assert len(server.requests("data/genome.fa.gz")) == 3


def test_refused_connection_is_retried_then_reported(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DownloadError, match=r"cannot connect to 127\.0\.0\.1.*gave up after 2 attempt"):
        download(f"http://127.0.0.1:{port}/x.bed", tmp_path / "x.bed", retries=1, **FAST)


def test_offline_name_resolution_fails_at_once_with_a_hint(monkeypatch, tmp_path):
    calls = []

    def no_dns(*args, **kwargs):
        calls.append(args)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(DownloadError, match=r"cannot reach epd\.example\.org .*offline") as caught:
        download("https://epd.example.org/Hs.bed", tmp_path / "Hs.bed", retries=3, **FAST)
    assert "\n" not in str(caught.value)
    assert len(calls) == 1  # no retries when there is no network at all


def test_local_file_and_file_url_are_copied_and_verified(payload, tmp_path):
    source = tmp_path / "mirror" / "hg19.fa.gz"
    source.parent.mkdir()
    source.write_bytes(payload)
    for url, name in ((str(source), "a"), (source.as_uri(), "b")):
        result = download(url, tmp_path / name, expected=[sha256(payload)], **FAST)
        assert (tmp_path / name).read_bytes() == payload and result.fetched == len(payload)
    with pytest.raises(NotFoundError, match="no such file"):
        download(str(tmp_path / "absent.fa.gz"), tmp_path / "c", **FAST)


def test_fetch_bytes_reads_small_files(server):
    server.files["md5sum.txt"] = b"0123456789abcdef0123456789abcdef  hg19.fa.gz\n"
    assert fetch_bytes(server.url("md5sum.txt"), **{k: FAST[k] for k in ("timeout", "backoff")}).startswith(
        b"0123"
    )


# -- checksum formats -------------------------------------------------------------------------


def test_bsd_sum_by_hand():
    one = BsdSum()
    one.update(b"a")
    assert one.hexdigest() == "97 1"  # rotate(0) + 0x61
    two = BsdSum()
    two.update(b"ab")
    assert two.hexdigest() == f"{(97 >> 1 | 1 << 15) + 98} 1"  # rotate(97) = 0x8030, + 0x62
    split = BsdSum()
    for piece in (b"x" * 1000, b"y" * 25):
        split.update(piece)
    whole = BsdSum()
    whole.update(b"x" * 1000 + b"y" * 25)
    assert split.hexdigest() == whole.hexdigest() and whole.hexdigest().endswith(" 2")  # 1025 bytes: 2 blocks


@pytest.mark.skipif(shutil.which("sum") is None, reason="no sum command")
def test_bsd_sum_matches_the_sum_command(tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(random.Random(1).randbytes(200_003))
    checksum, blocks = subprocess.run(
        ["sum", "-r", str(path)], capture_output=True, text=True, check=True
    ).stdout.split()[:2]
    assert file_digests(path, ["bsd-sum"])["bsd-sum"] == f"{int(checksum)} {int(blocks)}"


def test_provider_checksum_files_are_parsed():
    md5sum_txt = "11111111111111111111111111111111  hg19.2bit\n2222222222222222222222222222222A *hg19.fa.gz\n"
    assert parse_md5sum(md5sum_txt, "hg19.fa.gz", "u").value == "2222222222222222222222222222222a"
    assert parse_md5sum(md5sum_txt, "hg38.fa.gz", "u") is None
    ensembl = "04229 1 README\n48477 880431 Homo_sapiens.GRCh37.dna.primary_assembly.fa.gz\n"
    found = parse_sum_checksums(ensembl, "Homo_sapiens.GRCh37.dna.primary_assembly.fa.gz", "CHECKSUMS")
    assert (found.algorithm, found.value) == ("bsd-sum", "48477 880431")
    assert parse_sum_checksums(ensembl, "README", "CHECKSUMS").value == "4229 1"


def test_malformed_sha256_is_a_user_error():
    with pytest.raises(UserError, match="malformed sha256"):
        sha256_checksum("abc")
