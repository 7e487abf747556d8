"""Metrics, k-mer models and their stack with the network, chromatin and cross-source evaluation, leakage."""
