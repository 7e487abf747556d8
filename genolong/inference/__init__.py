"""Running trained models on DNA: one subpackage per command family, on shared pieces.

Shared:

* :mod:`genolong.classifier` (below this package): the classifier directory, DNA -> token
  batches -> probabilities, strand averaging, records cut into windows;
* :mod:`~genolong.inference.loop`: the Lightning predict loop (one process or many ranks) and the
  :class:`~genolong.inference.loop.PartWriter` every multi-device command writes through;
* :mod:`~genolong.inference.labels`: model outputs selected by name or class;
* :mod:`~genolong.inference.bed`: BED reading.

Subpackages:

* :mod:`~genolong.inference.predict` (``predict-promoter``, ``chromatin predict``): FASTA records
  cut into windows (:mod:`genolong.classifier.records`), scored and merged per record (``fasta``,
  ``loop`` on several ranks), written as tables and BED (``writers``);
* :mod:`~genolong.inference.scan` (``genolong scan``): what to scan cut into bins (``plan``), bins
  -> token ids (``windows``), per-chromosome score files (``parts``), bigWig / bedGraph / HDF5 /
  BED tracks (``tracks``), the run end to end (``run``), a promoter model's scan threshold on
  background genomes (``threshold``);
* :mod:`~genolong.inference.variants` (``genolong score-variants``): VCF/TSV variants
  (``reader``), checked against the genome and left-normalised into reference and alternative
  windows (``windows``), their token ids with shared sequence tokenised once (``tokens``),
  classifier scores (``scoring``) or zero-shot masked-LM scores (``mlm_llr``), long TSV / wide
  HDF5 output (``output``), the annotated VCF (``vcf_annotation``), chunks across ranks
  (``loop``) and the resumable run (``run``);
* :mod:`~genolong.inference.explain` (``genolong explain``): in-silico mutagenesis and gradient
  attributions (``attributions``), the command's records, arrays and logos (``run``).
"""
