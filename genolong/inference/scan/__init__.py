"""Genome-wide tracks (``genolong scan``): window plans, batched scoring, per-chromosome parts, track writers."""
