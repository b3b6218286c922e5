"""The help formatter every ``lbtheory`` command and sub-action uses (one definition)."""

from __future__ import annotations

import argparse

__all__ = ["HelpFormatter"]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each option's help (unless it already states one, or there is none
    to show); description and epilog kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text.lower() or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)
