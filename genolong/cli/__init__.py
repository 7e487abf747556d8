"""The command line: the entry point (:mod:`.main`), the argument and output policy
(:mod:`.arguments`, :mod:`.outputs`) and one module per command group (:mod:`.commands`)."""
