"""``genolong promoter|chromatin|task finetune``: fine-tune a classifier for a registered task (BigBird
App. F.2 / F.3; :mod:`genolong.tasks.task`); each task group adds the parser with :func:`add_parser`."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import add_config_arguments, config_overrides, model_directory
from genolong.cli.outputs import OutputDirectory, declare


def add_parser(commands, task: str, help_text: str, details: str) -> None:
    """Add ``finetune`` for the registered ``task`` to the sub-commands of its group."""
    parser = commands.add_parser(
        "finetune", help=help_text,
        description=f"{help_text[0].upper()}{help_text[1:]}: {details} The classifier is written to "
                    "OUT/model, the validation and test metrics to OUT/report.json.")
    parser.add_argument("--data", type=Path, required=True, help="dataset directory")
    parser.add_argument("--out", type=Path, required=True, help="run directory")
    parser.add_argument("--model", type=model_directory, default=None, metavar="DIR",
                        help="pretrained model directory (e.g. a pretrain run's OUT/model); its architecture and attention are kept (change the attention with --backbone); default: from scratch")
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="from scratch: use this tokenizer instead of training one on the training split")
    parser.add_argument("--config", default=None, help=f"preset name or YAML file (default: {task}_tiny)")
    add_config_arguments(parser, ["--backbone", "--max-steps", "--val-every", "--batch-size", "--learning-rate",
                                  "--seed", "--devices", "--accelerator", "--precision", "--mode"])
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoints/last.ckpt")
    parser.set_defaults(task=task)
    declare(parser, run, inputs=["data", "model", "tokenizer", "config"],
            directories={"out": OutputDirectory("finetune")})


def run(args) -> None:
    from genolong.tasks.task import load_finetune_config, report_summary
    from genolong.training.finetune import run_finetune

    overrides = config_overrides(args)
    config = load_finetune_config(args.task, args.config, overrides)
    asked = [key.removeprefix("model.") for key in overrides if key.startswith("model.")]
    report = run_finetune(args.data, args.out, config, pretrained=args.model, tokenizer_dir=args.tokenizer,
                          asked=asked, resume=args.resume)
    if "stopped_at_step" in report:
        print(f"stopped at step {report['stopped_at_step']}; continue with --resume")
        return
    if not report:  # a distributed rank other than 0
        return
    print(f"best {report['monitor']['metric']} {report['monitor']['best']:.4f} at step {report['best_step']} "
          f"of {report['steps']}{' (early stopping)' if report['early_stopped'] else ''}")
    print(report_summary(report))
    print(f"model: {args.out / 'model'}   report: {args.out / 'report.json'}")
