"""``MistakeLog``: one concise log line per peer mistake, rate-limited per connection.

A client (or an agent) that sends malformed or refused messages is the peer's problem, not the
hub's: each mistake is worth one line (never a traceback; a traceback in the log means a bug of
the hub), and a peer that makes thousands of them must not flood the log. Each connection has
a token bucket (``hub.ratelimit``): ``burst`` lines at once, then one every ``interval``
seconds; the next line that gets through says how many were left out in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from hub.ratelimit import TokenBucket

BURST = 20
"""Lines a connection may cause at once before the rate limit applies."""
INTERVAL = 5.0
"""Seconds per line once the burst is spent."""


class MistakeLog:
    """The rate-limited log of one connection's mistakes; see the module docstring."""

    __slots__ = ("_bucket", "_clock", "_level", "_logger", "_name", "_suppressed")

    def __init__(
        self,
        logger: logging.Logger,
        name: str,
        *,
        burst: int = BURST,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        level: int = logging.INFO,
    ) -> None:
        self._logger = logger
        self._level = level
        self._name = name
        self._clock = clock
        self._bucket = TokenBucket(1.0 / interval, burst, clock())
        self._suppressed = 0

    @property
    def suppressed(self) -> int:
        """Lines left out since the last one logged."""
        return self._suppressed

    def __call__(self, message: str, *args: Any) -> bool:
        """Log ``"! <name>: " + message % args`` (at ``INFO`` unless another ``level`` was
        given) unless over the rate; return whether it was logged."""
        if self._bucket.take(self._clock()) > 0.0:
            self._suppressed += 1
            return False
        if self._suppressed:
            message += " (%d similar lines left out)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._logger.log(self._level, "! %s: " + message, self._name, *args)
        return True
