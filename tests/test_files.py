"""Atomic outputs: nothing half-written on failure, replace only on success, normal file modes."""

from __future__ import annotations

import os

import pytest

from genolong.files import atomic_path, atomic_write_text, cache_home


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


def test_cache_home_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GENOLONG_HOME", str(tmp_path / "cache"))
    assert cache_home() == tmp_path / "cache"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
