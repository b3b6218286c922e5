"""``lbtheory schema topology|scenario``: print the JSON Schema of a file format."""

from __future__ import annotations

import argparse

NAME = "schema"
HELP = ("Print the JSON Schema (draft 2020-12) of the topology or scenario file format, for "
        "editors and validators (docs/topology.md describes every field).")
EPILOG = ("examples:\n  lbtheory schema topology > topology.schema.json\n"
          "  # VS Code (YAML extension): first line of a topology file\n"
          "  # yaml-language-server: $schema=./topology.schema.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``lbtheory schema``."""
    from ..io import SCHEMA_KINDS

    parser.add_argument("kind", choices=SCHEMA_KINDS,
                        help="topology (cells and arcs: equilibrium, stepsize, fluid) or "
                             "scenario (a topology plus the simulation: section: simulate)")


def run(args: argparse.Namespace) -> int:
    """Print the schema."""
    from ..io import schema_text

    print(schema_text(args.kind), end="")
    return 0
