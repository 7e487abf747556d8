"""Inference beyond whole-record prediction: variant effects and attributions.

* :mod:`~genolong.inference.variants` reads VCF/TSV variants, one item per allele;
* :mod:`~genolong.inference.variant_windows` checks them against the genome, left-normalises them
  and builds the reference and alternative windows;
* :mod:`~genolong.inference.variant_scoring` runs a classifier on those windows in batches;
  :mod:`~genolong.inference.mlm_llr` scores them zero-shot with a masked language model;
* :mod:`~genolong.inference.variant_output` writes the scores (long TSV, wide HDF5) and
  :mod:`~genolong.inference.variant_vcf` the input VCF annotated with the top effects;
* :mod:`~genolong.inference.variant_run` drives a resumable ``score-variants`` run;
* :mod:`~genolong.inference.explain` computes in-silico mutagenesis and gradient attributions,
  :mod:`~genolong.inference.explain_run` the ``explain`` command's records, arrays and logos;
* :mod:`~genolong.inference.labels` selects model outputs by name or class.
"""
