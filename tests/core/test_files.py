"""Atomic outputs: nothing half-written on failure, replace only on success, normal file modes; file digests;
the work files beside an output and the markers of genolong's directories."""

from __future__ import annotations

import hashlib
import os

import pytest

from genolong.core.files import (
    atomic_path,
    atomic_write_text,
    cache_home,
    claim_directory,
    directory_kind,
    sha256_file,
    work_files,
    work_path,
)


def test_file_appears_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    atomic_write_text(target, "done")
    assert target.read_text() == "done"
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~_umask()


def test_directory_replaced_only_after_success(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old").write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_path(target, directory=True) as tmp:
        (tmp / "new").write_text("new")
        raise KeyboardInterrupt
    assert [p.name for p in target.iterdir()] == ["old"]
    with atomic_path(target, directory=True) as tmp:
        (tmp / "new").write_text("new")
    assert [p.name for p in target.iterdir()] == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_files_and_directories_get_the_users_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        with atomic_path(tmp_path / "model", directory=True) as tmp:
            (tmp / "weights").write_text("w")
        atomic_write_text(tmp_path / "report.json", "{}")
    finally:
        os.umask(previous)
    assert (tmp_path / "model").stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700
    assert (tmp_path / "report.json").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "model" / "weights").stat().st_mode & 0o777 == 0o666 & ~umask


def test_cache_home_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GENOLONG_HOME", str(tmp_path / "cache"))
    assert cache_home() == tmp_path / "cache"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_sha256_file_by_hand_and_across_read_chunks(tmp_path):
    empty, abc, large = tmp_path / "empty", tmp_path / "abc", tmp_path / "large"
    empty.write_bytes(b"")
    abc.write_bytes(b"abc")
    large.write_bytes(bytes(range(256)) * 5000)  # 1.28 MB: more than one 1-MiB read
    assert sha256_file(empty) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_file(abc) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2
    assert sha256_file(large) == hashlib.sha256(large.read_bytes()).hexdigest()


def test_work_files_are_what_work_path_names_beside_an_output(tmp_path):
    out = tmp_path / "scores[1].tsv"
    named = {work_path(out, "partial"), work_path(out, "lock"), work_path(out, "").with_name(".scores[1].tsv.x.tmp")}
    for path in named:
        path.touch()
    (tmp_path / ".scores[1].tsvx.partial").touch()  # another output's: not a work file of this one
    assert work_files(out) == named
    assert work_files(tmp_path / "missing" / "out.tsv") == set()


def test_a_claimed_directory_carries_its_kind_and_a_foreign_one_stays_unclaimed(tmp_path):
    claim_directory(tmp_path / "run", "pretrain")
    assert directory_kind(tmp_path / "run") == "pretrain"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    claim_directory(tmp_path / "mine", "pretrain")
    assert directory_kind(tmp_path / "mine") is None
