"""``SessionMetrics``: what the sessions count and time for the hub's ``/metrics``.

One instance per hub, shared by its sessions and registered in the hub's own
``CollectorRegistry`` (several hubs in one process never share a series). Two kinds of
measurement, by cost:

* On the fan-out path (every agent update, every frame handed to clients) a session adds to
  plain integer attributes, once per event and not once per client: ``updates_in``,
  ``deliveries`` and ``delivered_bytes``. An attribute add costs nanoseconds and takes no lock;
  the collector (``collect``) reads them when ``/metrics`` is scraped, in the event loop thread
  that also writes them.
* Rare events (a turn ends, a permission is resolved, a catch-up is sent) are observed into
  ``prometheus_client`` histograms and labelled counters at once.

What is a state rather than an event (sessions by state, prompt queue depth) is not kept
here at all: ``hub.server.metrics`` reads it from the sessions at scrape time.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

__all__ = ["CATCH_UP_KINDS", "PERMISSION_OUTCOMES", "SessionMetrics"]

PERMISSION_OUTCOMES = ("selected", "cancelled", "timed_out")
"""How a permission request ends: a client's option was chosen, it was cancelled (turn
cancelled, agent gone, nobody left to answer), or nobody answered in time."""

CATCH_UP_KINDS = ("replay", "resume", "reset")
"""What an attaching client is sent: the compacted state (``replay``), the retained events after
its cursor (``resume``; the creator of a session gets the events emitted while it was created
this way, from seq 0), or a ``_hub_reset`` and the compacted state (``reset``: the cursor could
not be served)."""

# Durations from tens of milliseconds (a quick answer, a small replay) to an hour (a long
# turn, a permission left open); both ends matter for an alert.
_SHORT = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_LONG = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class SessionMetrics(Collector):
    """The sessions' counters and histograms; see the module docstring."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Counters registered in ``registry``; with ``None``, counted but never exported (a
        session built on its own, in a test)."""
        self.updates_in = 0
        """Session updates received from agents."""
        self.deliveries = 0
        """Live frames handed to clients' outboxes by the fan-out (one per client per frame)."""
        self.delivered_bytes = 0
        """Bytes of those frames."""
        self.catch_up_seconds = Histogram(
            "acp_hub_catch_up_duration_seconds",
            "Time from a client's attach to the last frame of its catch-up taken by its "
            "transport, by kind (replay, resume after a cursor, reset).",
            ["kind"],
            buckets=_SHORT,
            registry=registry,
        )
        self.catch_up_bytes = Counter(
            "acp_hub_catch_up_bytes",
            "Bytes of catch-up frames sent to attaching clients, by kind.",
            ["kind"],
            registry=registry,
        )
        self.permission_outcomes = Counter(
            "acp_hub_permission_outcomes",
            "Permission requests from agents, by how they ended.",
            ["outcome"],
            registry=registry,
        )
        self.permission_answer_seconds = Histogram(
            "acp_hub_permission_answer_seconds",
            "Time from a permission request reaching the hub to its resolution, by outcome.",
            ["outcome"],
            buckets=_LONG,
            registry=registry,
        )
        self.turn_seconds = Histogram(
            "acp_hub_turn_duration_seconds",
            "Time from a prompt reaching the agent to the end of its turn.",
            buckets=_LONG,
            registry=registry,
        )
        for kind in CATCH_UP_KINDS:
            self.catch_up_seconds.labels(kind)
            self.catch_up_bytes.labels(kind)
        for outcome in PERMISSION_OUTCOMES:
            # Every series exists from the start, so that rate() sees the first event.
            self.permission_outcomes.labels(outcome)
            self.permission_answer_seconds.labels(outcome)
        if registry is not None:
            registry.register(self)

    def catch_up(self, kind: str, frames: Iterable[bytes]) -> Iterator[bytes]:
        """``frames`` (a client's catch-up, consumed lazily by its outbox), timed and counted
        under ``kind`` (one of ``CATCH_UP_KINDS``) once the last one was taken: from the
        attach to the transport taking the last frame. A catch-up the client left before its
        end is not observed."""
        start = time.monotonic()
        sent = 0
        for frame in frames:
            sent += len(frame)
            yield frame
        self.catch_up_seconds.labels(kind).observe(time.monotonic() - start)
        self.catch_up_bytes.labels(kind).inc(sent)

    def permission_resolved(self, outcome: str, seconds: float) -> None:
        """One permission request ended with ``outcome`` (one of ``PERMISSION_OUTCOMES``)
        ``seconds`` after it reached the hub."""
        self.permission_outcomes.labels(outcome).inc()
        self.permission_answer_seconds.labels(outcome).observe(seconds)

    def describe(self) -> Iterator[CounterMetricFamily]:
        """The families ``collect`` yields (the registry checks names against collisions)."""
        return self.collect()

    def collect(self) -> Iterator[CounterMetricFamily]:
        """The fan-out's plain counters, as read at scrape time."""
        yield CounterMetricFamily(
            "acp_hub_updates_in",
            "Session updates received from agents.",
            value=self.updates_in,
        )
        yield CounterMetricFamily(
            "acp_hub_deliveries",
            "Live frames handed to clients by the fan-out (one per client per frame).",
            value=self.deliveries,
        )
        yield CounterMetricFamily(
            "acp_hub_delivered_bytes",
            "Bytes of the live frames handed to clients by the fan-out.",
            value=self.delivered_bytes,
        )
