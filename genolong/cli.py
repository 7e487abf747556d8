"""The ``genolong`` command line.

Thin by design: each command group lives in ``genolong/commands/<group>.py`` and
exposes ``register(subparsers)``, which adds its sub-parsers, sets ``func`` to a typed
function and declares the roles of its path arguments (:func:`genolong.outputs.declare`).
This module only dispatches, within the output policy of :func:`genolong.outputs.guarded`
and the signal handling of :func:`genolong.interrupts.handled`, and turns the outcome into
an exit status with at most one line on stderr:

* 0 on success;
* 2 for a :class:`~genolong.errors.UserError` (bad input, unusable output location);
* 128 + the signal number when interrupted: 130 for SIGINT (Ctrl-C), 143 for SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from genolong import __version__, interrupts
from genolong.errors import UserError
from genolong.outputs import guarded

#: Command modules under ``genolong.commands``, in ``--help`` order.
COMMAND_MODULES = ["data", "tokenizer", "genome", "promoter", "corpus", "chromatin", "bench", "pretrain", "convert",
                   "finetune", "predict", "scan", "variants", "explain", "evaluate", "compare"]


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser (and, through ``add_subparsers``, every sub-parser) whose usage errors
    are one line, like every other user error: ``genolong predict-promoter: error: argument
    --stride: must be a positive integer, got '0' (see --help)``, exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
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
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a usage error already printed
        return stop.code if isinstance(stop.code, int) else 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        with interrupts.handled(), guarded(args):
            result = args.func(args)
    except UserError as err:
        print(f"genolong {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt as stop:
        print(f"genolong {args.command}: {stop or 'interrupted'}", file=sys.stderr)
        return interrupts.exit_code(stop)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
