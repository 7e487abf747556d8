"""``genolong compare`` (every backbone under one budget) and ``genolong context-ablation``."""

from __future__ import annotations

from pathlib import Path

from genolong.cli.arguments import non_negative_int
from genolong.cli.outputs import OutputDirectory, declare
from genolong.core import interrupts
from genolong.core.errors import UserError


def _add_common(parser) -> None:
    parser.add_argument("--genome", type=Path, required=True, help="pretraining genome FASTA (plain, gzip, bgzip)")
    parser.add_argument("--preset", default="tiny",
                        help="comparison preset: micro, tiny, small, base, or a YAML file (default: %(default)s)")
    parser.add_argument("--out", type=Path, required=True,
                        help="output directory, shared by both commands (tokenizer and corpus are built once)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of every run (default: %(default)s)")


def register(subparsers) -> None:
    compare = subparsers.add_parser(
        "compare", help="pretrain and fine-tune every backbone under one budget; tables and plots",
        description="For each backbone, with the same tokenizer, corpus, model size, steps, batch and seed: "
                    "MLM pretraining, then promoter fine-tuning. Records parameters, training tokens/s, peak "
                    "memory, validation BPC, promoter test F1 / AUROC / MCC (k-mer baseline beside them) and "
                    "inference windows/s into OUT/comparison.csv and .md, with OUT/bpc_vs_step.png and "
                    "OUT/quality_vs_speed.png. Rerun the same command to resume: finished backbones are "
                    "read back, interrupted runs continue from their checkpoints.")
    _add_common(compare)
    compare.add_argument("--promoters", type=Path, required=True,
                         help="a `genolong promoter prepare` dataset directory")
    compare.add_argument("--backbones", default=None,
                         help="comma-separated (default: every backbone of the preset, in its order)")
    declare(compare, run_compare, inputs=["genome", "preset", "promoters"],
            directories={"out": OutputDirectory("compare")})

    ablation = subparsers.add_parser(
        "context-ablation", help="pretrain one model at several context lengths with equal tokens seen",
        description="BigBird App. F, Fig. 8: the preset's model pretrained with each max length at the same "
                    "tokens per step and steps; final and running validation BPC per length go to "
                    "OUT/context_ablation.csv and .md and OUT/context_ablation.png. Resumable like compare.")
    _add_common(ablation)
    ablation.add_argument("--backbones", default=None, help="comma-separated (default: the preset's)")
    ablation.add_argument("--lengths", default=None, help="comma-separated max lengths (default: the preset's)")
    declare(ablation, run_ablation, inputs=["genome", "preset"],
            directories={"out": OutputDirectory("compare")})


def _workspace(args):
    from genolong.experiments.compare import Workspace, load_compare_config

    return Workspace(args.genome, args.out, load_compare_config(args.preset), seed=args.seed)


def _run_and_report(space, run, table: str, columns) -> None:
    """``run()`` the experiment (stopped: how to continue), then print its table."""
    from genolong.evaluation.compare_report import markdown_table
    from genolong.experiments.compare import Interrupted
    from genolong.training.stopping import TrainingStopped

    try:
        rows = run()
    except Interrupted as stopped:
        interrupts.stop(f"{stopped.args[0]} stopped early; run the same command again to continue")
    except TrainingStopped as stopped:
        raise _rerun_to_continue(stopped) from None
    print(markdown_table(rows, columns), end="")
    print(f"results: {space.out / table}")


def run_compare(args) -> None:
    from genolong.evaluation.compare_report import COLUMNS
    from genolong.experiments.compare import parse_backbones, run_comparison

    space = _workspace(args)
    backbones = parse_backbones(args.backbones, space.config)
    _run_and_report(space, lambda: run_comparison(space, args.promoters, backbones), "comparison.csv", COLUMNS)


def run_ablation(args) -> None:
    from genolong.evaluation.compare_report import ABLATION_COLUMNS
    from genolong.experiments.compare import parse_backbones, run_context_ablation

    space = _workspace(args)
    ablation = space.config.ablation
    backbones = parse_backbones(args.backbones, space.config) if args.backbones else ablation.backbones
    try:
        lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else ablation.lengths
    except ValueError:
        raise UserError(f"--lengths {args.lengths!r}: expected comma-separated integers") from None
    _run_and_report(space, lambda: run_context_ablation(space, backbones, lengths), "context_ablation.csv",
                    ABLATION_COLUMNS)


def _rerun_to_continue(stopped):
    """A signal stopped one of the training runs (:class:`~genolong.training.stopping.TrainingStopped`):
    comparisons resume by running the same command."""
    where = "without a checkpoint" if stopped.step is None else f"at step {stopped.step} of a training run"
    return type(stopped)(stopped.signum, stopped.step, f"stopped {where}; run the same command again to continue")
