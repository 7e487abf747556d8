"""Hub identifiers as ``genolong convert`` sources: ``ORG/NAME`` -> a verified snapshot directory
(user guide: ``docs/guide/convert.md``, "From the hub").

Only the files :mod:`.source` reads are downloaded (never the repository's Python), each checked
against the hash the hub lists (:func:`check_hash`), into the Hugging Face cache (``HF_HUB_CACHE``,
else ``HF_HOME/hub``) from ``HF_ENDPOINT`` (default https://huggingface.co), read at each download.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import partial
from pathlib import Path

import httpx2
from huggingface_hub import HfApi, constants, hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoSibling
from huggingface_hub.utils import validate_repo_id

from genolong.convert.source import WEIGHT_FILES, ConversionError
from genolong.core.errors import disk_full, first_line

#: Tokenizer files, all data: :func:`.source.read_tokenizer` reads what is there.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.txt", "vocab.json", "merges.txt")
#: The suffixes of the weight shards an index may name.
SHARD_SUFFIXES = (".safetensors", ".bin")
DEFAULT_ENDPOINT = "https://huggingface.co"
#: What a failed download raises: the hub's HTTP errors, the HTTP client's (refused connection,
#: timeout) and the cache's file errors (offline mode is a ConnectionError).
DOWNLOAD_ERRORS = (HfHubHTTPError, httpx2.HTTPError, OSError)


def resolve_source(src: Path, revision: str | None = None) -> Path:
    """The checkpoint directory for ``genolong convert SRC``: ``src`` itself when it exists (a local
    path always wins) or is not an ``ORG/NAME`` identifier, else the hub snapshot of ``src`` at
    ``revision`` (a branch, tag or commit; default: the main branch), downloaded and verified."""
    if src.exists() or not is_hub_id(str(src)):
        if revision is not None:
            raise ConversionError(f"--revision goes with a hub identifier ORG/NAME, not with the path {src}")
        return src
    return download_snapshot(str(src), revision)


def is_hub_id(name: str) -> bool:
    """Whether ``name`` is ``ORG/NAME`` as the hub spells repository identifiers."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return name.count("/") == 1


def download_snapshot(repo_id: str, revision: str | None = None) -> Path:
    """The snapshot directory of ``repo_id`` at ``revision`` in the hub cache, holding the files
    :mod:`.source` reads, verified; a ConversionError when the hub cannot be reached or refuses,
    the repository has no config.json or no weights, or a file does not match its hash."""
    endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    try:
        info = HfApi(endpoint=endpoint).model_info(repo_id, revision=revision, files_metadata=True)
        siblings = {sibling.rfilename: sibling for sibling in info.siblings or ()}
        fetch = partial(fetch_verified, repo_id, siblings, info.sha or revision, endpoint)
        paths = [fetch(name) for name in source_files(repo_id, siblings)]
        if paths[-1].name.endswith(".index.json"):
            paths += [fetch(name) for name in shard_files(repo_id, paths[-1], siblings)]
    except DOWNLOAD_ERRORS as err:
        if disk_full(err):
            raise  # the command line names the full disk
        raise download_error(repo_id, revision, endpoint, err) from None
    return paths[0].parent


def fetch_verified(repo_id: str, siblings: dict[str, RepoSibling], commit: str | None, endpoint: str,
                   name: str) -> Path:
    """The cached file ``name`` of ``repo_id`` at ``commit``, downloaded if needed, hash-checked."""
    path = Path(hf_hub_download(repo_id, name, revision=commit, endpoint=endpoint, cache_dir=hub_cache()))
    check_hash(repo_id, siblings[name], path)
    return path


def hub_cache() -> str:
    """The hub cache directory as huggingface_hub chooses it, read now rather than at its import."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return constants.HF_HUB_CACHE


def source_files(repo_id: str, siblings: dict[str, RepoSibling]) -> list[str]:
    """``config.json``, the tokenizer files, then the weight file :func:`.source.read_weights`
    reads first (last: an index, whose shards :func:`shard_files` adds) among ``siblings``."""
    if "config.json" not in siblings:
        raise ConversionError(f"{repo_id} is not a transformers checkpoint (no config.json)")
    weights = next((name for name in WEIGHT_FILES if name in siblings), None)
    if weights is None:
        raise ConversionError(f"{repo_id} holds no weights genolong reads (looked for {', '.join(WEIGHT_FILES)})")
    return ["config.json", *(name for name in TOKENIZER_FILES if name in siblings), weights]


def shard_files(repo_id: str, index: Path, siblings: dict[str, RepoSibling]) -> list[str]:
    """The weight shards the downloaded ``index`` names (those the repository lacks are left for
    :func:`.source.read_weights` to name)."""
    try:
        shards = set(json.loads(index.read_text())["weight_map"].values())
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ConversionError(f"{repo_id}: {index.name} is not a weight index (no weight_map)") from None
    return sorted(name for name in shards if name in siblings and str(name).endswith(SHARD_SUFFIXES))


def check_hash(repo_id: str, sibling: RepoSibling, path: Path) -> None:
    """Refuse ``path`` unless it has the hash the hub lists for ``sibling`` (LFS: sha256 of the
    content; git: the blob id, sha1 of ``blob SIZE\\0`` and the content), removing a mismatch
    from the cache."""
    if sibling.lfs is not None:
        kind, expected, actual = "sha256", sibling.lfs.sha256, file_hash(path, hashlib.sha256())
    elif sibling.blob_id is not None:
        kind, expected = "git blob id", sibling.blob_id
        actual = file_hash(path, hashlib.sha1(f"blob {path.stat().st_size}\0".encode()))
    else:
        raise ConversionError(f"{repo_id}: the hub lists no hash for {sibling.rfilename}, so it cannot be verified")
    if actual != expected:
        blob = path.resolve()
        path.unlink()
        blob.unlink(missing_ok=True)
        raise ConversionError(
            f"{repo_id}: the downloaded {sibling.rfilename} does not match the hub's {kind} "
            f"({actual[:12]}... instead of {expected[:12]}...)",
            hint="removed from the cache; try again, or download it yourself and pass the directory",
        )


def file_hash(path: Path, digest) -> str:
    """The hex digest of ``path``'s content fed to ``digest`` (a hashlib object), 1 MiB at a time."""
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def download_error(repo_id: str, revision: str | None, endpoint: str, err: Exception) -> ConversionError:
    """The one line for a failed download of ``repo_id``: why, and how to pass a directory instead."""
    at = "" if revision is None else f" at revision {revision}"
    command = f"hf download {repo_id}" + ("" if revision is None else f" --revision {revision}")
    return ConversionError(
        f"cannot download {repo_id}{at} from {endpoint}: {download_failure(err)}",
        hint=f"{repo_id} is not a local directory either; download it where there is network, "
        f"`{command} --local-dir DIR`, and pass DIR",
    )


def download_failure(err: Exception) -> str:
    """Why the hub refused, in a few words, or the error's first line."""
    if isinstance(err, OfflineModeIsEnabled):
        return "offline mode is on (HF_HUB_OFFLINE)"
    if isinstance(err, RevisionNotFoundError):
        return "no such revision"
    if isinstance(err, GatedRepoError):
        return "the repository is gated (accept its conditions on the hub, then `hf auth login`)"
    if isinstance(err, RepositoryNotFoundError):
        return "no such model repository (a private one needs `hf auth login`)"
    return f"{type(err).__name__}: {first_line(err)}"
