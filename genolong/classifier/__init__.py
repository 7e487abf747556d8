"""The fine-tuned model artifact, read by training, evaluation and inference: its task description
(:mod:`~genolong.classifier.task_info`), directory and token encoding
(:mod:`~genolong.classifier.directory`), k-mer component, embedder, and windowed scoring of records
(:mod:`~genolong.classifier.records`).
"""
