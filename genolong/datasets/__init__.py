"""The on-disk datasets read at train and inference time (the MLM corpus, its windows and builder,
the prepared promoter, chromatin and task datasets, a task's inputs); their other builders live in
:mod:`genolong.prep`, which this package never imports."""
