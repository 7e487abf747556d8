"""``genolong convert ORG/NAME``: a checkpoint downloaded from a hub, never the real one.

The hub is :class:`helpers.hub_server.FakeHub` on 127.0.0.1 (``HF_ENDPOINT``), serving a small
Nucleotide Transformer v1-style ESM checkpoint (:func:`test_convert.esm_source`) in the hub's
layout, with a ``modeling_x.py`` and a second weight format beside it that must never be fetched.
"""

from __future__ import annotations

import json
import socket

import pytest
import torch
from helpers.convert import token_batch
from helpers.hub_server import Commit, FakeHub, commit_of
from huggingface_hub import constants
from safetensors.torch import load_file, save_file
from test_convert import esm_source

import genolong.model  # noqa: F401  (registers the genolong Auto classes)
from genolong.cli.main import main
from genolong.convert.hub import hub_cache
from genolong.model.modeling import GenolongForMaskedLM

REPO = "dna-org/tiny-nt"
EXTRA = {"modeling_x.py": b"raise SystemExit('remote code ran')\n", "pytorch_model.bin": b"never read"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Two local checkpoint directories: ``main`` and ``v1`` (the same model, weights halved)."""
    work = tmp_path_factory.mktemp("hub_sources")
    esm_source(work / "main")
    (work / "v1").mkdir()
    for path in (work / "main").iterdir():
        (work / "v1" / path.name).write_bytes(path.read_bytes())
    halved = {name: tensor * 0.5 for name, tensor in load_file(str(work / "main" / "model.safetensors")).items()}
    save_file(halved, str(work / "v1" / "model.safetensors"), metadata={"format": "pt"})
    return work


@pytest.fixture
def hub(sources, tmp_path, monkeypatch):
    """The fake hub serving ``REPO`` (branch main, tag v1) as HF_ENDPOINT, with a cache of this test's own."""
    served = FakeHub({REPO: {"main": commit_of(sources / "main", EXTRA), "v1": commit_of(sources / "v1", EXTRA)},
                      "dna-org/gated": {"main": Commit({"config.json": b"{}"}, set())}}, gated={"dna-org/gated"})
    monkeypatch.setenv("HF_ENDPOINT", served.endpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the test suite's default is offline
    with served:
        yield served


def convert(capsys, *args) -> tuple[int, str]:
    code = main(["convert", *map(str, args)])
    return code, capsys.readouterr().err


def logits(model_dir) -> torch.Tensor:
    model = GenolongForMaskedLM.from_pretrained(str(model_dir)).eval()
    ids, mask = token_batch([40, 17], model.config.vocab_size, seed=3, special=(3, 4, 1))
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def test_a_hub_identifier_converts_as_its_local_directory_and_fetches_no_code(hub, sources, tmp_path, capsys):
    assert convert(capsys, REPO, "--out", tmp_path / "hub")[0] == 0
    assert convert(capsys, sources / "main", "--out", tmp_path / "local")[0] == 0
    assert torch.equal(logits(tmp_path / "hub"), logits(tmp_path / "local"))
    fetched = {path.rsplit("/", 1)[1] for _, path in hub.log if "/resolve/" in path}
    assert fetched == {path.name for path in (sources / "main").iterdir()}  # not modeling_x.py nor pytorch_model.bin
    assert ("GET", f"/api/models/{REPO}") in hub.log
    converted = json.loads((tmp_path / "hub" / "config.json").read_text())["converted_from"]["name_or_path"]
    assert converted == REPO


def test_revision_is_passed_through(hub, sources, tmp_path, capsys):
    assert convert(capsys, REPO, "--revision", "v1", "--out", tmp_path / "hub")[0] == 0
    assert convert(capsys, sources / "v1", "--out", tmp_path / "local")[0] == 0
    assert torch.equal(logits(tmp_path / "hub"), logits(tmp_path / "local"))
    assert ("GET", f"/api/models/{REPO}/revision/v1") in hub.log
    v1 = hub.repos[REPO]["v1"].sha
    assert all(f"/resolve/{v1}/" in path for _, path in hub.requested("model.safetensors"))


def test_a_second_conversion_reads_the_cache(hub, tmp_path, capsys):
    assert convert(capsys, REPO, "--out", tmp_path / "first")[0] == 0
    assert convert(capsys, REPO, "--out", tmp_path / "second")[0] == 0
    assert len(hub.requested("model.safetensors", "GET")) == 1
    assert len(hub.requested("config.json")) == 2  # HEAD and GET, once
    assert torch.equal(logits(tmp_path / "first"), logits(tmp_path / "second"))


@pytest.mark.parametrize(("name", "kind"), [("model.safetensors", "sha256"), ("config.json", "git blob id")])
def test_a_file_that_does_not_match_its_hash_is_refused_and_removed(hub, name, kind, tmp_path, capsys):
    hub.corrupt(name)
    code, err = convert(capsys, REPO, "--out", tmp_path / "out")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{REPO}: the downloaded {name} does not match the hub's {kind}" in err
    assert not (tmp_path / "out").exists()
    assert not list((tmp_path / "hf_cache").rglob(name))  # nor kept in the cache
    hub.corrupted.clear()  # the next try downloads it again
    assert convert(capsys, REPO, "--out", tmp_path / "out")[0] == 0


def test_sharded_weights_come_with_their_index(hub, sources, tmp_path, capsys):
    state = load_file(str(sources / "main" / "model.safetensors"))
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    (tmp_path / "sharded").mkdir()
    for path in (sources / "main").iterdir():
        if path.name != "model.safetensors":
            (tmp_path / "sharded" / path.name).write_bytes(path.read_bytes())
    for shard, keys in shards.items():
        save_file({key: state[key] for key in keys}, str(tmp_path / "sharded" / shard), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {key: shard for shard, keys in shards.items() for key in keys}}
    (tmp_path / "sharded" / "model.safetensors.index.json").write_text(json.dumps(index))
    hub.repos["dna-org/sharded"] = {"main": commit_of(tmp_path / "sharded", EXTRA)}
    assert convert(capsys, "dna-org/sharded", "--out", tmp_path / "hub")[0] == 0
    assert convert(capsys, sources / "main", "--out", tmp_path / "local")[0] == 0
    assert torch.equal(logits(tmp_path / "hub"), logits(tmp_path / "local"))
    assert all(hub.requested(shard, "GET") for shard in shards)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_hub_gives_one_line_naming_the_identifier(tmp_path, monkeypatch, capsys):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    code, err = convert(capsys, REPO, "--out", tmp_path / "out")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"cannot download {REPO} from {endpoint}: ConnectError" in err
    assert f"not a local directory either; download it where there is network, `hf download {REPO} --local-dir DIR`, and pass DIR" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("repo", "revision", "reason"), [
    ("dna-org/missing", None, "no such model repository"),
    (REPO, "v9", "no such revision"),
    ("dna-org/gated", None, "the repository is gated"),
    ("dna-org/offline", None, "offline mode is on (HF_HUB_OFFLINE)"),
])
def test_what_the_hub_refuses_is_named_in_one_line(hub, repo, revision, reason, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", repo == "dna-org/offline")
    extra = [] if revision is None else ["--revision", revision]
    code, err = convert(capsys, repo, *extra, "--out", tmp_path / "out")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    at = "" if revision is None else f" at revision {revision}"
    assert f"cannot download {repo}{at} from {hub.endpoint}: {reason}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("files", "message"), [
    ({"README.md": b"# code only"}, "dna-org/code-only is not a transformers checkpoint (no config.json)"),
    ({"config.json": b"{}"}, "dna-org/code-only holds no weights genolong reads (looked for model.safetensors, "),
])
def test_a_repository_without_a_checkpoint_is_refused_before_downloading(hub, files, message, tmp_path, capsys):
    hub.repos["dna-org/code-only"] = {"main": Commit(files | {"modeling_x.py": EXTRA["modeling_x.py"]}, set())}
    code, err = convert(capsys, "dna-org/code-only", "--out", tmp_path / "out")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not [path for _, path in hub.log if "/resolve/" in path]


def test_the_cache_is_hf_hub_cache_else_hf_home(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache() == str(tmp_path / "home" / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert hub_cache() == str(tmp_path / "cache")


def test_a_local_directory_wins_over_a_hub_identifier(sources, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dna-org").mkdir()
    (tmp_path / REPO).symlink_to(sources / "main")
    assert convert(capsys, REPO, "--out", "out")[0] == 0
    code, err = convert(capsys, REPO, "--revision", "v1", "--out", "out2")
    assert code == 2 and f"--revision goes with a hub identifier ORG/NAME, not with the path {REPO}" in err
    code, err = convert(capsys, "dna-org/x..y", "--out", "out3")  # not a name the hub allows: a missing path
    assert code == 2 and err.strip().endswith("dna-org/x..y: no such directory"), err
