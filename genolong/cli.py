"""The ``genolong`` command line.

Thin by design: each command group lives in ``genolong/commands/<group>.py`` and
exposes ``register(subparsers)``, which adds its sub-parsers and sets
``func`` to a typed function. This module only dispatches and turns
:class:`~genolong.errors.UserError` into a one-line message with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from genolong import __version__
from genolong.errors import UserError

#: Command modules under ``genolong.commands``, in ``--help`` order.
COMMAND_MODULES = ["data", "tokenizer", "genome", "promoter", "corpus", "chromatin", "bench", "pretrain", "convert", "finetune",
                   "predict", "evaluate", "compare"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genolong",
        description="Long-context DNA language models: tokenizer, corpora, sparse encoders, fine-tuning.",
    )
    parser.add_argument("--version", action="version", version=f"genolong {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"genolong.commands.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        result = args.func(args)
    except UserError as err:
        print(f"genolong {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"genolong {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
