"""The genolong encoder (:mod:`.encoder`), its task heads (:mod:`.heads`), the transformers
configuration (:mod:`.configuration`) and model classes (:mod:`.modeling`), and their Auto-class
registration (:mod:`.auto`)."""
