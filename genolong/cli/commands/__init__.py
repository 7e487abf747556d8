"""One module per command group, each with ``register(subparsers)`` (:data:`genolong.cli.main.COMMAND_MODULES`)."""
