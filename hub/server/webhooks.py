"""Webhooks: the hub's notices (``hub.sessions.notices``) posted to HTTP endpoints.

Theory of operation
-------------------
Webhooks come from the config file only (``[[hub.webhooks]]``, docs/configuration.md); nothing
on the wire can add, change or list one. ``parse_webhooks`` checks each table once, at start.

Each webhook has a bounded queue and one delivery task. The session registry hands every notice
of a session this node owns to ``Webhooks.offer``, synchronously, from ``Session.emit``:
``offer`` filters (events, agents, sessions), renders the body and puts it in the queue without
waiting; a full queue drops the notice and counts it (``acp_hub_webhook_deliveries`` with
``result="dropped"``). Nothing on the fan-out path waits for a receiver: a receiver that hangs
holds up its own queue only, never a session, a client or another webhook.

The delivery task posts the queued bodies in order, one at a time, each within ``timeout``
seconds. A 2xx answer delivers it; a 5xx, a timeout or a connection error is retried up to
``retries`` times, after ``retry_delay * 2**attempt`` seconds (at most 60) with full jitter; any
other answer (a 4xx: the receiver refuses it) fails it at once. Every outcome is counted.

With several nodes, only the node that owns a session emits its events (a mirror never does),
so each notice is posted once, by that node, if every node has the same webhooks.

Bodies never carry a token. ``format = "json"`` is the hub's own payload
(docs/webhook.schema.json); ``format = "slack"`` the incoming-webhook shape (``text`` and
``blocks``) Slack, Mattermost and Discord's Slack-compatible endpoint take. With a ``secret``,
each request carries ``X-Acp-Hub-Timestamp`` (Unix seconds, also the body's ``timestamp``) and
``X-Acp-Hub-Signature-256: sha256=HEX``, the HMAC-SHA256 of the body with the secret, as
GitHub signs its deliveries; in the ``json`` format the timestamp is inside what is signed, so a
receiver can refuse an old delivery replayed. A webhook's URL (Slack's holds a secret of its
own) is never logged: log lines name the webhook by its ``name`` (or its index) and its host.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import random
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlsplit

import anyio
import anyio.abc
import httpx
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from prometheus_client import CollectorRegistry, Counter

from hub import __version__
from hub.sessions.notices import NOTICE_EVENTS, Notice

log = logging.getLogger("hub.webhooks")

FORMATS: Final = ("json", "slack")
SIGNATURE_HEADER: Final = "X-Acp-Hub-Signature-256"
TIMESTAMP_HEADER: Final = "X-Acp-Hub-Timestamp"
EVENT_HEADER: Final = "X-Acp-Hub-Event"
MAX_BACKOFF: Final = 60.0
RESULTS: Final = ("delivered", "retried", "failed", "dropped")

_KEYS: Final = frozenset(
    {
        "name",
        "url",
        "events",
        "agents",
        "sessions",
        "secret",
        "format",
        "queue",
        "timeout",
        "retries",
        "retry_delay",
    }
)


@dataclass(frozen=True, slots=True)
class Webhook:
    """One ``[[hub.webhooks]]`` table, checked. Empty ``agents`` / ``sessions``: all."""

    name: str
    url: str
    events: frozenset[str]
    agents: frozenset[str] = frozenset()
    sessions: frozenset[str] = frozenset()
    secret: str = ""
    format: str = "json"
    queue: int = 100
    """Notices waiting for delivery at most; one more is dropped (and counted)."""
    timeout: float = 10.0
    """Seconds one request may take, connecting included."""
    retries: int = 5
    """Attempts after the first on a 5xx, a timeout or a connection error."""
    retry_delay: float = 1.0
    """The first retry's delay before jitter; each further one doubles it (at most 60 s)."""

    def __repr__(self) -> str:  # the URL and the secret stay out of every log line
        return f"Webhook({self.name!r}, {urlsplit(self.url).hostname!r})"

    def wants(self, notice: Notice) -> bool:
        """Whether this webhook is for ``notice``."""
        return (
            notice.event in self.events
            and (not self.agents or notice.agent in self.agents)
            and (not self.sessions or notice.session_id in self.sessions)
        )


