"""On-disk datasets read at train and evaluation time."""
