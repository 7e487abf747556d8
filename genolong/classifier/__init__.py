"""The fine-tuned model artifact, below training, evaluation and inference, which all read it.

* :mod:`~genolong.classifier.task_info`: ``genolong_task.json`` (task, window, output names,
  thresholds, provenance), readable without torch;
* :mod:`~genolong.classifier.kmer_component`: the k-mer model whose logit a classifier adds;
* :mod:`~genolong.classifier.directory`: a classifier directory (model, tokenizer, task info),
  DNA -> token batches -> outputs per problem type, strand averaging;
* :mod:`~genolong.classifier.embedder`: a model directory's encoder as pooled or per-base
  embeddings (``genolong embed``, and the probe fine-tuning mode's cached inputs);
* :mod:`~genolong.classifier.records`: records cut into windows, windows scored in batches and
  merged back per record, as prediction, fine-tuning and evaluation all do.
"""
