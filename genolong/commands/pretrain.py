"""``genolong pretrain``: tokenizer, corpus and MLM training in one command."""

from __future__ import annotations

from pathlib import Path

from genolong.outputs import OutputDirectory, declare

#: Steps of the embedded default run (no --genome) unless --max-steps says otherwise.
SAMPLE_STEPS = 100


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "pretrain", help="pretrain a model with MLM on a genome (tokenizer -> corpus -> training)",
        description="Runs the tokenizer (unless --tokenizer), the corpus and MLM training into --out, "
                    "skipping steps whose outputs exist and match. With no --genome: the shipped 56 kbp "
                    f"human sample, the tiny preset and {SAMPLE_STEPS} steps.")
    parser.add_argument("--genome", type=Path, default=None, help="FASTA (plain, gzip or bgzip)")
    parser.add_argument("--tokenizer", type=Path, default=None, help="use this tokenizer instead of training one")
    parser.add_argument("--config", default="tiny",
                        help="preset name (tiny, base, or one per backbone) or a YAML file (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("runs/pretrain"), help="run directory (default: %(default)s)")
    parser.add_argument("--backbone", default=None, help="override the attention (full, bigbird, longformer, ...)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--devices", default=None, help="Lightning devices (e.g. 2, or auto)")
    parser.add_argument("--num-nodes", type=int, default=None)
    parser.add_argument("--strategy", default=None, help="Lightning strategy (ddp for multi-GPU / multi-node)")
    parser.add_argument("--accelerator", default=None, help="cpu, gpu or auto")
    parser.add_argument("--precision", default=None, help="auto, 32-true, bf16-mixed, 16-mixed")
    parser.add_argument("--resume", action="store_true", help="continue from out/checkpoints/last.ckpt")
    parser.set_defaults(func=run)
    declare(parser, inputs=["genome", "tokenizer", "config"], directories={"out": OutputDirectory("pretrain")})


def run(args) -> int:
    from genolong.tasks.pretrain import load_pretrain_config, run_pretrain

    sample = args.genome is None
    overrides = {
        "model.backbone": args.backbone,
        # the shipped sample is ~100 windows: 100 steps of 8 are 8 passes over it, minutes on 2 cores
        "train.max_steps": args.max_steps if args.max_steps is not None or not sample else SAMPLE_STEPS,
        "train.batch_size": args.batch_size,
        "train.devices": int(args.devices) if args.devices and args.devices.isdigit() else args.devices,
        "train.num_nodes": args.num_nodes,
        "train.strategy": args.strategy,
        "train.accelerator": args.accelerator,
        "train.precision": args.precision,
    }
    config = load_pretrain_config(args.config, {k: v for k, v in overrides.items() if v is not None})
    genome = args.genome
    if sample:
        from genolong.resources import sample_genome

        genome = sample_genome()
        print(f"no --genome given: pretraining on the shipped sample {genome.name} (hg19 chr17 fragment + "
              f"chrM), preset {args.config!r}, {config.train.max_steps} steps")
    report = run_pretrain(genome, args.out, config, tokenizer_dir=args.tokenizer, resume=args.resume)
    if "stopped_at_step" in report:
        print(f"stopped at step {report['stopped_at_step']}; continue with --resume")
        return 0
    print(f"validation: loss {report['val_loss']:.4f} nats/token, {report['val_bpc']:.4f} bits/bp "
          f"(token unigram: {report['unigram_bpc']:.4f} bits/bp)")
    print(f"model: {args.out / 'model'}   report: {args.out / 'report.json'}   "
          f"curve: {args.out / 'learning_curve.png'}")
    return 0
