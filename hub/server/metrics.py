"""``HubMetrics``: the hub's metrics in the Prometheus text format, served on ``/metrics``.

Every hub has its own ``CollectorRegistry``: two hubs in one process (tests, an embedding
application) never share or collide on a series. The metrics come in three kinds, by cost:

* states (connections, sessions, agents, outbox bytes, prompt queues) are not tracked at
  all while the hub runs: ``_StateCollector`` walks the hub's connections, sessions and
  agents when ``/metrics`` is scraped, in the event loop thread that owns them;
* the fan-out's counters are plain integers of ``hub.sessions.metrics.SessionMetrics``,
  added to once per event (not per client) and read at scrape time;
* rare events (a connection closes, a turn ends, a permission is resolved, a catch-up is
  sent) go straight into ``prometheus_client`` counters and histograms.

``/metrics`` is refused (401) unless the request carries ``Authorization: Bearer`` with the
``metrics_token`` setting; with no token configured it is always refused. The metric names
and labels are listed in ``docs/deployment.md``; ``deploy/grafana-dashboard.json`` graphs them.
"""

from __future__ import annotations

import hmac
from collections import Counter as Tally
from collections.abc import Collection, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from hub import __version__
from hub.agents.supervisor import Supervisor
from hub.sessions.metrics import SessionMetrics
from hub.sessions.registry import SessionRegistry
from hub.settings import Role, Settings
from hub.store import Store

__all__ = ["HubMetrics", "MeasuredHub", "close_code_label"]


class MeasuredOutbox(Protocol):
    @property
    def queued_bytes(self) -> int: ...


