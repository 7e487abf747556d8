"""The ground every package stands on: user errors, atomic files and directory markers, locks,
interrupts, registries, progress bars, memory high-water marks. Standard library and numpy only:
no torch, so that anything may import it and the command line starts at once."""
