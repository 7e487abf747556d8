"""The ``genolong`` command line: groups are nouns (``data``, ``task``...), model-level operations verbs
(``pretrain``, ``scan``...); each top-level command is a module of ``genolong.cli.commands`` whose
``register(subparsers)`` adds its parsers (:func:`genolong.cli.outputs.declare`). :func:`main` dispatches
within the output policy and the signal handling and ends with at most one line on stderr (besides a
deprecation line) and an exit status: 0 on success, 2 for a :class:`~genolong.core.errors.UserError`,
128 + the signal number when interrupted (130, 143)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import warnings

import genolong
from genolong import __version__
from genolong.cli.outputs import guarded
from genolong.core import interrupts
from genolong.core.errors import UserError, disk_full, disk_full_error
from genolong.runtime import ranks

#: Command modules under ``genolong.cli.commands``, in ``--help`` order: data and inputs, tasks, models and inference.
COMMAND_MODULES = ["data", "genome", "tokenizer", "corpus", "task", "promoter", "chromatin",
                   "pretrain", "convert", "compare", "extrapolate", "bench", "predict", "scan", "variants", "explain",
                   "embed", "benchmark"]

#: Old command spellings, kept for one release: the words a user typed -> the words that replace them.
DEPRECATED_ALIASES = {("finetune", "promoter"): ("promoter", "finetune"),
                      ("finetune", "chromatin"): ("chromatin", "finetune"),
                      ("predict-chromatin",): ("chromatin", "predict"),
                      ("eval", "chromatin"): ("chromatin", "eval"), ("genome", "fetch"): ("genome", "region")}


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser (and, through ``add_subparsers``, every sub-parser) whose usage errors are one
    line, exit status 2: ``genolong scan: error: argument --stride: must be a positive integer, got '0'
    (see genolong scan --help)``."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="genolong", description="Long-context DNA language models: tokenizer, "
                                "corpora, sparse encoders, fine-tuning.")
    parser.add_argument("--version", action="version", version=f"genolong {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug logging, with Lightning's own lines and warnings")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"genolong.cli.commands.{name}").register(subparsers)
    _name_leaf_commands(parser)
    return parser


def _name_leaf_commands(parser: argparse.ArgumentParser) -> None:
    """Give each runnable parser the default ``command_name`` (``promoter finetune``), for its error lines."""
    groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        parser.set_defaults(command_name=parser.prog.removeprefix("genolong "))
    for group in groups:
        for sub in group.choices.values():
            _name_leaf_commands(sub)


def resolve_aliases(argv: list[str]) -> list[str]:
    """``argv`` with a deprecated spelling (:data:`DEPRECATED_ALIASES`) replaced by the current one (the
    command is the first word that is not an option), after one line on stderr: ``genolong finetune
    promoter: deprecated, use genolong promoter finetune``. A retired group alone (``genolong finetune
    --help``) is a usage error naming the new spellings (SystemExit 2)."""
    start = next((i for i, word in enumerate(argv) if not word.startswith("-")), len(argv))
    for old, new in DEPRECATED_ALIASES.items():
        if tuple(argv[start:start + len(old)]) == old:
            print(f"genolong {' '.join(old)}: deprecated, use genolong {' '.join(new)}", file=sys.stderr)
            return [*argv[:start], *new, *argv[start + len(old):]]
    word = argv[start] if start < len(argv) else None
    groups = {new[0] for new in DEPRECATED_ALIASES.values()}  # current groups (genome) keep their own errors
    retired = [new for old, new in DEPRECATED_ALIASES.items() if old[0] == word and word not in groups]
    if retired:  # a retired group without a task it had, e.g. `genolong finetune --help`
        uses = " or ".join(f"genolong {' '.join(new)}" for new in retired)
        print(f"genolong {word}: deprecated, use {uses}", file=sys.stderr)
        raise SystemExit(2)
    return argv


def _configure_logging(verbose: bool) -> None:
    """genolong's log lines on stderr, DEBUG lines (and Lightning's, :mod:`genolong.runtime.quiet`) only when
    ``verbose``; set on every call, as one process may run several commands."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    level = logging.DEBUG if verbose else logging.INFO
    logging.getLogger().setLevel(level)
    logging.getLogger("genolong").setLevel(level)


def check_environment() -> None:
    """Refuse, in one line, an environment no command can work in: a closed standard output (every line
    would go nowhere with exit 0) and a deleted working directory (every relative path fails)."""
    if sys.stdout is None:
        raise UserError("standard output is closed; redirect it to a file or /dev/null")
    if genolong.WORKING_DIRECTORY_GONE:
        raise UserError("the working directory no longer exists; cd to an existing directory")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(resolve_aliases(sys.argv[1:] if argv is None else list(argv)))
    except SystemExit as stop:  # --help, --version, or a usage error already printed
        return stop.code if isinstance(stop.code, int) else 2
    _configure_logging(args.verbose)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:  # warnings filters a quiet run adds (genolong.training.console) end with the command
        check_environment()
        with warnings.catch_warnings(), interrupts.handled(), guarded(args), ranks.watched(f"genolong {args.command_name}"):
            result = args.func(args)
            sys.stdout.flush()  # a full or closed pipe fails here, within the output policy
    except BrokenPipeError:  # `genolong ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more at exit either
        return 128 + signal.SIGPIPE
    except UserError as err:
        print(f"genolong {args.command_name}: error: {err}", file=sys.stderr)
        return err.exit_code
    except Exception as err:  # a full disk where the command declared no output (a cache): guarded handles the rest
        if not disk_full(err):
            raise
        where = getattr(err, "filename", None) or "a file"
        print(f"genolong {args.command_name}: error: {disk_full_error(err, where, 'nothing partial kept')}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print(f"genolong {args.command_name}: {stop or 'interrupted'}", file=sys.stderr)
        return interrupts.exit_code(stop)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
