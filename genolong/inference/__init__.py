"""Inference beyond whole-record prediction: variant effects and attributions.

* :mod:`~genolong.inference.variants` reads VCF/TSV variants and normalises them;
* :mod:`~genolong.inference.variant_windows` checks them against the genome and builds windows;
* :mod:`~genolong.inference.variant_scoring` runs the model on ref/alt windows in batches;
* :mod:`~genolong.inference.variant_output` writes the scores (long TSV, wide HDF5), resumably;
* :mod:`~genolong.inference.mlm_llr` scores variants zero-shot with a masked language model;
* :mod:`~genolong.inference.explain` computes in-silico mutagenesis and gradient attributions.
"""