class MeasuredConnection(Protocol):
    """What the metrics read of one client connection."""

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def transport(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def role(self) -> Role: ...

    @property
    def outbox(self) -> MeasuredOutbox: ...


class MeasuredHub(Protocol):
    """What the metrics read of the running hub (``hub.server.app.HubApp`` is one), at
    scrape time."""

    @property
    def settings(self) -> Settings: ...

    @property
    def connections(self) -> Collection[MeasuredConnection]: ...

    @property
    def registry(self) -> SessionRegistry | None: ...

    @property
    def supervisor(self) -> Supervisor | None: ...

    @property
    def store(self) -> Store: ...


def close_code_label(code: int | None) -> str:
    """The ``code`` label of a connection's close: the WebSocket code for the standard ones
    (1000-1015) and the hub's own (4000-4099), ``other`` for the rest (a client chooses its
    code: it must not be able to mint a new series with each connection), ``none`` when the
    connection ended without one."""
    if code is None:
        return "none"
    if 1000 <= code <= 1015 or 4000 <= code <= 4099:
        return str(code)
    return "other"


class HubMetrics:
    """The metrics of one hub (see the module docstring); ``render`` is the scrape."""

    def __init__(self, hub: MeasuredHub) -> None:
        self.hub = hub
        self.registry = CollectorRegistry()
        self.sessions = SessionMetrics(self.registry)
        """Handed to the session registry: what the sessions count."""
        self.connections_opened = Counter(
            "acp_hub_connections_opened",
            "Client connections accepted, by transport.",
            ["transport"],
            registry=self.registry,
        )
        self.connection_closes = Counter(
            "acp_hub_connection_closes",
            "Client connections ended, by close code (the hub's own when it closed them, the "
            "client's otherwise; 'other' for codes outside 1000-1015 and 4000-4099).",
            ["code"],
            registry=self.registry,
        )
        self.connections_opened.labels("websocket")
        self.connections_opened.labels("http")
        ProcessCollector(registry=self.registry)
        self.registry.register(_StateCollector(hub))

    def closed(self, code: int | None) -> None:
        """A client connection ended with ``code``."""
        self.connection_closes.labels(close_code_label(code)).inc()

    def render(self) -> bytes:
        """The whole registry in the Prometheus text format."""
        return generate_latest(self.registry)

    async def endpoint(self, request: Request) -> Response:
        """``GET /metrics``: the scrape, for a request with the metrics token only."""
        token = self.hub.settings.metrics_token
        given = request.headers.get("authorization", "")
        scheme, _, credential = given.partition(" ")
        # Constant-time comparison: the token must not leak through response timing.
        if not (
            token
            and scheme.lower() == "bearer"
            and hmac.compare_digest(credential.strip().encode(), token.encode())
        ):
            return PlainTextResponse(
                "metrics need the metrics token (setting metrics_token): "
                "Authorization: Bearer <token>\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="acp-hub metrics"'},
            )
        return Response(
            self.render(),
            media_type=CONTENT_TYPE_LATEST,
            headers={"Cache-Control": "no-store"},
        )


class _StateCollector(Collector):
    """The hub's states, read from its objects at scrape time."""

    def __init__(self, hub: MeasuredHub) -> None:
        self.hub = hub

    def describe(self) -> Iterator[Metric]:
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        hub = self.hub
        yield InfoMetricFamily("acp_hub_build", "The hub's version.", {"version": __version__})

        connections = GaugeMetricFamily(
            "acp_hub_connections",
            "Open client connections, by transport, negotiated protocol version ('none' "
            "before initialize) and role.",
            labels=["transport", "protocol_version", "role"],
        )
        outbox = GaugeMetricFamily(
            "acp_hub_outbox_bytes",
            "Bytes queued for clients and not yet taken by their transports (every frame but "
            "replay pages, bounded per client by outbox_bytes).",
        )
        outbox_max = GaugeMetricFamily(
            "acp_hub_outbox_max_bytes",
            "The largest such queue of one client (close to outbox_bytes: a slow consumer).",
        )
        tally: Tally[tuple[str, str, str]] = Tally()
        queued = largest = 0
        for conn in list(hub.connections):
            version = str(conn.version) if conn.version else "none"
            tally[(conn.transport, version, conn.role)] += 1
            size = conn.outbox.queued_bytes
            queued += size
            largest = max(largest, size)
        for labels, count in sorted(tally.items()):
            connections.add_metric(list(labels), count)
        outbox.add_metric([], queued)
        outbox_max.add_metric([], largest)
        yield connections
        yield outbox
        yield outbox_max

        sessions = GaugeMetricFamily(
            "acp_hub_sessions",
            "Live sessions, by state: 'prompting' (a turn runs), 'idle', 'lost' (the agent "
            "lost it when it restarted).",
            labels=["state"],
        )
        queue = GaugeMetricFamily(
            "acp_hub_prompt_queue_depth", "Prompts waiting in the queues of all sessions."
        )
        queue_max = GaugeMetricFamily(
            "acp_hub_prompt_queue_max_depth", "The longest prompt queue of one session."
        )
        states: Tally[str] = Tally({"prompting": 0, "idle": 0, "lost": 0})
        waiting = longest = 0
        registry = hub.registry
        for session in list(registry.sessions.values()) if registry is not None else ():
            prompting = session.turns.current is not None
            state = "lost" if session.lost else "prompting" if prompting else "idle"
            states[state] += 1
            depth = len(session.turns.queue)
            waiting += depth
            longest = max(longest, depth)
        for state, count in sorted(states.items()):
            sessions.add_metric([state], count)
        # Alike in shape to the outbox gauges above: a total and the largest, then the families.
        queue.add_metric([], waiting)
        queue_max.add_metric([], longest)
        yield sessions
        yield queue
        yield queue_max

        up = GaugeMetricFamily(
            "acp_hub_agent_up",
            "1 while the agent's process is up and initialized, else 0.",
            labels=["agent"],
        )
        restarts = CounterMetricFamily(
            "acp_hub_agent_restarts",
            "Agent processes started after the first one (after an exit, a crash or a "
            "restart), by agent.",
            labels=["agent"],
        )
        supervisor = hub.supervisor
        if supervisor is not None:
            for name in supervisor.names():
                agent = supervisor.get(name)
                up.add_metric([name], 1 if agent.running else 0)
                restarts.add_metric([name], agent.restarts)
        yield up
        yield restarts

        store = hub.store
        store_up = GaugeMetricFamily(
            "acp_hub_store_up",
            "1 while the store takes writes, 0 while its backend is unreachable (writes are "
            "kept and retried).",
            labels=["kind"],
        )
        store_up.add_metric([store.kind], 1 if store.healthy else 0)
        backlog = GaugeMetricFamily(
            "acp_hub_store_backlog_events",
            "Events appended to session logs and not yet written by the store.",
            labels=["kind"],
        )
        backlog.add_metric([store.kind], store.backlog)
        failures = CounterMetricFamily(
            "acp_hub_store_write_failures",
            "Store write attempts that failed (each is retried; nothing is dropped).",
            labels=["kind"],
        )
        failures.add_metric([store.kind], store.write_failures)
        yield store_up
        yield backlog
        yield failures
