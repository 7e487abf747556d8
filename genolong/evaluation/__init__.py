"""Evaluation beyond one split: promoter metrics per pair of sources, calibration."""
