"""Inference beyond whole-record prediction: genome-wide tracks, variant effects and attributions.

Tracks (``genolong scan``): window plans, batched scoring through Lightning's predict loop,
and tracks (bigWig, bedGraph, HDF5, BED) written from per-chromosome parts.

* :mod:`~genolong.inference.plan`: what to scan (chromosomes, BED regions) cut into position
  bins, the window scored for each bin, and fixed batches of bins.
* :mod:`~genolong.inference.windows`: a batch of bins -> token ids (genome read by random
  access, N-rich windows skipped, per-base tokenizers vectorised).
* :mod:`~genolong.inference.loop`: the Lightning predict loop (one process or many ranks), shared
  with ``score-variants`` (:mod:`~genolong.inference.variant_loop`) and ``predict-promoter`` /
  ``chromatin predict`` on several ranks (:mod:`~genolong.inference.record_loop`).
* :mod:`~genolong.inference.parts`: per-rank, per-chromosome score files; merge and resume.
* :mod:`~genolong.inference.tracks`: the writers.
* :mod:`~genolong.inference.scan`: ``genolong scan`` end to end.

Variant effects (``genolong score-variants``) and attributions (``genolong explain``):

* :mod:`~genolong.inference.variants` reads VCF/TSV variants, one item per allele;
* :mod:`~genolong.inference.variant_windows` checks them against the genome, left-normalises them
  and builds the reference and alternative windows;
* :mod:`~genolong.inference.variant_tokens` gives their token ids, tokenising shared sequence once;
* :mod:`~genolong.inference.variant_scoring` runs a classifier on those windows in batches;
  :mod:`~genolong.inference.mlm_llr` scores them zero-shot with a masked language model;
* :mod:`~genolong.inference.variant_output` writes the scores (long TSV, wide HDF5) and
  :mod:`~genolong.inference.variant_vcf` the input VCF annotated with the top effects;
* :mod:`~genolong.inference.variant_loop` shares the chunks of variants across ranks and
  :mod:`~genolong.inference.variant_run` drives a resumable ``score-variants`` run;
* :mod:`~genolong.inference.explain` computes in-silico mutagenesis and gradient attributions,
  :mod:`~genolong.inference.explain_run` the ``explain`` command's records, arrays and logos;
* :mod:`~genolong.inference.labels` selects model outputs by name or class.
"""
