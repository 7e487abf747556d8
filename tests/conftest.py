"""Shared fixtures: the real data cut into tests/data, the full set in ../shared/data, an isolated cache."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from genolong.dna.sequence import read_fasta
from genolong.resources import sample_genome

REPO = Path(__file__).resolve().parents[1]
# The test files live in one folder per package (tests/dna/, tests/cli/, ...) under unique names, and some
# import another's helpers by name (``from helpers.tables import read_tsv``): every folder is on the path, as
# pytest's prepend import mode puts it there once one of its files is collected, but before any is.
sys.path[:0] = [str(folder) for folder in sorted((REPO / "tests").iterdir())
                if folder.is_dir() and any(folder.glob("test_*.py"))]
TEST_DATA = REPO / "tests" / "data"
SHARED_DATA = Path(os.environ.get("GENOLONG_SHARED_DATA", REPO.parent / "shared" / "data"))
# ``--precision auto`` is float32 in every test and the commands they start (module fixtures included), so that
# the tests give the same numbers on CPUs with and without native bf16; tests/runtime/test_precision.py covers the rest.
os.environ["GENOLONG_PRECISION"] = "32"


def pytest_collection_modifyitems(config, items):
    # A fresh clone has no ../shared: only slow tests may need the full data set.
    needs_shared = [item.nodeid for item in items if "shared_data" in item.fixturenames and "slow" not in item.keywords]
    if needs_shared:
        raise pytest.UsageError("tests reading ../shared/data must be marked slow (or use real_data, tests/data): "
                                + ", ".join(needs_shared))
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def real_data() -> Path:
    """Real DNA files cut small, in the layout of ../shared/data (tests/data/README.md: what was cut, how)."""
    return TEST_DATA


@pytest.fixture(scope="session")
def data_seed() -> int:
    """The seed of the data and model of the tests that train a model and assert what it learnt:
    ``$GENOLONG_TEST_DATA_SEED`` (default 0). Run them with other values (and other
    ``OMP_NUM_THREADS``) to check that their margins hold beyond one draw and one machine."""
    return int(os.environ.get("GENOLONG_TEST_DATA_SEED", "0"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The full real data set of ../shared/data, for the slow tests that need whole files (skips when absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data directory not found: {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own GENOLONG_HOME; nothing touches the user's cache."""
    monkeypatch.setenv("GENOLONG_HOME", str(tmp_path_factory.mktemp("genolong_home")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def small_genome(tmp_path):
    """Two 300-bp records of the shipped hg19 sample, named ``a`` and ``b``."""
    sequence = next(iter(read_fasta(sample_genome()))).sequence
    path = tmp_path / "g.fa"
    path.write_text(f">a\n{sequence[20000:20300]}\n>b\n{sequence[21000:21300]}\n")
    return path
