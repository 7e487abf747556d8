"""The on-disk datasets read at train and evaluation time: the MLM corpus (and the builder
pretraining runs on the fly, :mod:`.corpus_build`), MLM windows, the prepared promoter and
chromatin datasets. Their other builders live in ``data_prep``, which this package never imports."""
