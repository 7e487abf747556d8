"""Variant effects (``genolong score-variants``): VCF/TSV in, reference and alternative windows, scores, resumable output."""
