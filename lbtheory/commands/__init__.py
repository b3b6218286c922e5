"""CLI subcommands, one module each (see :mod:`lbtheory.cli`); the CLI is their only caller, so
this package exports nothing (its public contract is the command line)."""

__all__: list[str] = []
