"""``ClientHandle``: what a session needs from a client connection attached to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hub.protocol.errors import RpcError
from hub.protocol.jsonrpc import RequestId
from hub.server.outbox import Outbox

ReplyHandler = Callable[[Any, RpcError | None], None]
"""Called with ``(result, None)`` or ``(None, error)`` when a client answers a hub request."""


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

    @property
    def client_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def role(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def hub_events(self) -> bool: ...

    @property
    def batches(self) -> bool: ...

    @property
    def outbox(self) -> Outbox: ...

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
