"""The acceptance and speed checks of ``genolong bench``: attention kernels, converted models,
device checks (the bf16 probe and memory high-water marks they use: :mod:`genolong.runtime.cpu_bf16`,
:mod:`genolong.core.memory`). Not the suites of ``genolong benchmark`` (:mod:`genolong.experiments.suites`)
nor the scripts of ``benchmarks/``."""
