"""Training tasks as Lightning modules: MLM pretraining and the fine-tuning tasks."""
