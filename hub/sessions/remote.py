"""A client of another node, as the node that owns its session sees it (``RemoteClient``), and
the requests the owner runs for such a client (``run_method``).

``hub.sessions.relay`` makes these for the requests other nodes forward and carries what a
``RemoteClient`` is asked or told back to its node (``docs/deployment.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hub.protocol.errors import NOT_OWNER, hub_error, invalid_params
from hub.sessions import rules
from hub.sessions.client import ClientHandle, ReplyHandler
from hub.sessions.errors import SessionFailure
from hub.sessions.mirror import FORWARDED_METHODS
from hub.settings import Role

__all__ = ["Relay", "RemoteClient", "run_method"]


class Relay(Protocol):
    """Carries what the owner asks or tells a ``RemoteClient`` to the client's node
    (``hub.sessions.relay``)."""

    def ask(
        self, proxy: RemoteClient, method: str, params: dict[str, Any], on_reply: ReplyHandler
    ) -> Any: ...

    def tell(self, proxy: RemoteClient, message: dict[str, Any]) -> None: ...


class _Sink:
    """The outbox of a ``RemoteClient``: it is never attached, so nothing is queued."""

    def push(self, frame: bytes) -> bool:
        return False

    def push_pages(self, pages: Any) -> bool:
        return False


@dataclass(eq=False)
class RemoteClient:
    """A client of another node, as the owner sees it: attached to the owned session as
    ``relayed`` (it is in its presence, permission requests are offered to it) and so outside
    its fan-out (its node reads the events from the store). Requests and notifications for it
    go to its node."""

    client_id: str
    name: str
    role: Role
    version: int
    principal: str = "unknown"
    program: str = ""
    hub_events: bool = True
    batches: bool = False
    outbox: _Sink = field(default_factory=_Sink)
    node: str = ""
    session_id: str = ""
    relay: Relay | None = None

    def request(self, method: str, params: dict[str, Any], on_reply: ReplyHandler) -> Any:
        if self.relay is None or not self.node:
            on_reply(None, hub_error(NOT_OWNER, "the client is on another node"))
            return None
        return self.relay.ask(self, method, params, on_reply)

    def withdraw(self, request_id: Any) -> None:
        if self.relay is not None and self.node:
            self.relay.tell(self, {"op": "withdraw", "rid": request_id})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.relay is not None and self.node:
            self.relay.tell(self, {"op": "notify", "method": method, "params": params})


def run_method(session: Any, client: ClientHandle, method: str, params: dict[str, Any]) -> Any:
    """Owner side: one of ``FORWARDED_METHODS`` for a client of another node."""
    if method == "_hub/set_policy":
        return session.set_policy(
            client, params.get("prompt"), params.get("permission"), params.get("quorum")
        )
    if method.startswith("_hub/lease/") and method in FORWARDED_METHODS:
        target = params.get("clientId")
        action = method.removeprefix("_hub/lease/")
        return session.lease_action(client, action, target if isinstance(target, str) else None)
    if method == "_hub/queue/withdraw":
        queue_id = params.get("queueId")
        if not isinstance(queue_id, str):
            raise SessionFailure(invalid_params("queueId is required"))
        session.withdraw_prompt(client, queue_id)
        return {}
    if method == "_hub/rules/add":
        return rules.add(session, client, params.get("match"), params.get("answer"))
    if method == "_hub/rules/remove":
        return rules.remove(session, client, params.get("ruleId"))
    raise SessionFailure(hub_error(NOT_OWNER, f"{method!r} is not forwarded"))
