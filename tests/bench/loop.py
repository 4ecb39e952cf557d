"""The event loop every bench process runs on: uvloop when it is installed, else asyncio's."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["UVLOOP", "run"]

T = TypeVar("T")

uvloop: Any
try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is part of the test extra
    uvloop = None

UVLOOP = uvloop is not None
"""Whether uvloop is available (the hub's uvicorn picks it up the same way)."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new loop (uvloop when available)."""
    if uvloop is not None:
        result: T = uvloop.run(main)
        return result
    return asyncio.run(main)
