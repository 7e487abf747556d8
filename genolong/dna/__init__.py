"""DNA: alphabet and FASTA, random-access genomes, the BPE tokenizer."""