def parse_webhooks(tables: Sequence[Any]) -> tuple[Webhook, ...]:
    """The webhooks of ``[[hub.webhooks]]``; ``ValueError`` naming the first bad one."""
    hooks = []
    for index, table in enumerate(tables):
        # Alike in shape only: each config table words and raises its errors its own way.
        where = f"hub.webhooks[{index}]"
        if not isinstance(table, Mapping):
            raise ValueError(f"{where} must be a table")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown key(s): {', '.join(unknown)}")
        url = table.get("url")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{where}: url must be an http(s) URL")
        events = table.get("events")
        if (
            not isinstance(events, list)
            or not events
            or not all(isinstance(e, str) and e in NOTICE_EVENTS for e in events)
        ):
            raise ValueError(f"{where}: events must list some of {', '.join(NOTICE_EVENTS)}")
        filters = {}
        for key in ("agents", "sessions"):
            value = table.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: {key} must be a list of strings")
            filters[key] = frozenset(value)
        name = table.get("name", str(index))
        secret = table.get("secret", "")
        fmt = table.get("format", "json")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise ValueError(f"{where}: name must be a string of 1 to 64 characters")
        if not isinstance(secret, str):
            raise ValueError(f"{where}: secret must be a string")
        if fmt not in FORMATS:
            raise ValueError(f"{where}: format must be one of {', '.join(FORMATS)}")
        numbers: dict[str, Any] = {}
        for key, kind, low, default in (
            ("queue", int, 1, 100),
            ("timeout", float, 0.001, 10.0),
            ("retries", int, 0, 5),
            ("retry_delay", float, 0.0, 1.0),
        ):
            value = table.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{where}: {key} must be a number")
            if kind is int and not isinstance(value, int):
                raise ValueError(f"{where}: {key} must be an integer")
            if value < low:
                raise ValueError(f"{where}: {key} must be at least {low:g}")
            numbers[key] = kind(value)
        hooks.append(
            Webhook(
                name=name,
                url=str(url),
                events=frozenset(events),
                agents=filters["agents"],
                sessions=filters["sessions"],
                secret=secret,
                format=str(fmt),
                **numbers,
            )
        )
    names = [hook.name for hook in hooks]
    if len(set(names)) != len(names):
        raise ValueError("hub.webhooks: two webhooks have the same name")
    return tuple(hooks)


# -- bodies ----------------------------------------------------------------------------------

_SUMMARIES: Final = {
    "permission_waiting": "waits for a permission answer",
    "elicitation_waiting": "asks a question",
    "turn_ended": "ended its turn",
    "agent_exited": "exited",
    "session_lost": "lost the session",
}


def session_link(public_url: str, session_id: str) -> str | None:
    """The session page's address under ``public_url`` (``None`` without one); no token."""
    if not public_url:
        return None
    return f"{public_url.rstrip('/')}/s/{quote(session_id, safe='')}"


def payload(notice: Notice, public_url: str, timestamp: int) -> dict[str, Any]:
    """The ``json`` format's body (docs/webhook.schema.json)."""
    return {
        "event": notice.event,
        "timestamp": timestamp,
        "at": notice.at,
        "hub": {"version": __version__},
        "session": {
            "id": notice.session_id,
            "agent": notice.agent,
            "cwd": notice.cwd,
            "url": session_link(public_url, notice.session_id),
        },
        "seq": notice.seq,
        "detail": notice.detail,
    }


def _mrkdwn(text: str) -> str:
    """``text`` safe in Slack's mrkdwn: no mentions, links or formatting of its own."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(notice: Notice, public_url: str, timestamp: int) -> dict[str, Any]:
    """The ``slack`` format's body: ``text`` (the fallback) and ``blocks``, nothing else (the
    receivers refuse fields they do not know), so its timestamp is in the header only."""
    detail = notice.detail
    what = _SUMMARIES.get(notice.event, notice.event)
    line = f"{notice.agent} {what} in session {notice.session_id}"
    extra = str(detail.get("title") or detail.get("message") or detail.get("stopReason") or "")
    text = f"{line}: {extra}" if extra else line
    link = session_link(public_url, notice.session_id)
    body = _mrkdwn(text)
    if link is not None:
        body += f"\n<{link}|Open the session>"
    return {
        "text": text,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": body}}],
    }


def signature(secret: str, body: bytes) -> str:
    """The ``X-Acp-Hub-Signature-256`` value of ``body``: ``sha256=`` and the hex HMAC."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Delivery:
    """One queued request: its event and its encoded, possibly signed, body."""

    event: str
    body: bytes
    headers: dict[str, str]


def render(hook: Webhook, notice: Notice, public_url: str) -> Delivery:
    """The request ``hook`` makes for ``notice``."""
    timestamp = int(notice.at)
    shape = slack_payload if hook.format == "slack" else payload
    body = orjson.dumps(shape(notice, public_url, timestamp))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"acp-hub/{__version__}",
        EVENT_HEADER: notice.event,
        TIMESTAMP_HEADER: str(timestamp),
    }
    if hook.secret:
        headers[SIGNATURE_HEADER] = signature(hook.secret, body)
    return Delivery(notice.event, body, headers)


