"""Attributions (``genolong explain``): in-silico mutagenesis, gradients, sequence logos."""
