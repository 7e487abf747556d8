"""``genolong benchmark SUITE.yaml --out DIR``: benchmark suites over models, fine-tuning modes and seeds;
``genolong benchmark report DIR`` redraws the summary and the figure."""

from __future__ import annotations

from pathlib import Path

import yaml

from genolong.cli.arguments import add_config_arguments, config_overrides
from genolong.cli.outputs import OutputDirectory, declare
from genolong.core.errors import UserError

REPORT = "report"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "benchmark", help="run a benchmark suite (tasks x models x modes x seeds) with intervals and leakage checks",
        description="Read every task of SUITE.yaml (layouts gue, nt, genomic_benchmarks, genomic_benchmarks_csv, "
        "fasta, csv) into OUT/tasks, check the suite (layouts, splits, problem types) before any training, then "
        "fine-tune every task x model x mode x seed and write OUT/results.csv, OUT/summary.md (mean and 95% "
        "t-interval over seeds, the k-mer baseline, leakage between train and test) and OUT/figure.png. A rerun "
        "reads finished cells back and continues an interrupted one. `genolong benchmark report DIR` redraws "
        "the summary and the figure of DIR. --set KEY=VALUE sets a key of the suite (--set root=GUE_DIR: the folder "
        "the task paths are relative to).")
    parser.add_argument("suite", type=Path, metavar="SUITE.yaml", help="the suite, or the word `report`")
    parser.add_argument("directory", type=Path, nargs="?", help="report: the benchmark directory to redraw")
    parser.add_argument("--out", type=Path, help="the benchmark directory (created, or continued)")
    add_config_arguments(parser, ())
    declare(parser, run, inputs=["suite"], directories={"out": OutputDirectory("benchmark"),
                                                   "directory": OutputDirectory("benchmark")})


def run(args) -> None:
    from genolong.experiments.suites.report import redraw

    if str(args.suite) == REPORT:
        if args.directory is None or args.out is not None:
            raise UserError("usage: genolong benchmark report DIR")
        redraw(args.directory)
        print(f"wrote {args.directory / 'summary.md'} and {args.directory / 'figure.png'}")
        return
    if args.out is None or args.directory is not None:
        raise UserError("usage: genolong benchmark SUITE.yaml --out DIR")
    rows = run_suite(args.suite, args.out, overrides=config_overrides(args))
    print(f"wrote {args.out / 'results.csv'} ({len(rows)} rows), {args.out / 'summary.md'}, {args.out / 'figure.png'}")


def run_suite(suite_path: Path, out: Path, overrides: dict | None = None, **options) -> list[dict]:
    """Load the suite (with the ``--set`` ``overrides``) and pin it, prepare its tasks in ``out/tasks``, run
    it (``options``: see :func:`genolong.experiments.suites.runner.run_benchmark`)."""
    from genolong.core.files import atomic_write_text
    from genolong.experiments.suites.runner import run_benchmark, task_directory
    from genolong.experiments.suites.suite import load_suite, pinned
    from genolong.prep.benchmark_layouts import prepare_layout

    suite = load_suite(suite_path, overrides)
    if suite.skipped:
        print(f"skipped {len(suite.skipped)} tasks whose folder is not under {suite.root or suite_path.parent}: "
              + ", ".join(suite.skipped))
    text = yaml.safe_dump(pinned(suite), sort_keys=False)
    saved = out / "suite.yaml"
    if saved.is_file() and saved.read_text() != text:
        raise UserError(f"{out} holds a benchmark of another suite (its suite.yaml differs)",
                        hint="use another --out, or the suite that made it")
    out.mkdir(parents=True, exist_ok=True)
    for task in suite.tasks:
        data = task_directory(out, task) / "data"
        if not (data / "manifest.json").is_file():
            prepare_layout(task.layout, data, path=None if task.path is None else Path(task.path),
                           classes={k: Path(v) for k, v in task.classes.items()},
                           genome=None if task.genome is None else Path(task.genome), positive=task.positive,
                           fractions=task.fractions, valid_fraction=task.valid_fraction, split_seed=task.split_seed,
                           max_rows=task.max_rows)
    atomic_write_text(saved, text)
    return run_benchmark(suite, out, **options)
