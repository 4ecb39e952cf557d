"""Reconnecting: how long the bridge waits between attempts to regain a lost hub, and when it
gives up.

The first attempt is immediate; after each failure the bridge waits ``BACKOFF_FIRST`` seconds,
doubling up to ``BACKOFF_MAX``, as long as the next attempt starts within the reconnect window.
A fatal failure (a refused token, a bad URL: ``hub.bridge.link``) ends the attempts at once.
Pure: ``hub.bridge.relay`` reads the clock and sleeps.
"""

from __future__ import annotations

from hub.protocol.errors import RpcError

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "RECONNECT_WINDOW", "Backoff", "gone"]

RECONNECT_WINDOW = 60.0
"""Seconds the bridge keeps trying to reach a hub it lost before it gives up."""
BACKOFF_FIRST = 0.05
"""Seconds before the second attempt."""
BACKOFF_MAX = 2.0
"""The longest wait between two attempts."""


class Backoff:
    """The waits of one reconnect, started at ``now`` with ``window`` seconds to succeed."""

    def __init__(self, now: float, window: float = RECONNECT_WINDOW) -> None:
        self.deadline = now + window
        self.delay = BACKOFF_FIRST

    def retry_after(self, now: float, *, fatal: bool) -> float | None:
        """An attempt failed at ``now``: the seconds to wait before the next one, or ``None``
        to give up (``fatal``, or the next attempt would start past the window)."""
        if fatal or now + self.delay > self.deadline:
            return None
        delay = self.delay
        self.delay = min(delay * 2, BACKOFF_MAX)
        return delay


def gone(failure: RpcError) -> RpcError:
    """The error the editor's requests get once the bridge gave up, after ``failure``."""
    return RpcError(failure.code, f"the hub is gone: {failure.message}", failure.data)
