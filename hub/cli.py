"""The ``acp-hub`` command line: ``serve`` and ``demo``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``acp-hub`` console script."""
    print("acp-hub: the server is not built yet", file=sys.stderr)
    return 1
