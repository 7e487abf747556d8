"""``genolong task prepare`` as one call: read one kind of input (:mod:`genolong.datasets.task_inputs`)
and write the task dataset (:mod:`genolong.prep.task_dataset`). Given splits (``--table SPLIT=PATH``,
``--class SPLIT:NAME=FASTA``) are never pooled: ``--split random`` or ``chromosome`` with them is refused."""

from __future__ import annotations

from pathlib import Path

from genolong.core.errors import UserError
from genolong.datasets.task_inputs import Windows, read_bed, read_class_fastas, read_table
from genolong.dna.genome import Genome
from genolong.prep.task_dataset import SplitPlan, prepare_task

#: Split names a table may be given under (``dev`` is GUE's and NT's name for valid).
SPLIT_NAMES = {"train": "train", "valid": "valid", "dev": "valid", "validation": "valid", "test": "test"}


def prepare_from_arguments(args) -> dict:
    """Read the inputs ``genolong task prepare`` was given (``args``) and write ``args.out``; returns the manifest."""
    kinds = [name for name in ("classes", "tables", "regions") if getattr(args, name)]
    if len(kinds) != 1:
        raise UserError("give one kind of input: --class NAME=FASTA (per class), --table or --regions with --genome")
    class_order, options, label_lists = None, {}, {}
    if args.classes:
        rows, label_columns, class_order = _read_classes(args.classes)
        inputs = [c.path for c in args.classes]
    elif args.tables:
        rows, label_columns, label_lists = _read_tables(args)
        inputs = [t.path for t in args.tables]
    else:
        if args.genome is None or args.window is None:
            raise UserError("--regions needs --genome and --window")
        windows = Windows(args.window, args.background, args.background_distance, args.seed)
        with Genome(args.genome) as genome:
            rows, label_columns = read_bed(args.regions, genome, windows, args.label_columns)
        inputs = [args.regions, args.genome]
        options = {"window": args.window, "background": args.background,
                   "background_distance": args.background_distance}
        if not args.label_columns:
            class_order = ["region", "background"]
    given = [row for row in rows if row.split is not None]
    if given and args.split not in (None, "given"):
        held_out = next((row for row in given if row.split != "train"), given[0])
        raise UserError(f"{held_out.where[0]} is given as the {held_out.split} split: --split {args.split} would pool "
                        "the given splits and split them again", hint="leave out --split to keep them (valid is drawn "
                        "from train when not given), or give the rows as one input")
    plan = SplitPlan(args.split or ("given" if given else "random"), args.fractions, args.seed, args.valid_chroms,
                     args.test_chroms)
    return prepare_task(rows, label_columns, args.out, inputs=inputs, plan=plan, problem_type=args.problem_type,
                        positive=args.positive, class_order=class_order, options=options,
                        duplicates=args.duplicates, label_lists=label_lists)


def _split_of(label: str, option: str) -> str:
    split = SPLIT_NAMES.get(label)
    if split is None:
        raise UserError(f"{option}: the split must be one of {sorted(SPLIT_NAMES)}, got {label!r}")
    return split


def _read_classes(classes) -> tuple[list, list[str], list[str]]:
    """Rows of ``--class [SPLIT:]NAME=FASTA`` files (all with a split, or none), their label columns,
    and the class names in the order first given."""
    if len(classes) < 2 or any(c.label is None for c in classes):
        raise UserError("--class needs NAME=FASTA for at least two classes")
    by_split: dict[str | None, list] = {}
    for c in classes:
        prefix, sep, name = c.label.partition(":")
        if sep and not name:
            raise UserError(f"--class {c.label}=...: expected SPLIT:NAME=FASTA, the class name is empty")
        split = _split_of(prefix, f"--class {c.label}=...") if sep else None
        by_split.setdefault(split, []).append((name if sep else c.label, c.path))
    if None in by_split and len(by_split) > 1:
        raise UserError("give every --class as NAME=FASTA, or every one as SPLIT:NAME=FASTA")
    rows = [row for split, files in by_split.items() for row in read_class_fastas(files, split)[0]]
    order = list(dict.fromkeys(name for files in by_split.values() for name, _ in files))
    return rows, ["class"], order


def _read_tables(args) -> tuple[list, list[str], dict[str, int]]:
    """Rows of one table, or of a table per split (``SPLIT=PATH``) with the same label columns; those
    columns and the list columns read as a label per element."""
    named = [t.label is not None for t in args.tables]
    if any(named) and not all(named) or (not any(named) and len(args.tables) > 1):
        raise UserError("give one --table PATH, or --table SPLIT=PATH for each split")
    rows, label_columns, label_lists = [], None, {}
    for table in args.tables:
        split = _split_of(table.label, f"--table {table.label}=...") if table.label is not None else None
        found = read_table(table.path, sequence_column=args.sequence_column, label_columns=args.label_columns,
                           id_column=args.id_column, header=not args.no_header, split=split)
        if label_columns is not None and found.label_columns != label_columns:
            raise UserError(f"{table.path}: label columns {found.label_columns} differ from the first table's "
                            f"{label_columns}")
        rows, label_columns, label_lists = rows + found.rows, found.label_columns, found.label_lists
    return rows, label_columns, label_lists


def summary(manifest: dict, out: Path) -> list[str]:
    """The lines ``genolong task prepare`` prints about the task written from ``manifest``."""
    problem = manifest["problem_type"]
    why = "as --problem-type says" if manifest["problem_type_from"] == "--problem-type" else "inferred from the labels"
    rows = ", ".join(f"{name} {count:,}" for name, count in manifest["rows"].items())
    outputs = manifest["outputs"]
    shown = ", ".join(outputs[:5]) + (f", ... ({len(outputs)} in all)" if len(outputs) > 5 else "")
    lines = [f"wrote {out}: {problem} task ({why}), outputs {shown}; rows {rows}"]
    if manifest["classes"] is not None:
        positive = f"; positive: {manifest['positive']} (--positive picks it)" if manifest["positive"] else ""
        lines.append(f"classes: {', '.join(manifest['classes'])}{positive}")
    for column, length in manifest["label_lists"].items():
        lines.append(f"label column {column!r} holds lists of {length}: read as {length} label columns "
                     f"{column}_0..{column}_{length - 1}, a {problem} task")
    carved = manifest["split"].get("valid_from_train")
    if carved:
        lines.append(f"valid: no valid split given; drew {carved['fraction']:g} of each class of train (seed "
                     f"{carved['seed']}), {manifest['rows']['valid']:,} rows")
    lines.append(f"duplicates: {manifest['duplicates']['line']}")
    lines.append(f"leakage: {manifest['leakage']['line']}")
    return lines
