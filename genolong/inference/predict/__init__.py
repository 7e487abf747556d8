"""Whole-record prediction: FASTA records cut into windows, scored, strand-averaged, written as tables and BED."""
