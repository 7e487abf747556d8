"""``genolong task prepare`` as one call: read one kind of input (:mod:`genolong.datasets.task_inputs`)
and write the task dataset (:mod:`genolong.prep.task_dataset`)."""

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
    kinds = [name for name in ("classes", "tables", "bed") if getattr(args, name)]
    if len(kinds) != 1:
        raise UserError("give one kind of input: --class NAME=FASTA (per class), --table or --bed with --genome")
    class_order, options = None, {}
    if args.classes:
        if len(args.classes) < 2 or any(c.label is None for c in args.classes):
            raise UserError("--class needs NAME=FASTA for at least two classes")
        rows, label_columns = read_class_fastas([(c.label, c.path) for c in args.classes])
        class_order, inputs = [c.label for c in args.classes], [c.path for c in args.classes]
    elif args.tables:
        rows, label_columns, inputs = _read_tables(args)
    else:
        if args.genome is None or args.window is None:
            raise UserError("--bed needs --genome and --window")
        windows = Windows(args.window, args.background, args.background_distance, args.seed)
        with Genome(args.genome) as genome:
            rows, label_columns = read_bed(args.bed, genome, windows, args.label_columns)
        inputs = [args.bed, args.genome]
        options = {"window": args.window, "background": args.background,
                   "background_distance": args.background_distance}
        if not args.label_columns:
            class_order = ["region", "background"]
    split = args.split or ("given" if rows[0].split is not None else "random")
    plan = SplitPlan(split, args.fractions, args.seed, args.valid_chroms, args.test_chroms)
    return prepare_task(rows, label_columns, args.out, inputs=inputs, plan=plan, problem_type=args.problem_type,
                        positive=args.positive, class_order=class_order, options=options)


def _read_tables(args) -> tuple[list, list[str], list[Path]]:
    """Rows of one table, or of a table per split (``SPLIT=PATH``), whose label columns must agree."""
    named = [t.label is not None for t in args.tables]
    if any(named) and not all(named) or (not any(named) and len(args.tables) > 1):
        raise UserError("give one --table PATH, or --table SPLIT=PATH for each split")
    rows, label_columns = [], None
    for table in args.tables:
        split = None
        if table.label is not None:
            split = SPLIT_NAMES.get(table.label)
            if split is None:
                raise UserError(f"--table {table.label}=...: the split must be one of {sorted(SPLIT_NAMES)}")
        found, columns = read_table(table.path, sequence_column=args.sequence_column,
                                    label_columns=args.label_columns, id_column=args.id_column,
                                    header=not args.no_header, split=split)
        if label_columns is not None and columns != label_columns:
            raise UserError(f"{table.path}: label columns {columns} differ from the first table's {label_columns}")
        rows, label_columns = rows + found, columns
    return rows, label_columns, [t.path for t in args.tables]
