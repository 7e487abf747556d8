"""The data cache: manifest records, reuse, and one download when several fetch the same file."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import random
import threading
import time

import pytest
from helpers.http_server import Behaviour, FixtureServer

from genolong.prep.cache import DataCache
from genolong.prep.integrity import Checksum, sha256_checksum

FAST = {"timeout": 5.0, "backoff": 0.0, "progress": False}
PAYLOAD = random.Random(7).randbytes(400_000)
PATH = "epdnew/Hs_EPDnew_006_hg19.bed"


@pytest.fixture
def server():
    with FixtureServer(files={"Hs.bed": PAYLOAD}) as running:
        yield running


def test_fetch_records_size_and_digests_then_reuses_the_file(server, tmp_path):
    cache = DataCache(tmp_path)
    md5 = Checksum("md5", hashlib.md5(PAYLOAD).hexdigest(), "md5sum.txt")
    entry = cache.fetch(server.url("Hs.bed"), PATH, expected=[md5], **FAST)
    assert (tmp_path / PATH).read_bytes() == PAYLOAD
    assert entry.size == len(PAYLOAD) and entry.digests["sha256"] == hashlib.sha256(PAYLOAD).hexdigest()
    assert entry.verified == ["md5 from md5sum.txt"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["files"][PATH]["digests"]["md5"] == md5.value

    again = cache.fetch(server.url("Hs.bed"), PATH, expected=[md5], **FAST)
    assert again == entry and len(server.requests("Hs.bed")) == 1


def test_a_modified_file_is_downloaded_again(server, tmp_path):
    cache = DataCache(tmp_path)
    cache.fetch(server.url("Hs.bed"), PATH, **FAST)
    (tmp_path / PATH).write_bytes(b"tampered")
    assert cache.cached(PATH) is None
    cache.fetch(server.url("Hs.bed"), PATH, **FAST)
    assert (tmp_path / PATH).read_bytes() == PAYLOAD and len(server.requests("Hs.bed")) == 2


def test_a_file_copied_by_hand_is_adopted_when_it_verifies(server, tmp_path):
    cache = DataCache(tmp_path)
    (tmp_path / "epdnew").mkdir()
    (tmp_path / PATH).write_bytes(PAYLOAD)
    entry = cache.fetch(
        server.url("Hs.bed"), PATH, expected=[sha256_checksum(hashlib.sha256(PAYLOAD).hexdigest())], **FAST
    )
    assert entry.size == len(PAYLOAD) and server.requests("Hs.bed") == []


def test_threads_fetching_one_file_download_it_once(server, tmp_path):
    server.behaviour["Hs.bed"] = Behaviour(pace=0.01)  # ~0.25 s in flight: the others must wait
    cache = DataCache(tmp_path)
    errors = []

    def fetch():
        try:
            cache.fetch(server.url("Hs.bed"), PATH, **FAST)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (tmp_path / PATH).read_bytes() == PAYLOAD
    assert len(server.requests("Hs.bed")) == 1


def _fetch_in_child(url: str, root: str) -> tuple[int, float, float]:
    started = time.time()
    size = DataCache(root).fetch(url, PATH, **FAST).size
    return size, started, time.time()


def test_processes_fetching_one_file_do_not_corrupt_it(server, tmp_path):
    server.behaviour["Hs.bed"] = Behaviour(pace=0.04)  # ~1 s in flight
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.starmap(_fetch_in_child, [(server.url("Hs.bed"), str(tmp_path))] * 2)
    sizes, starts, ends = zip(*results, strict=True)
    assert max(starts) < min(ends), "the two fetches did not overlap; the test proves nothing"
    assert sizes == (len(PAYLOAD),) * 2
    assert (tmp_path / PATH).read_bytes() == PAYLOAD
    assert len(server.requests("Hs.bed")) == 1
    assert list((tmp_path / "epdnew").glob("*.part")) == []
