"""``genolong data ...``: download the public data sets into the cache, and report on the cache."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import non_negative_int, positive_float
from genolong.cli.outputs import OutputDirectory, declare
from genolong.core.errors import UserError
from genolong.prep.cache import default_data_root

_TARGETS = ("grch37", "epdnew", "deepsea")


def register(subparsers) -> None:
    group = subparsers.add_parser("data",
                                  help="download GRCh37, EPDnew and DeepSEA into the cache; show the cache")
    commands = group.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)

    fetch = commands.add_parser(
        "fetch", help="download, verify and prepare a data set (resumable)",
        description="Download a data set into the cache, check it against the provider's checksum file "
        "where one exists (UCSC md5sum.txt, Ensembl CHECKSUMS), record its size and SHA-256, and "
        "prepare it: GRCh37 becomes an indexed bgzip FASTA with UCSC names, the DeepSEA bundle is "
        "unpacked. Interrupted downloads resume; concurrent runs wait for each other.")
    fetch.add_argument("target", choices=[*_TARGETS, "all"], help="what to fetch")
    fetch.add_argument("--provider", choices=["ucsc", "ensembl"],
                       help="where GRCh37 comes from (default: ucsc)")
    fetch.add_argument("--dest", type=Path, help="cache directory (default: $GENOLONG_HOME/data)")
    fetch.add_argument("--url", help="download from this mirror URL, file:// URL or local path instead")
    fetch.add_argument("--sha256", help="the SHA-256 the download must have")
    fetch.add_argument("--offline", action="store_true", help="only check the cache; never download")
    fetch.add_argument("--timeout", type=positive_float, default=30.0,
                       help="seconds without data before a retry (default 30)")
    fetch.add_argument("--retries", type=non_negative_int, default=4, help="retries after a network failure (default 4)")
    declare(fetch, run_fetch, inputs=["url"], directories={"dest": OutputDirectory(None)},
            defaults={"dest": lambda args: default_data_root()})

    status = commands.add_parser(
        "status", help="what is cached, its checksum state, and which commands can run",
        description="List each data set in the cache with its size, how it was verified and its state "
        "(ready, not prepared, partial, changed, corrupt, missing), then the commands that can read it. "
        "Exit status 1 if --verify finds a corrupt file.")
    status.add_argument("--dest", type=Path, help="cache directory (default: $GENOLONG_HOME/data)")
    status.add_argument("--verify", action="store_true", help="re-hash every download (reads gigabytes)")
    declare(status, run_status, inputs=["dest"])


def run_fetch(args) -> None:
    from genolong.prep.cache import DataCache
    from genolong.prep.sources import fetch_source, get_source

    targets = _TARGETS if args.target == "all" else (args.target,)
    if len(targets) > 1 and (args.url or args.sha256):
        raise UserError("--url and --sha256 name one file: use them with one target, not 'all'")
    if args.provider and "grch37" not in targets:
        raise UserError("--provider chooses where GRCh37 comes from; it does not apply to " + args.target)
    cache = DataCache(args.dest)
    for target in targets:
        source = get_source(target, args.provider if target == "grch37" else None)
        path = fetch_source(source, cache, url=args.url, sha256=args.sha256, offline=args.offline,
                            timeout=args.timeout, retries=args.retries)
        print(f"{source.label}: ready: {path}")


def run_status(args) -> int:
    from genolong.prep.cache import DataCache
    from genolong.prep.sources import SOURCES, USAGES, source_status

    cache = DataCache(args.dest)
    statuses = [source_status(source, cache, verify=args.verify) for source in SOURCES]
    print(f"data cache: {cache.root}")
    width = max(len(status.source.label) for status in statuses)
    for status in statuses:
        print(f"  {status.source.label:<{width}}  {status.state:<12}  {status.detail}")
        if status.path is not None:
            print(f"  {'':<{width}}  {'':<12}  -> {status.path}")
    ready = {s.source.target: s.path for s in reversed(statuses) if s.path is not None}  # the first wins
    placeholders = {target: ready.get(target, f"<{target}>") for target in _TARGETS}
    print("\ncommands that read the cache:")
    for needs, command in USAGES:
        missing = [target for target in needs if target not in ready]
        note = f"   # first: genolong data fetch {' '.join(missing)}" if missing else ""
        print(f"  {command.format(**placeholders)}{note}")
    return 1 if any(status.state == "corrupt" for status in statuses) else 0
