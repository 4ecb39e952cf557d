"""A token bucket: how much a peer may do at once, and how soon it may do more.

A bucket holds ``burst`` tokens and refills at ``rate`` tokens per second. The server gives
each connection one for its requests (``hub.server.connection``): a request takes one token;
with none left it is refused with ``-32044`` and the time after which one token will be back
(``retry_after``, seconds), so a polite client can wait exactly that long. ``hub.mistakes``
gives each connection one for the log lines its mistakes cause. The clock is passed in, so
the bucket is plain arithmetic and tested without time; it sits at the bottom of the layers,
beside the settings, so that every layer may use it.
"""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` per second up to ``burst``.

    ``rate <= 0`` disables the limit (every ``take`` succeeds).
    """

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = max(1.0, burst)
        self._tokens = self.burst
        self._last = now

    def take(self, now: float, cost: float = 1.0) -> float:
        """Take ``cost`` tokens at time ``now``: ``0.0`` when granted, else the seconds to wait
        before ``cost`` tokens are available (nothing is taken then)."""
        if self.rate <= 0:
            return 0.0
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(self.burst, self._tokens + elapsed * self.rate)
            self._last = now
        if self._tokens >= cost:
            self._tokens -= cost
            return 0.0
        return (cost - self._tokens) / self.rate
