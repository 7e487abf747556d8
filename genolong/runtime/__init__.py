"""The torch runtime: precision (``auto``, bf16 autocast and the CPU bf16 probe), the ranks of a
distributed launch, device checks and Lightning's console quieted."""
