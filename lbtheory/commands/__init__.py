"""CLI subcommands, one module each (see :mod:`lbtheory.cli`)."""