# -- delivery --------------------------------------------------------------------------------


class Webhooks:
    """The configured webhooks of one hub: ``offer`` queues, ``running`` delivers."""

    def __init__(
        self, hooks: Sequence[Webhook], public_url: str, registry: CollectorRegistry
    ) -> None:
        self.hooks = tuple(hooks)
        self.public_url = public_url
        self.deliveries = Counter(
            "acp_hub_webhook_deliveries",
            "Webhook notices by webhook and result: delivered, retried (one more attempt), "
            "failed (a 4xx or out of retries), dropped (the webhook's queue was full).",
            ["webhook", "result"],
            registry=registry,
        )
        self._progress = anyio.Event()
        self._queues: list[
            tuple[MemoryObjectSendStream[Delivery], MemoryObjectReceiveStream[Delivery]]
        ] = []
        for hook in self.hooks:
            self._queues.append(anyio.create_memory_object_stream[Delivery](hook.queue))
            for result in RESULTS:
                self.deliveries.labels(hook.name, result)

    def offer(self, notice: Notice) -> None:
        """Queue ``notice`` for every webhook that wants it, without waiting (a full queue
        drops it). Called from ``Session.emit``: never blocks, never raises."""
        for hook, (send, _) in zip(self.hooks, self._queues, strict=True):
            if not hook.wants(notice):
                continue
            try:
                send.send_nowait(render(hook, notice, self.public_url))
            except anyio.WouldBlock:
                self.deliveries.labels(hook.name, "dropped").inc()
                self._progressed()
                log.warning("! webhook %s: queue full, %s dropped", hook.name, notice.event)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # the hub is stopping

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Webhooks]:
        """Deliver for the duration of the block; what is still queued at its end is left."""
        if not self.hooks:
            yield self
            return
        try:
            async with (
                httpx.AsyncClient(follow_redirects=False) as client,
                anyio.create_task_group() as tg,
            ):
                for hook, (_, receive) in zip(self.hooks, self._queues, strict=True):
                    tg.start_soon(self._deliver_all, client, hook, receive, name=repr(hook))
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            for send, receive in self._queues:
                send.close()
                receive.close()

    async def _deliver_all(
        self,
        client: httpx.AsyncClient,
        hook: Webhook,
        queue: MemoryObjectReceiveStream[Delivery],
    ) -> None:
        async for delivery in queue:
            result = await self._deliver(client, hook, delivery)
            self.deliveries.labels(hook.name, result).inc()
            self._progressed()

    def _progressed(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    async def progress(self) -> None:
        """Return after the next outcome is counted (delivered, retried, failed, dropped)."""
        await self._progress.wait()

    async def _deliver(self, client: httpx.AsyncClient, hook: Webhook, delivery: Delivery) -> str:
        """Post ``delivery``, retrying as the module docstring says: its final result."""
        host = urlsplit(hook.url).hostname
        for attempt in range(hook.retries + 1):
            if attempt:
                self.deliveries.labels(hook.name, "retried").inc()
                self._progressed()
                backoff = min(MAX_BACKOFF, hook.retry_delay * 2 ** (attempt - 1))
                await anyio.sleep(random.uniform(0, backoff))
            started = time.monotonic()
            try:
                with anyio.fail_after(hook.timeout):
                    answer = await client.post(
                        hook.url,
                        content=delivery.body,
                        headers=delivery.headers,
                        timeout=hook.timeout,
                    )
            except (TimeoutError, httpx.TimeoutException):
                why = f"no answer within {hook.timeout:g}s"
            except httpx.HTTPError as exc:
                why = type(exc).__name__
            else:
                if 200 <= answer.status_code < 300:
                    return "delivered"
                why = f"HTTP {answer.status_code}"
                if answer.status_code < 500:
                    log.warning(
                        "! webhook %s (%s): %s refused: %s", hook.name, host, delivery.event, why
                    )
                    return "failed"
            log.info(
                "! webhook %s (%s): %s attempt %d failed after %.1fs: %s",
                hook.name,
                host,
                delivery.event,
                attempt + 1,
                time.monotonic() - started,
                why,
            )
        log.warning(
            "! webhook %s (%s): %s not delivered after %d attempts",
            hook.name,
            host,
            delivery.event,
            hook.retries + 1,
        )
        return "failed"
