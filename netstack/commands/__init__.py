"""One module per ``netstack`` subcommand; each exposes ``register(subparsers)``."""
