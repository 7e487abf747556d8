"""The on-disk datasets read at train and inference time: the MLM corpus (and the builder
pretraining runs on the fly, :mod:`.corpus_build`), MLM windows, the prepared promoter, chromatin
and task datasets, and a task's inputs (:mod:`.task_inputs`). Their other builders live in
:mod:`genolong.prep`, which this package never imports."""
