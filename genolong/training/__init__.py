"""Lightning training: the module base, the Trainer, MLM pretraining, the fine-tuning run and its
modes, checkpoints, stopping on signals and the training console."""
