"""The public data the BigBird genomics experiments need (:data:`SOURCES`), and how to make it ready.

GRCh37 comes from UCSC by default: the other sources use its coordinates and ``chr`` names, its md5
is published beside the file, and its soft-masking is kept (its ``chrM`` is NC_001807, not
Ensembl's rCRS; BigBird's tasks do not touch it). Sources are fetched into a
:class:`~genolong.prep.cache.DataCache`.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from genolong.core.errors import InputError, UserError
from genolong.core.files import sha256_file

from .cache import DataCache, Entry
from .genome_prepare import index_paths, prepare_genome
from .integrity import CHECKSUM_FILE_PARSERS, Checksum, safe_extract, satisfied, sha256_checksum
from .transfer import DownloadError, NotFoundError, fetch_bytes, file_lock, local_path, partial_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Source:
    """One downloadable data set: ``target`` (what ``genolong data fetch`` takes, the cache folder); the
    provider's ``checksum_file`` beside ``url``, in ``checksum_format`` (see :data:`CHECKSUM_FILE_PARSERS`);
    ``kind`` ``genome`` (indexed BGZF), ``archive`` (unpacked, with ``required_members``) or ``file``."""

    target: str
    provider: str
    title: str
    url: str
    checksum_file: str | None = None
    checksum_format: str | None = None
    kind: str = "file"
    required_members: tuple[str, ...] = ()

    @property
    def filename(self) -> str:
        return PurePosixPath(urllib.parse.urlsplit(self.url).path).name

    @property
    def relpath(self) -> str:
        return f"{self.target}/{self.filename}"

    @property
    def label(self) -> str:
        return f"{self.target} ({self.provider})"


GRCH37_UCSC = Source(target="grch37", provider="ucsc",
                     title="GRCh37/hg19 from UCSC, soft-masked, with haplotypes and unplaced contigs",
                     url="https://hgdownload.soe.ucsc.edu/goldenPath/hg19/bigZips/hg19.fa.gz",
                     checksum_file="md5sum.txt", checksum_format="md5sum", kind="genome")
GRCH37_ENSEMBL = Source(target="grch37", provider="ensembl",
                        title="GRCh37 primary assembly from Ensembl, unmasked, MT = rCRS",
                        url="https://ftp.ensembl.org/pub/grch37/current/fasta/homo_sapiens/dna/"
                        "Homo_sapiens.GRCh37.dna.primary_assembly.fa.gz", checksum_file="CHECKSUMS",
                        checksum_format="sum", kind="genome")
EPDNEW = Source(target="epdnew", provider="epd",
                title="EPDnew human promoters, release 006, TSS on hg19 (BED; no published checksum)",
                url="https://epd.expasy.org/ftp/epdnew/H_sapiens/006/Hs_EPDnew_006_hg19.bed")
DEEPSEA = Source(target="deepsea", provider="princeton",
                 title="DeepSEA training bundle v0.9: train/valid/test.mat (no published checksum)",
                 url="http://deepsea.princeton.edu/media/code/deepsea_train_bundle.v0.9.tar.gz",
                 kind="archive", required_members=("train.mat", "valid.mat", "test.mat"))

#: Every known source, in the order ``data status`` lists them.
SOURCES: tuple[Source, ...] = (GRCH37_UCSC, GRCH37_ENSEMBL, EPDNEW, DEEPSEA)
#: Fetch targets and their default provider.
TARGETS = {"grch37": "ucsc", "epdnew": "epd", "deepsea": "princeton"}

#: Commands that read cached data: (targets needed, command with {target} placeholders).
USAGES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("grch37",), "genolong tokenizer train --genome {grch37} --out TOKENIZER_DIR"),
    (("grch37",), "genolong corpus build --genome {grch37} --tokenizer TOKENIZER_DIR --out CORPUS_DIR"),
    (("epdnew", "grch37"), "genolong promoter prepare --tss {epdnew} --genome {grch37} --out PROMOTER_DIR"),
    (("deepsea", "grch37"),
     "genolong chromatin prepare --mat-dir {deepsea} --genome {grch37} --out CHROMATIN_DIR"),
    (("deepsea",), "genolong chromatin prepare --mat-dir {deepsea} --out CHROMATIN_DIR"),
)


class NotCachedError(UserError):
    """A source is not (completely) in the cache and may not be downloaded."""


def get_source(target: str, provider: str | None = None) -> Source:
    """The source for ``target`` from ``provider`` (the target's default if None)."""
    if target not in TARGETS:
        raise UserError(f"unknown data source {target!r}; known: {', '.join(TARGETS)}")
    provider = provider or TARGETS[target]
    for source in SOURCES:
        if (source.target, source.provider) == (target, provider):
            return source
    providers = [s.provider for s in SOURCES if s.target == target]
    raise UserError(f"{target} has no provider {provider!r}; choose from {', '.join(providers)}")


def fetch_source(source: Source, cache: DataCache, *, url: str | None = None, sha256: str | None = None,
                 offline: bool = False, progress: bool = True, **network_options) -> Path:
    """Download (:func:`genolong.prep.transfer.download`), verify and prepare ``source`` in ``cache`` unless
    ready, locking each file meanwhile; return its ready path. ``url`` replaces the source's (a mirror,
    ``file://`` or a local path, with the provider's checksum file beside it); ``offline`` only checks the
    cache (:class:`NotCachedError` if the source is not ready)."""
    expected = [sha256_checksum(sha256)] if sha256 else []
    entry = cache.entry(source.relpath)
    if entry is not None and cache.products_present(entry) and satisfied(entry.digests, expected):
        log.info("%s: ready in %s", source.label, cache.root)
        return ready_path_of(source, cache, entry)
    if offline:
        state = "downloaded but not prepared" if cache.cached(source.relpath) else "not in the cache"
        raise NotCachedError(f"{source.label} is {state} ({cache.root}) and --offline forbids downloading",
                             hint=f"run `genolong data fetch {source.target}` without --offline")
    download_url = url or source.url
    provider_check = _provider_checksum(source, download_url, user_url=url is not None, **network_options)
    expected += [provider_check] if provider_check else []
    entry = cache.fetch(download_url, source.relpath, expected=expected, progress=progress, **network_options)
    with file_lock(cache.path(f"{source.relpath}.products")):
        entry = cache.entry(source.relpath) or entry
        if not cache.products_present(entry):
            try:
                products = _make_products(source, cache, progress)
            except InputError as err:  # not the file it should be (not a disk or permission error): never reuse it
                rejected = cache.set_aside(source.relpath)
                raise UserError(err.message, hint=f"{err.hint + '; ' if err.hint else ''}the download was moved to "
                                f"{rejected.name}; run the command again (with --url of a good copy) to fetch it "
                                "afresh") from None
            entry = cache.set_products(source.relpath, products)
    return ready_path_of(source, cache, entry)


def ready_path(target: str, provider: str | None = None, cache: DataCache | None = None) -> Path:
    """How other commands find ``target``: its prepared genome, BED file, or .mat folder (for
    ``grch37`` without a provider, the first ready one of UCSC and Ensembl); :class:`NotCachedError`
    with a hint when it is not ready."""
    cache = cache or DataCache()
    if target == "grch37" and provider is None:
        candidates = [source for source in SOURCES if source.target == target]
    else:
        candidates = [get_source(target, provider)]
    for source in candidates:
        entry = cache.entry(source.relpath)
        if entry is not None and cache.products_present(entry):
            return ready_path_of(source, cache, entry)
    raise NotCachedError(f"{target} is not in the data cache {cache.root}",
                         hint=f"run `genolong data fetch {target}` (or pass its path explicitly)")


def ready_path_of(source: Source, cache: DataCache, entry: Entry) -> Path:
    if source.kind == "genome":
        return cache.path(_genome_relpath(source))
    if source.kind == "archive":
        first = source.required_members[0]
        member = next(path for path in entry.products if PurePosixPath(path).name == first)
        return cache.path(str(PurePosixPath(member).parent))
    return cache.path(source.relpath)


@dataclass(frozen=True)
class SourceStatus:
    """What the cache holds of one source: ``state`` ``ready`` (with its ``path``), ``not prepared``
    (products missing), ``partial`` (an interrupted download), ``changed`` (differs from the manifest),
    ``corrupt`` (SHA-256 differs; only with ``verify``) or ``missing``; ``detail``: sizes and checks."""

    source: Source
    state: str
    detail: str
    path: Path | None = None


def source_status(source: Source, cache: DataCache, *, verify: bool = False) -> SourceStatus:
    """Describe ``source`` in ``cache``; with ``verify``, re-hash the download (slow for genomes)."""
    entry = cache.entry(source.relpath)
    part = partial_path(cache.path(source.relpath))
    if entry is None:
        if part.exists():
            return SourceStatus(source, "partial", f"{human_size(part.stat().st_size)} downloaded so far; "
                                f"`genolong data fetch {source.target}` resumes")
        return SourceStatus(source, "missing", source.title)
    on_disk = cache.path(source.relpath).exists()
    checks = ", ".join(entry.verified) if entry.verified else "no provider checksum; sha256 recorded"
    detail = f"{source.filename} {human_size(entry.size)}, {checks}"
    if verify and on_disk:
        if sha256_file(cache.path(source.relpath)) != entry.digests["sha256"]:
            return SourceStatus(source, "corrupt", f"{detail}; sha256 differs from the manifest")
        detail += "; sha256 re-checked"
    elif on_disk and cache.cached(source.relpath) is None:
        return SourceStatus(source, "changed", f"{detail}; the file changed since it was downloaded")
    if not on_disk:
        detail = f"{source.filename} removed after use (sha256 {entry.digests['sha256'][:12]}...)"
    if not cache.products_present(entry):
        return SourceStatus(source, "not prepared", f"{detail}; run `genolong data fetch {source.target}`")
    products = sum(entry.products.values())
    return SourceStatus(source, "ready", f"{detail}; products {human_size(products)}",
                        ready_path_of(source, cache, entry))


def _provider_checksum(source: Source, download_url: str, *, user_url: bool,
                       **network_options) -> Checksum | None:
    """The provider's checksum of the file, from the checksum file beside ``download_url``. Missing, it
    is an error for the default URL (better to stop than to skip verification) and a warning for a
    user's ``--url`` (a mirror or a local copy may not carry it)."""
    if source.checksum_file is None:
        return None
    local = local_path(download_url)
    if local is not None:
        checksum_url, filename = str(local.with_name(source.checksum_file)), local.name
    else:
        checksum_url = urllib.parse.urljoin(download_url, source.checksum_file)
        filename = PurePosixPath(urllib.parse.urlsplit(download_url).path).name
    try:
        text = fetch_bytes(checksum_url, **network_options).decode("utf-8", errors="replace")
        check = CHECKSUM_FILE_PARSERS[source.checksum_format](text, filename, checksum_url)
        problem = None if check else f"{checksum_url} does not list {filename}"
    except NotFoundError:
        check, problem = None, f"no checksum file at {checksum_url}"
    if problem is None:
        return check
    if not user_url:
        raise DownloadError(f"{source.label}: {problem}",
                            hint="pass --sha256 HEX to verify the file yourself")
    log.warning("%s: %s; the file is checked only against --sha256 if given", source.label, problem)
    return None


def _genome_relpath(source: Source) -> str:
    return f"{source.target}/{source.filename.removesuffix('.gz')}.bgz"


def _make_products(source: Source, cache: DataCache, progress: bool) -> dict[str, int]:
    """Derive the usable files from the download; return their relative paths and sizes."""
    downloaded = cache.path(source.relpath)
    if source.kind == "genome":
        prepared = prepare_genome(downloaded, cache.path(_genome_relpath(source)), names="ucsc",
                                  progress=progress)
        paths = [prepared.path, *index_paths(prepared.path)]
        return {os.path.relpath(path, cache.root): path.stat().st_size for path in paths}
    if source.kind == "archive":
        folder = f"{source.target}/{source.filename.removesuffix('.gz').removesuffix('.tar')}"
        files = safe_extract(downloaded, cache.path(folder), progress=progress)
        names = {PurePosixPath(member).name for member in files}
        missing = [name for name in source.required_members if name not in names]
        if missing:
            raise InputError(downloaded, f"the archive lacks {', '.join(missing)}",
                             hint="check the URL: this is not the expected bundle")
        return {f"{folder}/{member}": size for member, size in files.items()}
    _check_bed(downloaded)
    return {source.relpath: downloaded.stat().st_size}


def _check_bed(path: Path) -> None:
    """Refuse a file that is not BED with strand (say, an HTML error page served with 200)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.decode("utf-8", errors="replace").strip()
            if not line or line.startswith(("#", "track", "browser")):
                continue
            fields = line.split()
            if len(fields) >= 6 and fields[1].isdigit() and fields[2].isdigit() and fields[5] in "+-.":
                return
            problem = "not a BED file with strand (6+ columns: chrom start end name score strand)"
            raise InputError(path, problem, line=number, hint="check the URL")
    raise InputError(path, "empty BED file", hint="check the URL")


def human_size(size: float) -> str:
    """Bytes for humans: ``512 B``, ``905.0 MiB``, ``3.1 GiB``."""
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.1f} {unit}"
    return f"{size / 1024:.1f} GiB"
