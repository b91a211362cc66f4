"""The ``ppscope`` command line; ``main`` runs it."""

from toolkit.cli.main import main

__all__ = ["main"]
