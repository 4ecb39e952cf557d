"""``RestartPolicy``: when an agent starts again after its process ended, and how long the hub
waits for it at each step of a start and a shutdown.

Nothing restarts by itself (``hub.agents.agent``): the next operation starts a new process,
after ``delay`` when the last ones crashed soon after starting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hub.agents.process import ShutdownTimings

__all__ = ["RestartPolicy"]


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """Timing of starts, restarts and shutdowns (seconds).

    A crash within ``healthy_after`` seconds of a start doubles the delay before the next
    start, from ``backoff_initial`` up to ``backoff_max``; a crash after a healthy period
    starts over from ``backoff_initial``.
    """

    backoff_initial: float = 0.1
    backoff_max: float = 5.0
    healthy_after: float = 10.0
    initialize_timeout: float = 30.0
    response_timeout: float | None = 60.0
    """How long the hub waits for the answer to a session request (``session/new``, resume,
    load, close, delete, config options, mode) before it fails with ``AGENT_UNAVAILABLE``
    and is withdrawn; ``None``: for ever. Not for ``session/prompt``, whose answer may
    legitimately come at the end of a turn, nor for a login, which waits for a person."""
    drain_timeout: float = 2.0
    shutdown: ShutdownTimings = field(default_factory=ShutdownTimings)

    def delay(self, failures: int) -> float:
        """The delay before the next start after ``failures`` consecutive quick failures."""
        if failures <= 0:
            return 0.0
        return float(min(self.backoff_initial * 2 ** min(failures - 1, 62), self.backoff_max))
