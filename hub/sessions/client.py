"""What a session needs from a client attached to it: ``ClientHandle`` and its ``FrameSink``.

The sessions layer never imports the server: the server's connection satisfies
``ClientHandle`` and its outbox satisfies ``FrameSink`` structurally, and the session tests use
list-backed stand-ins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from hub.protocol.errors import RpcError
from hub.protocol.jsonrpc import RequestId
from hub.settings import Role

ReplyHandler = Callable[[Any, RpcError | None], None]
"""Called with ``(result, None)`` or ``(None, error)`` when a client answers a hub request."""


class FrameSink(Protocol):
    """Where a session puts the encoded frames meant for one client, in order.

    Both calls are synchronous and never wait for the client. They return ``False`` once the
    sink stopped accepting frames (the client is closing); a sink may close its client when it
    cannot keep up (the server's outbox closes a slow consumer with 1013).
    """

    def push(self, frame: bytes) -> bool:
        """Queue one encoded frame after everything queued before."""
        ...

    def push_pages(self, pages: Iterable[bytes]) -> bool:
        """Queue the frames ``pages`` yields (a replay), after everything queued before and
        before everything queued later; ``pages`` may be consumed lazily."""
        ...


class ClientHandle(Protocol):
    """One client connection, as seen by the sessions it is attached to.

    ``version`` is the ACP version negotiated on the connection; ``hub_events`` whether it
    receives ``_hub_*`` updates (always for v2; for v1 only when asked for at initialize);
    ``batches`` whether notifications may be grouped into JSON-RPC batch frames (v2 clients
    that asked for it at initialize: ACP v2 allows batches, but common clients refuse them).
    Every frame for the client goes through ``outbox``, so responses, notifications and hub
    requests stay in one order. ``client_id``, ``version``, ``hub_events`` and ``outbox`` are
    fixed once the client can attach: a session reads them once per attachment.
    """

    # Structural: a Protocol's read-only properties, declared one by one.
    @property
    def client_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def program(self) -> str:
        """The client program's own name (its ``initialize`` info), shown only as a detail
        beside ``name``; empty when unknown."""
        ...

    @property
    def principal(self) -> str:
        """Who the client is, from its credential (``hub.access``), never self-declared:
        presence, prompts, permission answers and the audit trail name it."""
        ...

    @property
    def role(self) -> Role: ...

    @property
    def version(self) -> int: ...

    @property
    def hub_events(self) -> bool: ...

    @property
    def batches(self) -> bool: ...

    @property
    def outbox(self) -> FrameSink: ...

    def request(self, method: str, params: dict[str, Any], on_reply: ReplyHandler) -> RequestId:
        """Send a hub->client request; ``on_reply`` gets its answer (or an error when the
        client goes away first). Returns the id the client sees."""
        ...

    def withdraw(self, request_id: RequestId) -> None:
        """Withdraw a request sent with ``request``: ``$/cancel_request`` to the client, and
        a late answer is ignored."""
        ...

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to the client."""
        ...
