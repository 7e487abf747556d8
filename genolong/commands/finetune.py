"""``genolong promoter finetune`` and ``genolong chromatin finetune``: fine-tune a classifier
(BigBird App. F.2 / F.3). The task groups (:mod:`genolong.commands.promoter`,
:mod:`genolong.commands.chromatin`) add the parser with :func:`add_parser`."""

from __future__ import annotations

from pathlib import Path

from genolong.outputs import OutputDirectory, declare

TASK_HELP = {
    "promoter": (
        "fine-tune a promoter classifier on a `genolong promoter prepare` dataset",
        "early stopping on validation F1; the decision threshold is chosen on validation; test F1, "
        "precision, recall, MCC, AUROC and AUPRC are printed next to the k-mer baseline and saved "
        "in OUT/report.json. The classifier is written to OUT/model.",
    ),
    "chromatin": (
        "fine-tune the 919-profile chromatin classifier on a `genolong chromatin prepare` dataset",
        "BCE with positive weight (8 in the presets, as BigBird), early stopping on the validation "
        "mean ROC AUC; per-profile test AUCs go to OUT/aucs.csv, class medians are printed next to "
        "DeepSEA and BigBird. The classifier is written to OUT/model.",
    ),
}


def add_parser(commands, task: str) -> None:
    """Add ``finetune`` for ``task`` (promoter or chromatin) to the sub-commands of its group."""
    help_text, description = TASK_HELP[task]
    parser = commands.add_parser(
        "finetune", help=help_text, description=f"{help_text[0].upper()}{help_text[1:]}: {description}"
    )
    parser.add_argument("--data", type=Path, required=True, help="dataset directory")
    parser.add_argument("--out", type=Path, required=True, help="run directory")
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="pretrained model directory (e.g. a pretrain run's OUT/model); default: from scratch",
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="from scratch: use this tokenizer instead of training one on the training split",
    )
    parser.add_argument("--config", default=None, help=f"preset name or YAML file (default: {task}_tiny)")
    parser.add_argument("--backbone", default=None, help="override the attention (full, bigbird, ...)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--val-every", type=int, default=None, help="validate every N steps")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--devices", default=None, help="Lightning devices (e.g. 2, or auto)")
    parser.add_argument("--accelerator", default=None, help="cpu, gpu or auto")
    parser.add_argument("--precision", default=None, help="auto, 32-true, bf16-mixed, 16-mixed")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoints/last.ckpt")
    parser.set_defaults(func=run, task=task)
    declare(parser, inputs=["data", "model", "tokenizer", "config"],
            directories={"out": OutputDirectory("finetune")})


def run(args) -> int:
    from genolong.tasks.classify import load_classify_config, run_finetune

    overrides = {
        "model.backbone": args.backbone,
        "train.max_steps": args.max_steps,
        "train.val_every_steps": args.val_every,
        "train.batch_size": args.batch_size,
        "train.learning_rate": args.learning_rate,
        "train.seed": args.seed,
        "train.devices": int(args.devices) if args.devices and args.devices.isdigit() else args.devices,
        "train.accelerator": args.accelerator,
        "train.precision": args.precision,
    }
    config = load_classify_config(
        args.task, args.config, {k: v for k, v in overrides.items() if v is not None}
    )
    report = run_finetune(
        args.data, args.out, config, pretrained=args.model, tokenizer_dir=args.tokenizer, resume=args.resume
    )
    if "stopped_at_step" in report:
        print(f"stopped at step {report['stopped_at_step']}; continue with --resume")
        return 0
    if not report:  # a distributed rank other than 0
        return 0
    print(
        f"best {report['monitor']['metric']} {report['monitor']['best']:.4f} at step {report['best_step']} "
        f"of {report['steps']}{' (early stopping)' if report['early_stopped'] else ''}"
    )
    print(summary(report))
    print(f"model: {args.out / 'model'}   report: {args.out / 'report.json'}")
    return 0


def summary(report: dict) -> str:
    """The test results of a fine-tuning report as a printed table."""
    if report["task"] == "promoter":
        from genolong.evaluation.metrics import format_metrics_table

        name = f"genolong {report['backbone']}"
        rows = {f"{name} valid": report["valid"], f"{name} test": report["test"]}
        if "kmer_baseline" in report:
            rows[f"kmer baseline (C={report['kmer_baseline']['C']:g}) test"] = report["kmer_baseline"]["test"]
        table = format_metrics_table(rows)
        if "by_source" in report and "by_source" in report.get("kmer_baseline", {}):
            from genolong.evaluation.cross_source import format_pair_table

            table += "\n\nper source pair (test: held-out sources; random_test: random split of the train sources):\n"
            table += format_pair_table(report["by_source"], report["kmer_baseline"]["by_source"])
        return table
    if "test" not in report:
        return "no test split: no test AUCs"
    from genolong.evaluation.metrics import format_chromatin_medians

    test = report["test"]
    return (
        f"test: {test['rows']:,} rows, {test['profiles_with_auc']} profiles with an AUC -> {test['aucs']}\n"
        + format_chromatin_medians({f"genolong {report['backbone']}": test["median_roc_auc"]})
    )
