"""The command line: `einmal`'s parser, its commands and what they print."""

from service.cli.einmal import main

__all__ = ["main"]
